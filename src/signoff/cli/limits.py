"""`signoff limits usage`: how much of each cumulative limit a subject has used right now."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated

import typer

from signoff.cli.options import (
    DEFAULT_DATABASE_URL,
    DEFAULT_MANIFESTS,
    DatabaseOption,
    ManifestsOption,
)
from signoff.cli.plumbing import fail, open_existing, registry_or_fail, run


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    limits = typer.Typer(
        rich_markup_mode=None, help="Cumulative limits (spec.limits).", no_args_is_help=True
    )
    app.add_typer(limits, name="limits")

    @limits.command("usage")
    def usage(
        action: Annotated[str, typer.Option("--action", help="The action id.")],
        tenant: Annotated[str, typer.Option("--tenant", help="The tenant.")],
        principal: Annotated[
            str | None, typer.Option("--principal", help="For per: principal limits.")
        ] = None,
        resource: Annotated[
            str | None, typer.Option("--resource", help="For per: resource limits.")
        ] = None,
        database: DatabaseOption = DEFAULT_DATABASE_URL,
        manifests: ManifestsOption = DEFAULT_MANIFESTS,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
    ) -> None:
        """Each limit of ACTION: calls and sum in its window for the subject, against the max."""
        from rich.console import Console
        from rich.table import Table

        from signoff.core.limits import LimitCheck, current_usage, subject_of, usage_record

        registry = registry_or_fail(manifests)
        compiled = registry.resolve(action)
        if compiled is None:
            fail(f"no action {action!r} in {manifests}", "ACTION_NOT_REGISTERED")
        checks = []
        for spec in compiled.definition.limits:
            if spec.per.value == "principal" and principal is None:
                continue
            if spec.per.value == "resource" and resource is None:
                continue
            subject = subject_of(spec, tenant, principal or "", resource)
            checks.append(LimitCheck(spec, action, tenant, subject))
        if not checks:
            fail(
                f"{action} has no limit for this subject (limits per principal need "
                "--principal, per resource --resource)",
                "LIMIT_NOT_FOUND",
            )

        async def work() -> list[dict[str, object]]:
            store = await open_existing(database)
            try:
                async with store.unit() as unit:
                    found = await current_usage(unit.limits, checks, datetime.now(UTC))
                return [usage_record(u) for u in found]
            finally:
                await store.close()

        records = run(work())
        if as_json:
            for record in records:
                typer.echo(json.dumps(record))
            return
        table = Table(title=f"limits of {action} in tenant {tenant}")
        for column in ("limit", "per", "subject", "window", "calls", "sum", "on exceed"):
            table.add_column(column, overflow="fold")
        for r in records:
            calls = f"{r['count']} of {r['count_max']}" if r["count_max"] is not None else "-"
            total = f"{r['sum']:g} of {r['sum_max']:g}" if r["sum_max"] is not None else "-"
            table.add_row(
                str(r["limit"]),
                str(r["per"]),
                str(r["subject"]),
                f"{r['window_seconds']:g}s",
                calls,
                total,
                str(r["on_exceed"]),
            )
        Console().print(table)
