"""The JSON view of one run for approvers' API, webhooks and the CLI: what will run (masked),
the proposal and its amendments, the approval with the decisions that stand, and the outcome."""

from __future__ import annotations

from typing import Any

from signoff.core import substance
from signoff.core.answers import outcome_of
from signoff.core.approval_digest import short_digest
from signoff.core.decisions import still_needed
from signoff.core.run import ActionRun
from signoff.core.runtime import Runtime
from signoff.core.statuses import shown_status
from signoff.core.visibility import mask_document, masked_outcome, sensitive_paths
from signoff.surfaces.access.caller import Caller
from signoff.surfaces.web.views import (
    input_fields,
    iso,
    masked_input,
    may_decide,
    proposed_input,
)


def run_json(runtime: Runtime, run: ActionRun, caller: Caller | None) -> dict[str, Any]:
    """The JSON API's view of one run (input masked as on the approvers' screens).

    ``may_decide`` (a display hint for ``caller``) is left out when there is no caller."""
    action = runtime.action(run.action_id)
    definition = action.definition if action is not None else None
    secret_input = sensitive_paths(definition)["input"]
    state = run.approval
    standing = substance.standing(run)
    approval: dict[str, Any] | None = None
    if state is not None:
        approval = {
            "approval_id": state.approval_id,
            "approver_roles": list(state.approver_roles),
            "approvals_needed": state.count,
            "approvals_received": len(substance.standing_approvers(run)),
            "approvals_still_needed": still_needed(run),
            "approvers": sorted(substance.standing_approvers(run)),
            "requested_at": iso(state.requested_at),
            "expires_at": iso(state.expires_at),
            "reason": state.reason,
            "digest": short_digest(state.digest) or None,
            "decisions": [
                {
                    "approver_id": d.approver_id,
                    "decision": str(d.decision),
                    "reason": d.reason,
                    "at": iso(d.at),
                    "channel": str(d.channel),
                    "digest": short_digest(d.digest) or None,
                    "standing": d in standing,
                }
                for d in state.decisions
            ],
        }
    view: dict[str, Any] = {
        "run_id": run.run_id,
        "tenant": run.tenant_id,
        "action": run.action_id,
        "title": definition.title if definition is not None else "",
        "risk": str(definition.risk) if definition is not None else None,
        "effect": str(definition.effect) if definition is not None else None,
        "status": shown_status(run.status),
        "version": run.version,
        "proposer_type": str(run.proposer_type),
        "channel": str(run.channel),
        "principal": {"id": run.principal.id, "roles": list(run.principal.roles)},
        "resource": run.resource,
        # What will run (amended values included); the proposal is ``proposed_input``.
        "input": masked_input(runtime, run),
        "proposed_input": proposed_input(runtime, run),
        "amended": bool(run.amendments),
        "hidden_characters": [f.name for f in input_fields(runtime, run) if f.hidden_characters],
        "created_at": iso(run.created_at),
        "updated_at": iso(run.updated_at),
        "approval": approval,
        "outcome": masked_outcome(outcome_of(run), definition).model_dump(mode="json"),
        "amendable": list(definition.approval.amend) if definition is not None else [],
        "approved_input": mask_document(run.approved_input, secret_input)
        if run.approved_input is not None
        else None,
        "amendments": [
            {
                "approver_id": a.approver_id,
                "at": iso(a.at),
                "version": a.version,
                "fields": sorted(a.changes),
                "changes": mask_document(a.changes, secret_input),
                "previous": mask_document(a.previous, secret_input),
            }
            for a in run.amendments
        ],
        "preview": {"output": run.preview.output, "digest": run.preview.digest}
        if run.preview is not None
        else None,
    }
    if caller is not None:
        view["may_decide"] = may_decide(run, caller)
    return view
