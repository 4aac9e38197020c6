"""What `signoff approvals` prints: the pending table, one run (what will run, amendments,
approvals still needed, version), and a decision's answer with its exit status."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer

from signoff.cli.intent import exit_unless_intended
from signoff.cli.plumbing import fail

if TYPE_CHECKING:
    from rich.table import Table

    from signoff.app import Application
    from signoff.core.approvals import DecisionResult
    from signoff.core.results import ActionOutcome
    from signoff.core.run import ActionRun

RUN_CHANGED = 4
"""Exit status of a decision on a version the run has moved on from (``APPROVAL_RUN_CHANGED``):
nothing was recorded; the fresh view was printed."""


def pending_table(application: Application, runs: list[ActionRun]) -> Table:
    from rich.markup import escape
    from rich.table import Table

    from signoff.core.short_ids import SHORT_CHARS, short_id
    from signoff.surfaces.web.views import input_fields, relative

    now = application.runtime.now()
    table = Table(title=f"{len(runs)} run{'s' * (len(runs) != 1)} waiting for approval")
    # An id is copied and pasted: the short one, never wrapped, whatever the terminal width.
    table.add_column("run", no_wrap=True, min_width=SHORT_CHARS)
    for column in (
        "action",
        "proposed by",
        "resource",
        "risk",
        "input",
        "age",
        "expires",
        "approvals",
    ):
        table.add_column(column, overflow="fold")
    for r in runs:
        action = application.runtime.action(r.action_id)
        state = r.approval
        cells = (
            short_id(r.run_id),
            r.action_id,
            f"{r.proposer_type} {r.principal.id}",
            r.resource or "",
            str(action.definition.risk) if action is not None else "?",
            "\n".join(f"{f.name}: {f.value}" for f in input_fields(application.runtime, r))
            + ("\n(amended)" if r.amendments else ""),
            relative(r.created_at, now),
            relative(state.expires_at, now) if state is not None else "",
            progress(r),
        )
        table.add_row(*(escape(cell) for cell in cells))
    return table


def progress(r: ActionRun) -> str:
    from signoff.core import substance
    from signoff.core.decisions import still_needed

    state = r.approval
    if state is None:
        return ""
    received = len(substance.standing_approvers(r))
    left = still_needed(r)
    more = f", {left} more needed" if left else ""
    return f"{received}/{state.count} ({', '.join(state.approver_roles)}){more}"


def run_table(application: Application, r: ActionRun) -> Table:
    from rich.markup import escape
    from rich.table import Table

    from signoff.core.statuses import shown_status
    from signoff.surfaces.web.views import amendment_views, input_fields, relative

    now = application.runtime.now()
    action = application.runtime.action(r.action_id)
    state = r.approval
    table = Table(title=f"run {r.run_id}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    rows = {
        "action": r.action_id + (f" — {action.definition.title}" if action else ""),
        "risk": str(action.definition.risk) if action is not None else "?",
        "status": shown_status(r.status),
        "version": str(r.version),
        "proposed by": f"{r.proposer_type} {r.principal.id} [{', '.join(r.principal.roles)}] "
        f"via {r.channel}",
        "resource": r.resource or "",
        "will run" if r.amendments else "input": "\n".join(
            f"{f.name}: {f.value}" for f in input_fields(application.runtime, r)
        ),
        "proposed": f"{r.created_at.isoformat(timespec='seconds')} ({relative(r.created_at, now)})",
    }
    for index, a in enumerate(amendment_views(application.runtime, r), 1):
        rows[f"amendment {index}"] = (
            f"{a.approver_id} at {a.at.isoformat(timespec='seconds')} (version {a.version}): "
            f"{a.summary}"
        )
    if state is not None:
        rows["approvals"] = progress(r)
        if state.expires_at is not None:
            rows["expires"] = (
                f"{state.expires_at.isoformat(timespec='seconds')} "
                f"({relative(state.expires_at, now)})"
            )
        for index, d in enumerate(state.decisions, 1):
            via = f" ({d.via})" if d.via else ""
            rows[f"decision {index}"] = (
                f"{d.approver_id} {d.decision}d via {d.channel}{via} at "
                f"{d.at.isoformat(timespec='seconds')}: {d.reason}"
            )
    if r.result is not None:
        rows["result"] = f"{r.result.status} {r.result.code}: {r.result.message}"
    for name, value in rows.items():
        table.add_row(name, escape(value))
    return table


def print_decision(
    result: DecisionResult, verb: str, as_json: bool, current_version: int | None = None
) -> None:
    from signoff.core.codes import Code
    from signoff.surfaces.web.views import describe

    outcome = result.outcome
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "code": result.code,
                    "accepted": result.accepted,
                    "outcome": outcome.model_dump(mode="json") if outcome else None,
                    **({"current_version": current_version} if current_version is not None else {}),
                }
            )
        )
    if result.code == Code.APPROVAL_RUN_CHANGED:
        fail(
            f"decision not recorded: {describe(result.code)} (the run is now at version "
            f"{current_version if current_version is not None else '?'}; decide again on it)",
            result.code,
            RUN_CHANGED,
        )
    if not result.accepted:
        fail(f"decision not recorded: {describe(result.code)}", result.code)
    if not as_json and outcome is not None and result.code == Code.APPROVAL_AWAITING_DISPATCH:
        typer.echo(
            f"decision recorded [{result.code}]; run {outcome.run_id} resumes in the serving "
            f"signoff; follow it with `signoff runs show {outcome.run_id}`."
        )
    elif not as_json and outcome is not None:
        typer.echo(
            f"decision recorded [{result.code}]; run {outcome.run_id} is now {outcome.status} "
            f"[{outcome.code}] {for_operator(outcome)}".rstrip()
        )
    if outcome is not None:
        exit_unless_intended(verb, outcome.run_id, str(outcome.status), outcome.code)


def for_operator(outcome: ActionOutcome) -> str:
    """The outcome's message, except where it tells an agent which tool to call next."""
    from signoff.core.codes import ExecutionStatus

    if outcome.status in (ExecutionStatus.ACCEPTED,):
        return (
            "The action runs in the background; follow it with "
            f"`signoff runs show {outcome.run_id}`."
        )
    return outcome.message
