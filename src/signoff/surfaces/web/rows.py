"""What the inbox shows of one run: its row (``inbox_row``) and a stored decision's banner."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from signoff.core import substance
from signoff.core.approval_digest import short_digest
from signoff.core.codes import Code
from signoff.core.decisions import still_needed
from signoff.core.run import ActionRun, RunStatus
from signoff.core.runtime import Runtime
from signoff.core.statuses import shown_status
from signoff.surfaces.access.caller import Caller
from signoff.surfaces.web.views import (
    amendable_fields,
    amendment_views,
    approval_reason,
    describe,
    input_fields,
    may_decide,
    preview_fields,
    relative,
    visible,
)


def inbox_row(runtime: Runtime, run: ActionRun, now: datetime, caller: Caller) -> dict[str, Any]:
    """What the inbox shows of one run to ``caller``: the template's view of it."""
    action = runtime.action(run.action_id)
    definition = action.definition if action is not None else None
    state = run.approval
    received = len(substance.standing_approvers(run))
    return {
        "id": run.run_id,
        "action": run.action_id,
        "title": definition.title if definition is not None else "",
        "description": definition.description if definition is not None else "",
        "risk": str(definition.risk) if definition is not None else "unknown",
        "effect": str(definition.effect) if definition is not None else "",
        "proposer_type": str(run.proposer_type),
        "channel": str(run.channel),
        "principal": run.principal.id,
        "principal_roles": ", ".join(run.principal.roles),
        "resource": visible(run.resource or "")[0],
        "fields": input_fields(runtime, run),
        "created_at": run.created_at.isoformat(),
        "age": relative(run.created_at, now),
        "expires_at": state.expires_at.isoformat() if state and state.expires_at else "",
        "expires_in": relative(state.expires_at, now) if state else "",
        "status": shown_status(run.status),
        "status_label": shown_status(run.status).replace("_", " ").capitalize(),
        "why": approval_reason(runtime, run) if state is not None else "",
        "approvers": ", ".join(sorted(substance.standing_approvers(run)))
        if state is not None
        else "",
        "pending": run.status is RunStatus.WAITING_APPROVAL,
        "finished": run.is_terminal,
        "approver_roles": ", ".join(state.approver_roles) if state else "",
        "digest": short_digest(state.digest) if state else "",
        "limit_reason": (state.reason or "") if state else "",
        "needed": state.count if state else 0,
        "received": received,
        "still_needed": still_needed(run),
        "version": run.version,
        "decisions": list(state.decisions) if state else [],
        "mine": state.decided_by(caller.principal.id) if state else None,
        "proposer_is_me": run.principal.id == caller.principal.id,
        "may_decide": may_decide(run, caller),
        "result": run.result,
        "preview": preview_fields(runtime, run),
        "preview_digest": run.preview.digest[:12] if run.preview is not None else "",
        "amendable": amendable_fields(runtime, run),
        "amendments": amendment_views(runtime, run),
    }


def recorded_banner(run: ActionRun, approver_id: str) -> dict[str, Any] | None:
    """This approver's stored decision and where the run stands now, or nothing."""
    if run.approval is None or run.approval.decided_by(approver_id) is None:
        return None
    code = run.result.code if run.result is not None else str(Code.APPROVAL_RECORDED)
    return {"code": code, "text": describe(code), "ok": True}
