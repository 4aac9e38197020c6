"""``ActionRun``: the lifecycle truth of one request, and the one table of allowed transitions."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, TypedDict, Unpack

from pydantic import BaseModel, ConfigDict, Field

from signoff.core.definition import ExecutorMode
from signoff.core.identity import Channel, Principal, ProposerType
from signoff.core.results import ExecutionResult, JsonObject
from signoff.core.statuses import NON_TERMINAL_STATUSES as NON_TERMINAL_STATUSES
from signoff.core.statuses import TERMINAL_STATUSES as TERMINAL_STATUSES
from signoff.core.statuses import RunStatus as RunStatus

_S = RunStatus
# The only allowed moves. Anything else is refused by ``ActionRun.advance``; terminal runs have no row.
# A self-move records new data in the same state (an approval decision; a recovery re-dispatch).
TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    _S.REQUESTED: frozenset({_S.VALIDATING, _S.DENIED, _S.CANCELLED, _S.RUNTIME_FAILED}),
    _S.VALIDATING: frozenset({_S.POLICY_EVALUATED, _S.DENIED, _S.CANCELLED, _S.RUNTIME_FAILED}),
    # From POLICY_EVALUATED a duplicate may replay any stored terminal result.
    _S.POLICY_EVALUATED: frozenset({_S.WAITING_APPROVAL, _S.RUNNING} | TERMINAL_STATUSES),
    _S.WAITING_APPROVAL: frozenset(
        {
            _S.WAITING_APPROVAL,
            _S.RUNNING,
            _S.DENIED,
            _S.EXPIRED,
            _S.CANCELLED,
            _S.RUNTIME_FAILED,
        }
    ),
    # RUNNING -> CANCELLED only for background work not yet claimed for dispatch (runtime.cancel).
    _S.RUNNING: frozenset(
        {
            _S.RUNNING,
            _S.WAITING_EXTERNAL,
            _S.SUCCEEDED,
            _S.FAILED,
            _S.DENIED,
            _S.CANCELLED,
            _S.RUNTIME_FAILED,
        }
    ),
    _S.WAITING_EXTERNAL: frozenset(
        {_S.RUNNING, _S.SUCCEEDED, _S.FAILED, _S.CANCELLED, _S.RUNTIME_FAILED}
    ),
    **{status: frozenset() for status in TERMINAL_STATUSES},
}


class IllegalTransition(ValueError):
    """A move the transition table does not allow (a programming error, never a user outcome)."""


def can_transition(current: RunStatus, target: RunStatus) -> bool:
    return target in TRANSITIONS[current]


MAX_REASON_CHARS = 2000
"""The longest reason an approver may give (every surface refuses a longer one up front)."""


class ApprovalVote(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"


class ApprovalDecision(BaseModel):
    """One approver's recorded decision."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    approver_id: str = Field(min_length=1, max_length=255)
    roles: tuple[str, ...] = ()
    decision: ApprovalVote
    reason: str = Field(default="", max_length=MAX_REASON_CHARS)
    at: datetime
    channel: Channel = Channel.API
    via: str | None = Field(
        default=None, description="Operator detail, e.g. the OS user of the CLI."
    )
    digest: str | None = Field(
        default=None, description="The approval digest this decision was made on."
    )
    revision: str | None = Field(
        default=None, description="The definition revision the decision was made under."
    )
    seen: int | None = Field(
        default=None,
        description="The run version of what will run when the approver decided "
        "(``substance.changed_at``): a later amendment leaves this decision behind.",
    )


class Confirmation(BaseModel):
    """A requester confirmation asked for a run (``approval.confirm``): the digest of what will
    run as it was shown, and the requester's decision once it arrives (channel ``elicitation``).
    Kept apart from approvers' decisions: it never counts towards a quorum."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    shown: str = Field(description="Digest of what will run (``substance.will_run``) as shown.")
    asked_at: datetime
    decision: ApprovalDecision | None = None

    @property
    def pending(self) -> bool:
        return self.decision is None

    @property
    def accepted(self) -> bool:
        return self.decision is not None and self.decision.decision is ApprovalVote.APPROVE


class ApprovalState(BaseModel):
    """The approval a run waits for, and the decisions received so far."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    approval_id: str
    approver_roles: tuple[str, ...]
    count: int = Field(ge=1)
    requested_at: datetime
    expires_at: datetime | None
    decisions: tuple[ApprovalDecision, ...] = ()
    digest: str | None = Field(
        default=None, description="What is approved (core/approval_digest.py), set on request."
    )
    revision: str | None = Field(
        default=None,
        description="The definition revision approvals are asked under: only an instance "
        "holding it dispatches them (``approvals.py``).",
    )
    reason: str | None = Field(
        default=None, description="Why approval is needed when a cumulative limit asks for it."
    )
    confirmation: Confirmation | None = Field(
        default=None, description="The requester's confirmation asked for (approval.confirm)."
    )
    approved_at: datetime | None = None
    """Quorum reached by a decision recorded without dispatching (the CLI on the database): the
    run waits, approved, until a serving process resumes it through the same stages."""

    @property
    def awaits_confirmation(self) -> bool:
        return self.confirmation is not None and self.confirmation.pending

    @property
    def needs_approvers(self) -> bool:
        """Approvers decide too (an empty role list: only the requester confirms)."""
        return bool(self.approver_roles)

    def approvals(self) -> list[ApprovalDecision]:
        return [d for d in self.decisions if d.decision is ApprovalVote.APPROVE]

    def overdue(self, now: datetime) -> bool:
        """Past its deadline: expired by the next read or the sweeper. An approval already
        approved (awaiting a server's dispatch) was decided in time and never expires."""
        return self.approved_at is None and self.expires_at is not None and self.expires_at <= now

    def rejected(self) -> bool:
        return any(d.decision is ApprovalVote.REJECT for d in self.decisions)

    def decided_by(self, approver_id: str) -> ApprovalDecision | None:
        return next((d for d in self.decisions if d.approver_id == approver_id), None)


