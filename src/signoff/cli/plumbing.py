"""What every command shares: one way to fail, to run async work, and to open the application.

Exit status: ``0`` done; ``1`` refused (a stable code says why); ``2`` the command line or the
server's configuration is wrong (also typer's own usage errors). Every refusal is one line on
stderr ending in ``[CODE]``.

Everything heavy (the store, the application, the manifests) is imported inside the function
that needs it, so a command's ``--help`` loads none of it (``tests/cli/test_start_up.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from signoff.app import Application
    from signoff.core.ports import Store
    from signoff.core.registry import ActionRegistry

T = TypeVar("T")

REFUSED = 1
MISCONFIGURED = 2


def fail(message: str, code: str, status: int = REFUSED) -> NoReturn:
    """One line on stderr, ``message [CODE]``, and exit ``status`` (non-zero)."""
    from rich.console import Console

    Console(stderr=True).print(f"{message} [{code}]", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(status)


def run(work: Awaitable[T]) -> T:
    """Run ``work``; a store problem becomes one line and exit 1."""
    import asyncio

    from signoff.store.errors import StoreError

    async def main() -> T:
        return await work

    try:
        return asyncio.run(main())
    except StoreError as exc:
        fail(str(exc), exc.code)


async def open_existing(url: str) -> Store:
    """Open a database for reading; never creates or migrates one (SQLite included)."""
    from signoff.store.factory import open_store

    require_existing(url)
    return await open_store(url, upgrade=False)


def require_existing(url: str) -> None:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from signoff.store.factory import MEMORY_URL

    if url == MEMORY_URL:
        return
    try:
        parsed = make_url(url)
    except ArgumentError:
        fail(f"not a database URL: {url!r}", "DATABASE_UNSUPPORTED")
    if parsed.get_backend_name() == "sqlite" and parsed.database:
        path = Path(parsed.database)
        if parsed.database != ":memory:" and not path.exists():
            fail(f"no database at {path}", "DATABASE_NOT_FOUND")


def registry_or_fail(manifests: str) -> ActionRegistry:
    """Load the manifests or fail saying why: a missing directory, or how many problems."""
    from signoff.app import load_registry
    from signoff.manifest import ManifestErrors

    directory = Path(manifests)
    if not directory.is_dir():
        fail(
            f"{manifests}/ not found (run in the project directory or pass --manifests DIR)",
            "MANIFESTS_NOT_FOUND",
        )
    try:
        return load_registry(directory)
    except ManifestErrors as exc:
        count = len(exc.problems)
        fail(
            f"the manifests in {manifests} do not load ({count} problem{'s' * (count != 1)}; "
            "run signoff check)",
            "MANIFEST_INVALID",
        )


def with_application(
    database: str, manifests: str, work: Callable[[Application], Awaitable[T]]
) -> T:
    """Open the existing database and the manifests, run ``work``, drain and close."""
    from signoff.app import Settings, build_application

    async def main() -> T:
        registry = registry_or_fail(manifests)
        store = await open_existing(database)
        application = await build_application(
            Settings(database_url=database, manifests_dir=Path(manifests)),
            registry=registry,
            store=store,
        )
        try:
            return await work(application)
        finally:
            await application.close()

    return run(main())
