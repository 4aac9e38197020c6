"""`signoff policy replay`: what would these manifests have decided for the recorded requests?

Exit status: ``0`` replayed (with ``--fail-on-change``: and nothing would change); ``1`` refused
(no database, a bad manifest directory: one line ending in its code); ``2`` the command line is
wrong; ``3`` with ``--fail-on-change``, some decision would change (the report is printed).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from signoff.cli.options import DEFAULT_DATABASE_URL, DatabaseOption, ManifestsOption
from signoff.cli.plumbing import MISCONFIGURED, fail, registry_or_fail, run

if TYPE_CHECKING:
    from signoff.core.registry import ActionRegistry
    from signoff.core.replay import ReplayReport, ReplayScope

CHANGED = 3
INPUT_CHARS = 240

KIND_WORDS = {
    "allowed_to_denied": "allowed → denied",
    "denied_to_allowed": "denied → allowed",
    "deny_code_changed": "another refusal code",
    "approval_newly_required": "approval newly required",
    "approval_no_longer_required": "approval no longer required",
    "approvals_needed_changed": "another number of approvers",
    "limit_hit_appeared": "a limit now hit",
    "limit_hit_disappeared": "a limit no longer hit",
    "action_removed": "action no longer defined",
    "input_no_longer_valid": "stored input no longer valid",
}


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    policy = typer.Typer(
        rich_markup_mode=None,
        help="Policy over recorded history: replay it against other manifests.",
        no_args_is_help=True,
    )
    app.add_typer(policy, name="policy")

    @policy.command("replay")
    def replay_command(
        manifests: ManifestsOption,
        since: Annotated[
            str | None,
            typer.Option("--since", help="Runs proposed in this last duration (7d, 24h, 90m)."),
        ] = None,
        start: Annotated[
            str | None, typer.Option("--from", help="Runs proposed at or after (ISO 8601).")
        ] = None,
        end: Annotated[
            str | None, typer.Option("--to", help="Runs proposed at or before (ISO 8601).")
        ] = None,
        action: Annotated[str | None, typer.Option("--action", help="Only this action.")] = None,
        tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant.")] = None,
        database: DatabaseOption = DEFAULT_DATABASE_URL,
        as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
        fail_on_change: Annotated[
            bool,
            typer.Option(
                "--fail-on-change", help=f"Exit {CHANGED} when any decision would change (CI)."
            ),
        ] = False,
        runs: Annotated[
            int, typer.Option("--runs", min=0, help="Runs listed per change (the rest counted).")
        ] = 20,
    ) -> None:
        """Replay the recorded runs against the manifests in DIR: validation, policy, approval
        rules and cumulative limits (usage rebuilt in time order) — no executor, guard or
        preview, and nothing written. Reports, per action, the decisions that would change."""
        from signoff.core.replay import ReplayReport, ReplayScope

        scope = ReplayScope(
            since=_window_start(since, start),
            until=_moment("--to", end) if end is not None else None,
            action_id=action,
            tenant_id=tenant,
        )
        registry = registry_or_fail(manifests)
        report = run(_replay(database, registry, scope, ReplayReport(runs_per_change=runs)))
        record = {**_header(manifests, scope), **report.record()}
        if as_json:
            typer.echo(json.dumps(record, indent=2, ensure_ascii=False))
        else:
            typer.echo(render(record))
        if fail_on_change and report.changed:
            raise typer.Exit(CHANGED)


def _window_start(since: str | None, start: str | None) -> datetime | None:
    if since is not None and start is not None:
        fail("give --since or --from, not both", "INVALID_ARGUMENT", MISCONFIGURED)
    if since is not None:
        from signoff.manifest.durations import parse_duration

        length = parse_duration(since)
        if not length:
            fail(f"not a duration: {since!r} (e.g. 7d, 24h)", "INVALID_ARGUMENT", MISCONFIGURED)
        return datetime.now(UTC) - length
    return _moment("--from", start) if start is not None else None


def _moment(option: str, text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        fail(f"{option}: not an ISO 8601 time: {text!r}", "INVALID_ARGUMENT", MISCONFIGURED)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


async def _replay(
    database: str, registry: ActionRegistry, scope: ReplayScope, report: ReplayReport
) -> ReplayReport:
    from signoff.cli.plumbing import require_existing
    from signoff.core.replay import replay
    from signoff.store.history import open_history

    require_existing(database)
    history = await open_history(database)
    try:
        return await replay(history, registry, scope, report)
    finally:
        await history.close()


def _header(manifests: str, scope: ReplayScope) -> dict[str, Any]:
    def at(moment: datetime | None) -> str | None:
        return moment.isoformat().replace("+00:00", "Z") if moment is not None else None

    return {
        "manifests": manifests,
        "from": at(scope.since),
        "to": at(scope.until),
        "action": scope.action_id,
        "tenant": scope.tenant_id,
    }


def _decision(record: dict[str, Any]) -> str:
    outcome = record["outcome"]
    code = record.get("code")
    limits = ", ".join(record.get("limits", []))
    if outcome == "refused":
        return f"refused {code}"
    if outcome == "limit_denied":
        return f"denied by {limits}"
    if outcome == "approval":
        needed = record.get("approvals_needed")
        text = "waits for approval"
        if record.get("approval_required") and needed:
            text += f" ({needed} approver{'s' * (needed != 1)})"
        return text + (f", over {limits}" if limits else "")
    if outcome == "dispatch":
        return "runs" + (f", over {limits}" if limits else "")
    return f"{outcome} {code}" if code else str(outcome)


def render(record: dict[str, Any]) -> str:
    """The report for a person: totals, then each action's changes with their runs."""
    from signoff.core.short_ids import short_id

    totals = record["totals"]
    span = ""
    if totals["first_run_at"] is not None:
        span = f" ({totals['first_run_at']} … {totals['last_run_at']})"
    lines = [
        f"Replayed {totals['replayed']} run{'s' * (totals['replayed'] != 1)}{span} against "
        f"{record['manifests']}: {totals['unchanged']} unchanged, {totals['changed']} would change."
    ]
    if totals["by_kind"]:
        kinds = ", ".join(f"{KIND_WORDS[k]} {n}" for k, n in totals["by_kind"].items())
        lines.append(f"  by kind: {kinds}")
    if totals["not_replayed"]:
        skipped = ", ".join(f"{k.replace('_', ' ')} {n}" for k, n in totals["not_replayed"].items())
        lines.append(f"  not replayed: {skipped}")
    for action in record["actions"]:
        lines.append("")
        defined = "" if action["defined"] else " (not defined in these manifests)"
        lines.append(
            f"{action['action']}{defined}: {action['replayed']} replayed, "
            f"{action['changed']} would change"
        )
        for change in action["changes"]:
            count = change["count"]
            lines.append(
                f"  {KIND_WORDS[change['kind']]} at {change['stage']} "
                f"({count} run{'s' * (count != 1)}) — {change['rule']}"
            )
            for line in change["runs"]:
                lines.append(
                    f"    {short_id(line['run_id'])}  {line['at']}  {line['tenant']}/"
                    f"{line['principal']}  was: {_decision(line['was'])}  now: "
                    f"{_decision(line['now'])}"
                )
                if line["input"] is not None:
                    shown = json.dumps(line["input"], ensure_ascii=False, sort_keys=True)
                    cut = shown if len(shown) <= INPUT_CHARS else shown[: INPUT_CHARS - 1] + "…"
                    lines.append(f"      input: {cut}")
            if change["more"]:
                lines.append(f"    … and {change['more']} more (--runs N, or --json)")
    return "\n".join(lines)
