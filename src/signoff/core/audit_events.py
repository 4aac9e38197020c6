"""The audit vocabulary: what an event records (kind), who did it (actor), what a decision did,
and ``event()``, the one constructor of a run's audit events."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from signoff.core import substance
from signoff.core.ports import AuditEvent
from signoff.core.run import ActionRun


class AuditKind(StrEnum):
    """What an audit event records. Stored as the value; the trail of a run reads in this
    vocabulary (a store may still hold kinds an older signoff wrote)."""

    PROPOSED = "proposed"
    RESOLVED = "resolved"
    REFUSED = "refused"
    POLICY_ALLOWED = "policy_allowed"
    RESERVED = "reserved"
    PREVIEWED = "previewed"
    DUPLICATE = "duplicate"
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_RECORDED = "approval_recorded"
    APPROVAL_REJECTED = "approval_rejected"
    APPROVAL_EXPIRED = "approval_expired"
    APPROVED_DISPATCHING = "approved_dispatching"
    APPROVED_AWAITING_DISPATCH = "approved_awaiting_dispatch"
    AMENDED_OVER_LIMIT = "amended_over_limit"
    """An amendment took what will run over an approval limit: recorded, its vote not counted."""
    APPROVAL_ASKED_AGAIN = "approval_asked_again"
    """The revision an approval was asked under is gone from the fleet: asked again."""
    RESUME_REFUSED = "resume_refused"
    LIMIT_EXCEEDED = "limit_exceeded"
    DISPATCHING = "dispatching"
    DISPATCH_CLAIMED = "dispatch_claimed"
    GUARD_DENIED = "guard_denied"
    EXECUTED = "executed"
    EXTERNAL_ACCEPTED = "external_accepted"
    EXTERNAL_COMPLETED = "external_completed"
    EXTERNAL_TIMEOUT = "external_timeout"
    CANCELLED = "cancelled"
    RECOVERY_REDISPATCH = "recovery_redispatch"
    RECOVERY_REFUSED = "recovery_refused"
    RECOVERED_INTERRUPTED = "recovered_interrupted"
    ATTEMPT_FAILED = "attempt_failed"
    """An in-run attempt failed and is retried with the same operation id (``retry.py``)."""
    RECOVERY_HANDED_OVER = "recovery_handed_over"
    CONFIRMED = "confirmed"
    """The requester confirmed what will run (``approval.confirm``); approvers decide next."""
    CONFIRMATION_DECLINED = "confirmation_declined"
    CONFIRMATION_FALLBACK = "confirmation_fallback"
    """The host could not ask the requester: the manifest's fallback routed it to approvers."""


class Actor(StrEnum):
    """Who acted when no principal did (otherwise the actor is the principal's id)."""

    SIGNOFF = "signoff"
    RECOVERY = "recovery"
    EXTERNAL = "external"


class Decision(StrEnum):
    """What an approval decision did to the run, as the ``Notifier`` is told."""

    RECORDED = "recorded"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"


def event(
    run: ActionRun,
    kind: AuditKind,
    at: datetime,
    *,
    actor: str | None = None,
    code: str | None = None,
    **data: Any,
) -> AuditEvent:
    """An audit event stamped with the run's id, tenant and (new) status.

    A result's operator ``detail`` (already redacted) is recorded here and nowhere else, and
    the digests of the run's substance this kind of event chains (``substance.facts``)."""
    if run.result is not None and run.result.detail and "detail" not in data:
        data["detail"] = run.result.detail
    data.update(substance.facts(run, kind))
    return AuditEvent(
        run_id=run.run_id,
        tenant_id=run.tenant_id,
        kind=str(kind),
        at=at,
        actor=actor if actor is not None else run.principal.id,
        status=str(run.status),
        code=code,
        data=data or None,
    )
