"""What executors, guards and the pipeline produce, and what callers get back."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from signoff.core.codes import Code, ExecutionStatus, RetryDisposition, default_retry
from signoff.core.identity import Principal

JsonObject = dict[str, Any]


class ExecutionResult(BaseModel):
    """A result with a stable code and an explicit retry disposition.

    Build it with the factories; ``retry`` defaults to the contract's conservative choice.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: ExecutionStatus
    code: str = Field(min_length=1, max_length=128)
    retry: RetryDisposition
    message: str = ""
    output: JsonObject | None = None
    _possibly_applied: bool = PrivateAttr(default=False)
    detail: str | None = Field(default=None, exclude=True, repr=False)
    """Operator detail (redacted exception text, an upstream error): written to the run's audit
    trail only — never serialised with the result, so never stored, replayed or answered."""

    @model_validator(mode="before")
    @classmethod
    def _default_retry(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("retry") is None and "status" in data:
            data = {**data, "retry": default_retry(ExecutionStatus(data["status"]))}
        return data

    @classmethod
    def succeeded(cls, output: JsonObject | None = None, message: str = "") -> ExecutionResult:
        return cls(
            status=ExecutionStatus.SUCCEEDED,
            code=Code.SUCCEEDED,
            retry=RetryDisposition.NEVER,
            message=message,
            output=output if output is not None else {},
        )

    @classmethod
    def failure(
        cls,
        code: str = Code.ACTION_FAILED,
        message: str = "",
        retry: RetryDisposition = RetryDisposition.MANUAL_REVIEW,
        output: JsonObject | None = None,
    ) -> ExecutionResult:
        """An executor failure. Without a disposition it needs manual review (contract default)."""
        return cls(
            status=ExecutionStatus.FAILED, code=code, retry=retry, message=message, output=output
        )

    @classmethod
    def retryable_failure(cls, code: str, message: str = "") -> ExecutionResult:
        """Transient and known not to have had its side effect: retry after a backoff."""
        return cls.failure(code, message, RetryDisposition.AFTER_BACKOFF)

    @classmethod
    def correctable_failure(cls, code: str, message: str = "") -> ExecutionResult:
        """The input or state must change before a retry can help."""
        return cls.failure(code, message, RetryDisposition.AFTER_CORRECTION)

    @classmethod
    def permanent_failure(cls, code: str, message: str = "") -> ExecutionResult:
        """Retrying will never help."""
        return cls.failure(code, message, RetryDisposition.NEVER)

    @classmethod
    def manual_review_failure(cls, code: str, message: str = "") -> ExecutionResult:
        """The side effect may have happened; a person must look before anything is retried."""
        return cls.failure(code, message, RetryDisposition.MANUAL_REVIEW)

    @classmethod
    def possibly_applied_failure(
        cls, code: str, message: str = "", output: JsonObject | None = None
    ) -> ExecutionResult:
        """Transient, but the side effect may have happened (a timeout or a dropped connection
        after sending, a 5xx). ``MANUAL_REVIEW``; an idempotent executor with ``executor.retry``
        is called again inside the same run with the same operation id."""
        result = cls.failure(code, message, RetryDisposition.MANUAL_REVIEW, output)
        result._possibly_applied = True
        return result

    @property
    def possibly_applied(self) -> bool:
        """Built by ``possibly_applied_failure`` (never stored: a recorded result is final)."""
        return self._possibly_applied

    @classmethod
    def denied(
        cls, code: str, message: str, retry: RetryDisposition = RetryDisposition.NEVER
    ) -> ExecutionResult:
        return cls(status=ExecutionStatus.DENIED, code=code, retry=retry, message=message)

    @classmethod
    def invalid(cls, code: str, message: str) -> ExecutionResult:
        return cls(
            status=ExecutionStatus.VALIDATION_FAILED,
            code=code,
            retry=RetryDisposition.AFTER_CORRECTION,
            message=message,
        )

    @classmethod
    def cancelled(
        cls,
        code: str = Code.ACTION_CANCELLED,
        message: str = "Cancelled.",
        retry: RetryDisposition = RetryDisposition.NEVER,
    ) -> ExecutionResult:
        return cls(status=ExecutionStatus.CANCELLED, code=code, retry=retry, message=message)


class GuardDecision(BaseModel):
    """A pre-execution guard's verdict, taken immediately before dispatch."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allowed: bool
    code: str = Code.PRE_EXECUTION_DENIED
    message: str = ""
    detail: str | None = Field(default=None, exclude=True, repr=False)
    """Operator detail (what the guard raised or said beyond a plain sentence): written to the
    run's audit trail only, like ``ExecutionResult.detail``."""

    @classmethod
    def allow(cls) -> GuardDecision:
        return cls(allowed=True, code=Code.SUCCEEDED)

    @classmethod
    def deny(cls, code: str = Code.PRE_EXECUTION_DENIED, message: str = "") -> GuardDecision:
        return cls(allowed=False, code=code, message=message)


class ExecutionContext(BaseModel):
    """The one argument executors and guards receive."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    action_id: str
    tenant_id: str
    principal: Principal
    input: JsonObject
    resource: str | None
    attempt_token: str
    operation_id: str
    preview: JsonObject | None = None
    """What the preview (dry run) showed approvers; a guard may refuse if the world changed."""
    preview_digest: str | None = None


class ApprovalSummary(BaseModel):
    """What a waiting caller needs to know about the approval it waits for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    approval_id: str
    expires_at: datetime | None
    approvals_needed: int
    approvals_received: int = 0
    approver_roles: tuple[str, ...] = ()
    reason: str | None = None
    """Why approval is needed beyond the approval rule: which cumulative limit, how far over."""
    digest: str | None = None
    """The short form of the approval digest: what exactly is being approved."""


class ActionOutcome(BaseModel):
    """The object every action tool and ``signoff_get_run`` returns (contract §4)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    action: str
    status: ExecutionStatus
    code: str
    retry: RetryDisposition
    message: str = ""
    output: JsonObject | None = None
    approval: ApprovalSummary | None = None
    duplicate_of: str | None = Field(
        default=None, description="For a replayed or in-progress duplicate: the original run id."
    )
    amended: bool = Field(
        default=False, description="An approver changed the input before approving it."
    )
    approved_input: JsonObject | None = Field(
        default=None, description="When amended: the input as approved (and executed)."
    )

    @property
    def is_error(self) -> bool:
        return self.status.is_error
