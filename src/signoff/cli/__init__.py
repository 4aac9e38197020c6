"""The ``signoff`` command line. Each command group lives in its own module."""

from __future__ import annotations

import sys

import typer

from signoff.cli import approvals, audit, check, db, demo, limits, recover, runs, serve
from signoff.cli.plumbing import MISCONFIGURED
from signoff.extras import ExtraMissing

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
    try:
        app()
    except ExtraMissing as exc:  # a configured feature's extra is not installed: say which
        print(f"{exc} [{exc.code}]", file=sys.stderr)
        raise SystemExit(MISCONFIGURED) from None
