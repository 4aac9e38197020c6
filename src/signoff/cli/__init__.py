"""The ``signoff`` command line. Each command group lives in its own module."""

from __future__ import annotations

import typer

from signoff.cli import approvals, audit, check, db, demo, limits, recover, runs, serve

app = typer.Typer(
    name="signoff",
    help="A governed MCP server for business actions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
check.register(app)
serve.register(app)
app.command("demo")(demo.demo)
db.register(app)
runs.register(app)
approvals.register(app)
recover.register(app)
audit.register(app)
limits.register(app)


def main() -> None:
    app()
