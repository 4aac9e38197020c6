"""`signoff audit export|verify`: the audit trail as JSON lines, and a consistency check."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from signoff.audit_check import AuditProblem, check_trail, event_record, runs_with_events
from signoff.cli.options import DEFAULT_DATABASE_URL, DatabaseOption
from signoff.cli.plumbing import fail, open_existing, run

TenantOption = Annotated[
    str | None, typer.Option("--tenant", help="Only this tenant's runs (default: every tenant).")
]


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    audit = typer.Typer(help="Export and verify the audit trail.", no_args_is_help=True)
    app.add_typer(audit, name="audit")

    @audit.command("export")
    def export(
        database: DatabaseOption = DEFAULT_DATABASE_URL,
        tenant: TenantOption = None,
        output: Annotated[
            Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
        ] = None,
    ) -> None:
        """Every audit event as one JSON object per line, run by run (newest run first)."""

        async def work() -> int:
            store = await open_existing(database)
            count = 0
            sink = output.open("w") if output is not None else sys.stdout
            try:
                async for _run, events in runs_with_events(store, tenant):
                    for event in events:
                        sink.write(json.dumps(event_record(event)) + "\n")
                        count += 1
            finally:
                if output is not None:
                    sink.close()
                await store.close()
            return count

        count = run(work())
        if output is not None:
            typer.echo(f"{count} events written to {output}")

    @audit.command("verify")
    def verify(
        database: DatabaseOption = DEFAULT_DATABASE_URL, tenant: TenantOption = None
    ) -> None:
        """Check that each run's events explain its stored state; exit 1 listing every problem."""

        async def work() -> tuple[int, list[AuditProblem]]:
            store = await open_existing(database)
            runs, problems = 0, []
            try:
                async for found, events in runs_with_events(store, tenant):
                    runs += 1
                    problems.extend(check_trail(found, events))
            finally:
                await store.close()
            return runs, problems

        runs, problems = run(work())
        for problem in problems:
            typer.echo(f"{problem.run_id}: {problem.problem}", err=True)
        if problems:
            fail(
                f"{len(problems)} problems in the audit trail of {runs} runs", "AUDIT_INCONSISTENT"
            )
        typer.echo(f"audit trail consistent for {runs} runs")
