"""The ``signoff`` command line. Each command group lives in its own module.

Start-up is kept small: a command module imports only ``typer`` and the light option modules at
the top, and everything heavy (the store, the MCP SDK, the web surface) inside the function that
runs, so ``signoff --help`` and ``signoff --version`` load none of it (``tests/cli/test_start_up.py``
pins the set; ``benchmarks/cli_start_up.py`` measures it).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from signoff import __version__
from signoff.cli import (
    approvals,
    audit,
    check,
    db,
    demo,
    init,
    limits,
    policy,
    recover,
    runs,
    serve,
    token,
)
from signoff.cli.plumbing import MISCONFIGURED
from signoff.extras import ExtraMissing

app = typer.Typer(
    rich_markup_mode=None,
    name="signoff",
    help="A governed MCP server for business actions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"signoff {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """A governed MCP server for business actions."""


init.register(app)
check.register(app)
serve.register(app)
app.command("demo")(demo.demo)
db.register(app)
runs.register(app)
approvals.register(app)
recover.register(app)
audit.register(app)
limits.register(app)
policy.register(app)
token.register(app)


def main() -> None:
    try:
        app()
    except ExtraMissing as exc:  # a configured feature's extra is not installed: say which
        print(f"{exc} [{exc.code}]", file=sys.stderr)
        raise SystemExit(MISCONFIGURED) from None