class PreviewRecord(BaseModel):
    """What the action's dry run said before anyone was asked, and its digest (bound to the run)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    output: JsonObject
    digest: str
    at: datetime


class Amendment(BaseModel):
    """An approver's change to fields the manifest lets approvers amend (``approval.amend``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    approver_id: str
    at: datetime
    changes: dict[str, Any]
    previous: dict[str, Any]
    version: int | None = Field(
        default=None, description="The run version this amendment was written at."
    )
    digest: str | None = Field(
        default=None, description="Digest of the input that will run after it (core/substance)."
    )


class DuplicateScope(BaseModel):
    """tenant + action + key + visibility (principal id, resource identity, or ``*`` tenant-wide)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: str
    action_id: str
    idempotency_key: str
    visibility: str


class RunChanges(TypedDict, total=False):
    """The fields a transition may change besides status and time. A misspelt or mistyped field
    is a type error (PEP 692), never silently dropped."""

    executor_mode: ExecutorMode
    input_hash: str
    resource: str | None
    attempt: int
    attempt_token: str
    worker_id: str | None
    approval: ApprovalState
    duplicate_scope: DuplicateScope | None
    duplicate_of: str
    result: ExecutionResult
    dispatched_at: datetime
    deadline_at: datetime | None
    preview: PreviewRecord
    approved_input: JsonObject
    amendments: tuple[Amendment, ...]
    limits_held: tuple[str, ...]


class ActionRun(BaseModel):
    """One request's lifecycle. Immutable: every change is a new value written by compare-and-set."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    tenant_id: str
    action_id: str
    principal: Principal
    channel: Channel
    proposer_type: ProposerType
    idempotency_key: str | None = None
    input: JsonObject = Field(default_factory=dict)
    input_hash: str = ""
    resource: str | None = None
    status: RunStatus = RunStatus.REQUESTED
    version: int = 1
    attempt: int = 0
    attempt_token: str | None = None
    executor_mode: ExecutorMode | None = None
    approval: ApprovalState | None = None
    duplicate_scope: DuplicateScope | None = None
    duplicate_of: str | None = None
    result: ExecutionResult | None = None
    dispatched_at: datetime | None = None
    worker_id: str | None = Field(
        default=None, description="The instance that holds this run while it is RUNNING."
    )
    deadline_at: datetime | None = None
    preview: PreviewRecord | None = None
    approved_input: JsonObject | None = Field(
        default=None, description="The input as approved, when an approver amended it."
    )
    amendments: tuple[Amendment, ...] = ()
    repair_of: str | None = Field(
        default=None,
        description="An operator's re-dispatch of this MANUAL_REVIEW run (``repair.py``): it "
        "carries that run's operation id.",
    )
    repairs: str | None = Field(
        default=None,
        description="The run this repair re-dispatches (``repair_of`` is the original whose "
        "operation id it carries; they differ for a repair of a repair).",
    )
    limits_held: tuple[str, ...] = Field(
        default=(), description="Names of the cumulative limits this run holds a reservation of."
    )
    created_at: datetime
    updated_at: datetime

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def operation_id(self) -> str | None:
        """Deterministic per attempt, so a re-dispatch is idempotent at the receiver."""
        if not self.attempt_token:
            return None
        return f"{self.repair_of or self.run_id}:{self.attempt_token}"

    def advance(self, status: RunStatus, at: datetime, **changes: Unpack[RunChanges]) -> ActionRun:
        """A copy in ``status`` with ``changes``; the version is advanced by the store's CAS."""
        if status not in TRANSITIONS[self.status]:
            raise IllegalTransition(f"{self.run_id}: {self.status} -> {status} is not allowed")
        unknown = changes.keys() - RunChanges.__annotations__.keys()
        if unknown:  # a caller that bypassed the type checker
            raise TypeError(f"ActionRun.advance: unknown fields {sorted(unknown)}")
        return self.model_copy(update={**changes, "status": status, "updated_at": at})
