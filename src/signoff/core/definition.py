"""``ActionDefinition``: what an action is and which controls surround it (contract §6).

Definitions are built programmatically or by the manifest loader; ``compile_action`` turns one into
a ``CompiledAction`` whose JSON Schema validator and CEL programs are built exactly once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from signoff.core.codes import ExecutionStatus, RetryDisposition
from signoff.core.limits import LimitSpec

ACTION_ID_PATTERN = r"^[a-z][a-z0-9_.-]{0,63}$"
TOOL_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"


def tool_name(action_id: str) -> str:
    """The MCP tool name of an action: its id with ``.`` as ``_`` (``invoice.cancel`` ->
    ``invoice_cancel``), a name every MCP host accepts."""
    return action_id.replace(".", "_")


Hook = Callable[[Any], Any | Awaitable[Any]]
"""An executor or guard: takes an ``ExecutionContext``; sync or async."""


class Effect(StrEnum):
    READ_ONLY = "read_only"
    WRITE = "write"
    EXTERNAL_SEND = "external_send"
    FINANCIAL = "financial"
    PRODUCTION_CHANGE = "production_change"


class Risk(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class KeyRequirement(StrEnum):
    REQUIRED = "required"
    OPTIONAL = "optional"


class DuplicateVisibility(StrEnum):
    PRINCIPAL = "principal"
    RESOURCE = "resource"
    TENANT = "tenant"


class ExecutorMode(StrEnum):
    SYNC = "sync"
    ASYNC = "async"
    DEFERRED = "deferred"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class IdempotencySpec(_Frozen):
    key: KeyRequirement = KeyRequirement.OPTIONAL
    scope: DuplicateVisibility = DuplicateVisibility.PRINCIPAL


class DenyRule(_Frozen):
    when: str
    code: str = "POLICY_DENIED"
    message: str = "Denied by policy."


class PolicySpec(_Frozen):
    roles: tuple[str, ...] | None = None
    deny: tuple[DenyRule, ...] = ()


DEFAULT_APPROVAL_WHEN = (
    '(proposer.type == "agent" && action.effect != "read_only") || action.risk == "critical"'
)
DEFAULT_APPROVER_ROLES = ("approver",)
DEFAULT_APPROVAL_EXPIRY = timedelta(hours=24)


def default_approval_rule(effect: Effect | str, risk: Risk | str) -> str | None:
    """``DEFAULT_APPROVAL_WHEN`` for an action of this effect and risk, in words: whose proposals
    it stops (``None``: none, a read that is not critical). The one statement in English."""
    if Risk(risk) is Risk.CRITICAL:
        return "every proposal, the action being critical risk"
    if Effect(effect) is Effect.READ_ONLY:
        return None
    return f"an agent's proposal of this {Effect(effect)} action"


class Escalation(_Frozen):
    """A higher approval tier: when ``when`` holds, at least ``count`` distinct approvers."""

    when: str
    count: int = Field(ge=1, le=20)
    explain: str | None = None  # the manifest's sentence for approvers; None: derived from when


class ConfirmFallback(StrEnum):
    """What a requester confirmation does when the host cannot ask (no elicitation capability)."""

    APPROVERS = "approvers"
    REFUSE = "refuse"


DEFAULT_CONFIRM_WAIT = timedelta(seconds=60)


class ConfirmSpec(_Frozen):
    """``approval.confirm``: the requester's own human confirms what will run before it runs
    (``core/confirmation.py``). Never an approval: a rule that needs approvers still needs them."""

    when: str = "true"
    fallback: ConfirmFallback = ConfirmFallback.REFUSE
    wait: timedelta = DEFAULT_CONFIRM_WAIT
    """How long the host is given to answer before the run waits as a pending confirmation."""


class ApprovalSpec(_Frozen):
    """When approval is needed and who may give it. ``ApprovalSpec()`` is the contract's safe default."""

    when: str = DEFAULT_APPROVAL_WHEN
    explain: str | None = None  # the manifest's sentence for approvers; None: derived from when
    approver_roles: tuple[str, ...] = DEFAULT_APPROVER_ROLES
    count: int = Field(default=1, ge=1, le=20)
    expires_after: timedelta | None = DEFAULT_APPROVAL_EXPIRY
    amend: tuple[str, ...] = Field(
        default=(), description="Input fields an approver may change before approving."
    )
    escalate: tuple[Escalation, ...] = Field(
        default=(), description="Higher tiers: more approvers when a rule matches the input."
    )
    confirm: ConfirmSpec | None = Field(
        default=None, description="The requester confirms what will run (MCP elicitation)."
    )


