"""`signoff init DIR`: a project to start from, that `signoff check DIR` passes as written.

It writes one example action with its ``tests:`` (``manifests/refund-issue.yaml``), the executor
the manifest names (``refunds/executors.py``), ``signoff.env`` with every setting commented out
(made from ``signoff.settings``, so it lists exactly what this version reads), the manifest JSON
Schema for editors, a ``.gitignore`` and a short README. It never overwrites a file.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Annotated

import typer

# What the package ships under signoff/scaffold/, and where each file goes in the project.
TEMPLATES = {
    "manifests/refund-issue.yaml": "manifests/refund-issue.yaml",
    "refunds/__init__.py": "refunds/__init__.py",
    "refunds/executors.py": "refunds/executors.py",
    "agent.py": "agent.py",
    "README.md": "README.md",
    "gitignore": ".gitignore",
}


def project_files(name: str) -> dict[str, str]:
    """Every file ``signoff init`` writes, by its path in the project."""
    from signoff.manifest import shipped_schema_text
    from signoff.settings import env_file

    scaffold = files("signoff") / "scaffold"
    written = {target: _text(scaffold, source) for source, target in TEMPLATES.items()}
    written["README.md"] = written["README.md"].replace("{name}", name)
    written["signoff.env"] = env_file()
    written["manifest.schema.json"] = shipped_schema_text()
    return written


def _text(root: Traversable, relative: str) -> str:
    node = root
    for part in relative.split("/"):
        node = node / part
    return node.read_text(encoding="utf-8")


def init(
    directory: Annotated[Path, typer.Argument(help="The project directory (created if missing).")],
) -> None:
    """Start a project: one example action with its tests:, its executor, every setting."""
    from signoff.cli.plumbing import fail

    planned = project_files(directory.resolve().name)
    existing = sorted(path for path in planned if (directory / path).exists())
    if existing:
        fail(
            f"{directory} already has {', '.join(existing)}; nothing was written",
            "INIT_WOULD_OVERWRITE",
        )
    for relative, text in planned.items():
        target = directory / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    echo = typer.echo
    echo(f"signoff init: a project in {directory}")
    for relative in sorted(planned):
        echo(f"  {relative}")
    echo("")
    echo("Next:")
    echo(f"  cd {directory}")
    echo("  signoff check                      # validate, and run the manifests' tests: cases")
    echo("  set -a; . ./signoff.env; set +a    # once you have set what you need in it")
    echo("  signoff serve --transport http")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    app.command("init")(init)
