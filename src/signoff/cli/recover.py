"""`signoff recover`: reconcile what a crash left behind, through the runtime's normal paths."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from signoff.cli.options import (
    DEFAULT_DATABASE_URL,
    DEFAULT_MANIFESTS,
    DatabaseOption,
    ManifestsOption,
)
from signoff.cli.plumbing import with_application

if TYPE_CHECKING:
    from signoff.app import Application
    from signoff.core.recovery import RecoveryReport


def recover(
    database: DatabaseOption = DEFAULT_DATABASE_URL,
    manifests: ManifestsOption = DEFAULT_MANIFESTS,
    instance: Annotated[
        str | None,
        typer.Option(
            "--instance",
            help=(
                "An instance you know is down: all of its RUNNING runs count as abandoned. "
                "Without it only runs whose holder's heartbeat is stale are recovered."
            ),
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Reconcile what a crash left behind (also done at every server start).

    Expires overdue approvals and settles RUNNING runs whose holder died: work that is safe to
    repeat is handed to the next serving process (which re-dispatches it with the same operation
    id; nothing runs in this process), the rest becomes FAILED / ACTION_INTERRUPTED /
    MANUAL_REVIEW. Orphaned external work is left to a server too. A live instance's work is
    never touched.
    """

    async def work(application: Application) -> RecoveryReport:
        # Reconcile only: work to re-run is released to a serving process, never run here.
        return await application.runtime.recover(instance, redispatch=False)

    report = with_application(database, manifests, work)
    summary = {
        "expired": report.expired,
        "orphaned": report.orphaned,
        "redispatched": report.redispatched,
        "handed_over": report.handed_over,
        "interrupted": report.interrupted,
        "skipped_live": report.skipped,
    }
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    typer.echo(
        f"expired {report.expired}, orphaned {report.orphaned}, "
        f"handed to a serving process {len(report.handed_over)}, "
        f"interrupted {len(report.interrupted)}, left to live instances {report.skipped}"
    )
    for run_id in report.interrupted:
        typer.echo(f"  needs review: {run_id}")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    app.command("recover")(recover)