class DisplayFormat(StrEnum):
    """How approvers' screens show an input field (display only; never changes the input)."""

    MONEY = "money"
    NUMBER = "number"
    PERCENT = "percent"
    DATE = "date"
    DATETIME = "datetime"


class FieldDisplay(_Frozen):
    """``money`` with a ``currency`` (ISO 4217), optionally given in ``minor_units`` (cents)."""

    format: DisplayFormat
    currency: str | None = Field(default=None, pattern=r"^[A-Z]{3}$")
    minor_units: bool = False


class OrphanPolicy(StrEnum):
    """What happens to a deferred run whose external completion is overdue."""

    MANUAL_REVIEW = "manual_review"
    CANCEL = "cancel"


class ResultMapping(_Frozen):
    status: ExecutionStatus = ExecutionStatus.FAILED
    retry: RetryDisposition = RetryDisposition.MANUAL_REVIEW
    message: str = ""


class RetrySpec(_Frozen):
    """In-run retries (``executor.retry``): ``attempts`` in all, waits from ``backoff`` doubling."""

    attempts: int = Field(ge=1, le=10)
    backoff: timedelta = timedelta(seconds=1)


class ActionDefinition(BaseModel):
    """One registered action. ``executor`` and ``guard`` are callables taking an ExecutionContext."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    id: str = Field(pattern=ACTION_ID_PATTERN)
    title: str = ""
    description: str = ""
    effect: Effect = Effect.WRITE
    risk: Risk = Risk.MEDIUM
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    output_schema: dict[str, Any] | None = Field(
        default=None, description="JSON Schema of a successful output; outputs are checked."
    )
    resource: str | None = None
    idempotency: IdempotencySpec = IdempotencySpec()
    policy: PolicySpec = PolicySpec()
    approval: ApprovalSpec = ApprovalSpec()
    guard: Hook | None = None
    preview: Hook | None = Field(
        default=None,
        description="A dry run before the approval request; approvers see what it returns.",
    )
    executor: Hook
    mode: ExecutorMode = ExecutorMode.SYNC
    timeout: timedelta | None = None
    cancel: Hook | None = Field(
        default=None,
        description="Deferred work: asks the external system to stop; idempotent per operation id.",
    )
    orphan: OrphanPolicy = OrphanPolicy.MANUAL_REVIEW
    callback_secret: str | None = Field(
        default=None, repr=False, description="HMAC secret for this action's completion callbacks."
    )
    executor_idempotent: bool = Field(
        default=False,
        description="The executor is idempotent by operation id: safe to re-dispatch after a crash.",
    )
    retry: RetrySpec | None = Field(
        default=None,
        description="In-run retries with the same operation id (see signoff.core.retry).",
    )
    results: dict[str, ResultMapping] = Field(default_factory=dict)
    executor_codes: tuple[str, ...] | None = Field(
        default=None,
        description=(
            "Codes the executor itself may answer with besides results (an HTTP executor's "
            "built-ins). Set (even empty): any other code it returns is refused as ACTION_FAILED."
            " None: the executor's codes are open."
        ),
    )
    sensitive_fields: tuple[str, ...] = ()
    display: dict[str, FieldDisplay] = Field(default_factory=dict)
    preview_display: dict[str, FieldDisplay] = Field(default_factory=dict)
    limits: tuple[LimitSpec, ...] = ()
    source: str | None = Field(default=None, description="Where it was declared (file:line).")

    def revision(self) -> str:
        """A stable fingerprint of the governed parts, recorded with each run's audit.

        What only approvers read (the rules' sentences, the preview's formats) is left out, so
        rewording a sentence is not a new revision."""
        governed = self.model_dump(
            mode="json",
            exclude={
                "executor",
                "guard",
                "preview",
                "preview_display",
                "cancel",
                "callback_secret",
                "source",
                "title",
                "description",
            },
        )
        approval = governed["approval"]
        approval.pop("explain", None)
        for tier in approval["escalate"]:
            tier.pop("explain", None)
        blob = json.dumps(governed, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]
