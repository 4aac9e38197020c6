"""`signoff runs list|show`: read runs and their audit trail straight from the database."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from signoff.cli import redispatch
from signoff.cli.options import DEFAULT_DATABASE_URL, DatabaseOption
from signoff.cli.plumbing import fail, open_existing, run
from signoff.core.ports import AuditEvent
from signoff.core.run import ActionRun, RunStatus

TenantOption = Annotated[
    str | None,
    typer.Option("--tenant", help="Only this tenant's runs (default: every tenant)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


async def _list(
    database: str,
    tenant: str | None,
    statuses: list[RunStatus],
    limit: int,
    before: str | None,
) -> list[ActionRun]:
    store = await open_existing(database)
    try:
        async with store.unit() as unit:
            return await unit.runs.list(
                tenant_id=tenant, statuses=statuses or None, limit=limit, before_run_id=before
            )
    finally:
        await store.close()


async def _show(database: str, run_id: str) -> tuple[ActionRun | None, list[AuditEvent]]:
    store = await open_existing(database)
    try:
        async with store.unit() as unit:
            found = await unit.runs.get(run_id)
            events = await unit.audit.list_for_run(run_id) if found is not None else []
        return found, events
    finally:
        await store.close()


def _runs_table(runs: list[ActionRun]) -> Table:
    table = Table(title=f"{len(runs)} run{'s' * (len(runs) != 1)}, newest first")
    for column in ("run_id", "tenant", "action", "status", "code", "principal", "key", "updated"):
        table.add_column(column, overflow="fold")
    for r in runs:
        table.add_row(
            r.run_id,
            r.tenant_id,
            r.action_id,
            str(r.status),
            r.result.code if r.result else "",
            r.principal.id,
            r.idempotency_key or "",
            r.updated_at.isoformat(timespec="seconds"),
        )
    return table


def _run_table(r: ActionRun) -> Table:
    table = Table(title=f"run {r.run_id}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    rows = {
        "tenant": r.tenant_id,
        "action": r.action_id,
        "status": f"{r.status} (version {r.version})",
        "principal": f"{r.principal.id} [{', '.join(r.principal.roles)}]",
        "proposer": f"{r.proposer_type} via {r.channel}",
        "idempotency key": r.idempotency_key or "",
        "resource": r.resource or "",
        "attempt": f"{r.attempt} {r.attempt_token or ''}".strip(),
        "result": f"{r.result.status} {r.result.code}: {r.result.message}" if r.result else "",
        "duplicate of": r.duplicate_of or "",
        "created": r.created_at.isoformat(),
        "updated": r.updated_at.isoformat(),
    }
    for name, value in rows.items():
        table.add_row(name, value)
    return table


def _audit_table(events: list[AuditEvent]) -> Table:
    table = Table(title="audit")
    for column in ("seq", "at", "kind", "actor", "status", "code"):
        table.add_column(column, overflow="fold")
    for e in events:
        table.add_row(
            str(e.seq),
            e.at.isoformat(),
            e.kind,
            e.actor or "",
            e.status or "",
            e.code or "",
        )
    return table


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    runs = typer.Typer(
        help="Inspect governed runs in the database; re-dispatch one after review.",
        no_args_is_help=True,
    )
    app.add_typer(runs, name="runs")
    redispatch.register(runs)

    @runs.command("list")
    def list_runs(
        database: DatabaseOption = DEFAULT_DATABASE_URL,
        tenant: TenantOption = None,
        status: Annotated[
            list[RunStatus] | None,
            typer.Option(
                "--status", help="Only runs in this status (repeatable).", case_sensitive=False
            ),
        ] = None,
        limit: Annotated[int, typer.Option(min=1, max=10_000, help="At most this many.")] = 50,
        before: Annotated[
            str | None, typer.Option(help="Only runs older than this run id (paging).")
        ] = None,
        as_json: JsonOption = False,
    ) -> None:
        """List runs, newest first."""
        found = run(_list(database, tenant, list(status or []), limit, before))
        if as_json:
            typer.echo("[" + ",".join(r.model_dump_json() for r in found) + "]")
            return
        Console().print(_runs_table(found))

    @runs.command("show")
    def show(
        run_id: Annotated[str, typer.Argument(help="The run id.")],
        database: DatabaseOption = DEFAULT_DATABASE_URL,
        tenant: TenantOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """Show one run and its audit trail."""
        found, events = run(_show(database, run_id))
        if found is None or (tenant is not None and found.tenant_id != tenant):
            fail(f"no run {run_id}", "ACTION_RUN_NOT_FOUND")
        if as_json:
            audit = [
                {
                    "seq": e.seq,
                    "at": e.at.isoformat(),
                    "kind": e.kind,
                    "actor": e.actor,
                    "status": e.status,
                    "code": e.code,
                    "data": e.data,
                }
                for e in events
            ]
            typer.echo(json.dumps({"run": json.loads(found.model_dump_json()), "audit": audit}))
            return
        console = Console()
        console.print(_run_table(found))
        console.print(_audit_table(events))
