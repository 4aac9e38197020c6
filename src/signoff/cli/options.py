"""Options every command shares (contract §8)."""

from __future__ import annotations

from typing import Annotated

import typer

from signoff.store.factory import DEFAULT_DATABASE_URL

DatabaseOption = Annotated[
    str,
    typer.Option(
        "--database",
        envvar="SIGNOFF_DATABASE_URL",
        help="Database URL (memory:// for a throwaway in-memory store).",
    ),
]
ManifestsOption = Annotated[
    str,
    typer.Option("--manifests", envvar="SIGNOFF_MANIFESTS", help="Directory of action manifests."),
]
DEFAULT_MANIFESTS = "manifests"
__all__ = ["DEFAULT_DATABASE_URL", "DEFAULT_MANIFESTS", "DatabaseOption", "ManifestsOption"]
