"""`signoff runs list|show`: read runs and their audit trail straight from the database."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from signoff.cli import redispatch
from signoff.cli.options import DEFAULT_DATABASE_URL, DatabaseOption
from signoff.cli.plumbing import MISCONFIGURED, fail, open_existing, run
from signoff.cli.run_ids import resolve_run_id
from signoff.core.statuses import RunStatus, parse_status, shown_statuses

if TYPE_CHECKING:
    from rich.table import Table

    from signoff.core.ports import AuditEvent
    from signoff.core.run import ActionRun

TenantOption = Annotated[
    str | None,
    typer.Option("--tenant", help="Only this tenant's runs (default: every tenant)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@dataclass(frozen=True)
class RunFilter:
    """What ``runs list`` keeps beyond tenant and status (which the store filters itself)."""

    action: str | None = None
    principal: str | None = None
    code: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def keeps(self, r: ActionRun) -> bool:
        return (
            (self.action is None or r.action_id == self.action)
            and (self.principal is None or r.principal.id == self.principal)
            and (self.code is None or (r.result is not None and r.result.code == self.code))
            and (self.until is None or r.created_at < self.until)
        )


PAGE = 500
MAX_SCANNED = 100_000


async def _list(
    database: str,
    tenant: str | None,
    statuses: list[RunStatus],
    limit: int,
    before: str | None,
    keep: RunFilter,
) -> list[ActionRun]:
    """Newest first, paging through the store until ``limit`` runs pass ``keep``. Ids are
    time-ordered, so the scan stops at the first run created before ``since``."""
    store = await open_existing(database)
    found: list[ActionRun] = []
    scanned = 0
    try:
        while len(found) < limit and scanned < MAX_SCANNED:
            async with store.unit() as unit:
                page = await unit.runs.list(
                    tenant_id=tenant, statuses=statuses or None, limit=PAGE, before_run_id=before
                )
            scanned += len(page)
            for r in page:
                if keep.since is not None and r.created_at < keep.since:
                    return found
                if keep.keeps(r):
                    found.append(r)
                    if len(found) == limit:
                        return found
            if len(page) < PAGE:
                break
            before = page[-1].run_id
        return found
    finally:
        await store.close()


async def _show(
    database: str, given: str, tenant: str | None
) -> tuple[ActionRun | None, list[AuditEvent]]:
    store = await open_existing(database)
    try:
        run_id = await resolve_run_id(store, given, tenant)
        if run_id is None:
            return None, []
        async with store.unit() as unit:
            found = await unit.runs.get(run_id)
            events = await unit.audit.list_for_run(run_id) if found is not None else []
        return found, events
    finally:
        await store.close()


def _when(value: str | None, option: str) -> datetime | None:
    """An ISO 8601 date or time (UTC unless it says otherwise), or a span back from now:
    ``30m``, ``2h``, ``7d``."""
    if value is None:
        return None
    text = value.strip()
    span = re.fullmatch(r"(\d+)([smhd])", text)
    if span:
        seconds = int(span[1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[span[2]]
        return datetime.now(UTC) - timedelta(seconds=seconds)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        fail(
            f"{option} {value!r}: give an ISO 8601 time (2026-12-01T09:00) or a span (30m, 2h, 7d)",
            "INVALID_ARGUMENT",
        )
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _statuses(names: list[str]) -> list[RunStatus]:
    """``--status`` values by the names people read, or the stored ones; anything else exits 2."""
    found = []
    for name in names:
        status = parse_status(name)
        if status is None:
            fail(
                f"--status {name!r}: not a status (one of {', '.join(shown_statuses())})",
                "INVALID_ARGUMENT",
                MISCONFIGURED,
            )
        found.append(status)
    return found


def _runs_table(runs: list[ActionRun]) -> Table:
    from rich.table import Table

    from signoff.core.short_ids import SHORT_CHARS, short_id
    from signoff.core.statuses import shown_status

    table = Table(title=f"{len(runs)} run{'s' * (len(runs) != 1)}, newest first")
    # An id is copied and pasted: the short one, never wrapped, whatever the terminal width.
    table.add_column("run", no_wrap=True, min_width=SHORT_CHARS)
    table.add_column("tenant", overflow="fold")
    table.add_column("action", overflow="fold")
    # A status is an identifier too: read whole, never broken across lines.
    table.add_column("status", no_wrap=True)
    for column in ("code", "principal", "key", "updated"):
        table.add_column(column, overflow="fold")
    for r in runs:
        table.add_row(
            short_id(r.run_id),
            r.tenant_id,
            r.action_id,
            shown_status(r.status),
            r.result.code if r.result else "",
            r.principal.id,
            r.idempotency_key or "",
            r.updated_at.isoformat(timespec="seconds"),
        )
    return table


def _run_table(r: ActionRun) -> Table:
    from rich.markup import escape
    from rich.table import Table

    from signoff.core.statuses import shown_status

    table = Table(title=f"run {r.run_id}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    rows = {
        "tenant": r.tenant_id,
        "action": r.action_id,
        "status": f"{shown_status(r.status)} (version {r.version})",
        "principal": f"{r.principal.id} [{', '.join(r.principal.roles)}]",
        "proposer": f"{r.proposer_type} via {r.channel}",
        "idempotency key": r.idempotency_key or "",
        "resource": r.resource or "",
        "attempt": f"{r.attempt} {r.attempt_token or ''}".strip(),
        "result": _result_line(r),
        "duplicate of": r.duplicate_of or "",
        "created": r.created_at.isoformat(),
        "updated": r.updated_at.isoformat(),
    }
    if r.result is not None and r.result.output is not None:
        rows["output"] = json.dumps(r.result.output, indent=2, ensure_ascii=False)
    for name, value in rows.items():
        table.add_row(name, escape(value))
    return table


def _result_line(r: ActionRun) -> str:
    """``FAILED · INVOICE_NOT_FOUND · retry AFTER_CORRECTION — No such invoice.``"""
    if r.result is None:
        return ""
    parts = [str(r.result.status)]
    if r.result.code != str(r.result.status):
        parts.append(r.result.code)
    parts.append(f"retry {r.result.retry}")
    line = " · ".join(parts)
    return f"{line} — {r.result.message}" if r.result.message else line


def _audit_table(events: list[AuditEvent]) -> Table:
    from rich.table import Table

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
        rich_markup_mode=None,
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
            list[str] | None,
            typer.Option(
                "--status",
                help=f"Only runs in this status (repeatable): {', '.join(shown_statuses())}. "
                "WAITING_APPROVAL is accepted for PENDING_APPROVAL.",
                metavar="STATUS",
            ),
        ] = None,
        limit: Annotated[int, typer.Option(min=1, max=10_000, help="At most this many.")] = 50,
        before: Annotated[
            str | None, typer.Option(help="Only runs older than this run id (paging).")
        ] = None,
        action: Annotated[str | None, typer.Option(help="Only runs of this action id.")] = None,
        principal: Annotated[
            str | None, typer.Option(help="Only runs proposed by this principal id.")
        ] = None,
        code: Annotated[
            str | None, typer.Option(help="Only runs whose result has this code.")
        ] = None,
        since: Annotated[
            str | None,
            typer.Option(
                help="Only runs created at or after this time (ISO 8601, or 30m, 2h, 7d)."
            ),
        ] = None,
        until: Annotated[
            str | None,
            typer.Option(help="Only runs created before this time (ISO 8601, or 30m, 2h, 7d)."),
        ] = None,
        as_json: JsonOption = False,
    ) -> None:
        """List runs, newest first."""
        keep = RunFilter(action, principal, code, _when(since, "--since"), _when(until, "--until"))
        found = run(_list(database, tenant, _statuses(status or []), limit, before, keep))
        if as_json:
            typer.echo("[" + ",".join(r.model_dump_json() for r in found) + "]")
            return
        from rich.console import Console

        Console().print(_runs_table(found))

    @runs.command("show")
    def show(
        run_id: Annotated[
            str,
            typer.Argument(
                help="The run's short id (the 12 characters tables show), any start of it of at least 6 "
                "characters, or the whole id."
            ),
        ],
        database: DatabaseOption = DEFAULT_DATABASE_URL,
        tenant: TenantOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """Show one run and its audit trail."""
        found, events = run(_show(database, run_id, tenant))
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
        from rich.console import Console

        console = Console()
        console.print(_run_table(found))
        console.print(_audit_table(events))
