"""`signoff db upgrade|status|purge`."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, TypeVar

import typer

from signoff.cli.options import DEFAULT_DATABASE_URL, DatabaseOption
from signoff.cli.plumbing import fail, open_existing, run
from signoff.store.factory import MEMORY_URL

T = TypeVar("T")
_DURATION = re.compile(r"^(?:[0-9]+(?:ms|s|m|h|d))+$")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    db = typer.Typer(
        rich_markup_mode=None, help="Database schema and housekeeping.", no_args_is_help=True
    )
    app.add_typer(db, name="db")

    @db.command("upgrade")
    def upgrade(database: DatabaseOption = DEFAULT_DATABASE_URL) -> None:
        """Apply the schema migrations this version needs (safe to run from several hosts)."""
        if database == MEMORY_URL:
            fail("memory:// has no schema to upgrade", "DATABASE_UNSUPPORTED")
        from signoff.store.sql import upgrade_database

        before, after = run(upgrade_database(database))
        if before == after:
            typer.echo(f"database already at revision {after}")
        else:
            typer.echo(f"database upgraded from {before or 'an empty schema'} to revision {after}")

    @db.command("status")
    def status(database: DatabaseOption = DEFAULT_DATABASE_URL) -> None:
        """Print the schema revision; exit 1 if `signoff db upgrade` is needed."""
        if database == MEMORY_URL:
            fail("memory:// has no schema", "DATABASE_UNSUPPORTED")
        from signoff.store.sql import schema_status

        current, head = run(schema_status(database))
        typer.echo(f"database at revision {current or '(empty)'}; this signoff needs {head}")
        if current != head:
            fail("run `signoff db upgrade`", "DATABASE_SCHEMA_OUT_OF_DATE")

    @db.command("purge")
    def purge(
        database: DatabaseOption = DEFAULT_DATABASE_URL,
        older_than: Annotated[
            str,
            typer.Option(help="Keep completed duplicate results this long (e.g. 24h, 7d, 90m)."),
        ] = "24h",
    ) -> None:
        """Forget completed duplicate results past their retention; running ones never."""
        if not _DURATION.match(older_than):
            fail(f"not a duration: {older_than!r} (e.g. 24h, 7d, 1h30m)", "INVALID_ARGUMENT")
        from signoff.manifest.durations import parse_duration
        from signoff.store.retention import purge_duplicates

        retention = parse_duration(older_than)  # matched above, so never empty

        async def work() -> int:
            store = await open_existing(database)
            try:
                return await purge_duplicates(store, datetime.now(UTC), retention)
            finally:
                await store.close()

        purged = run(work())
        typer.echo(f"purged {purged} completed duplicate entr{'y' if purged == 1 else 'ies'}")
