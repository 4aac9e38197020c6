"""The manifest format (contract §6) as strict pydantic models: the shape, nothing more.

These models check types and spelling; meaning (CEL, JSON Schema, imports, environment variables,
cross-field rules) is checked by ``signoff.manifest.build`` where every field path is known. The
published JSON Schema (``signoff schema``) is generated from these models.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from signoff.core.definition import ACTION_ID_PATTERN, DEFAULT_APPROVAL_WHEN

API_VERSION = "signoff/v1"
DURATION_PATTERN = r"^([0-9]+(ms|s|m|h|d))+$"
HOOK_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
CODE_PATTERN = r"^[A-Z][A-Z0-9_]{0,127}$"
DEFAULT_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {},
    "additionalProperties": False,
}

# Field docstrings become the JSON Schema descriptions editors show; the aliases only constrain.
Duration = Annotated[str, Field(pattern=DURATION_PATTERN)]
HookRef = Annotated[str, Field(pattern=HOOK_PATTERN)]
ResultCode = Annotated[str, Field(pattern=CODE_PATTERN)]
Condition = str | bool
Role = Annotated[str, Field(min_length=1, max_length=255)]
Sentence = Annotated[str, Field(min_length=1, max_length=500, pattern=r"^[^\x00-\x1f\x7f]+$")]


class _Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, use_attribute_docstrings=True
    )


class Metadata(_Strict):
    id: str = Field(pattern=ACTION_ID_PATTERN)
    """Stable action id; its MCP tool name has each `.` as `_` (invoice.cancel -> invoice_cancel)."""
    title: str = ""
    """A short human title."""
    description: str = ""
    """What the action does; shown to agents in the tool description and to approvers."""


class Idempotency(_Strict):
    key: Literal["required", "optional"] = "optional"
    """Whether callers must send an idempotency_key."""
    scope: Literal["principal", "resource", "tenant"] = "principal"
    """Who shares a result for the same key: the same principal, the same resource, the tenant."""


class DenyRule(_Strict):
    when: Condition
    """CEL (or true/false): when true, the request is denied with ``code``."""
    code: ResultCode = "POLICY_DENIED"
    """The result code (UPPER_SNAKE_CASE) callers receive when this rule denies."""
    message: str = "Denied by policy."
    """The human explanation returned with the code."""


class Policy(_Strict):
    roles: list[Role] | None = Field(default=None, min_length=1)
    """The principal needs at least one of these roles; omitted means any authenticated principal."""
    deny: list[DenyRule] = []
    """Deny rules, evaluated in order; the first that matches denies."""


class Approvers(_Strict):
    roles: list[Role] = Field(default=["approver"], min_length=1)
    """An approver needs one of these roles (and is never the proposer)."""
    count: int = Field(default=1, ge=1, le=20)
    """How many distinct approvers must approve."""


class Escalate(_Strict):
    when: Condition
    """CEL: when true, at least ``count`` distinct approvers must approve."""
    count: int = Field(ge=1, le=20)
    """How many distinct approvers this tier needs."""
    explain: Sentence | None = None
    """Why this tier asks for more approvers, in words approvers read (default: derived from
    ``when``)."""


class Confirm(_Strict):
    by: Literal["requester"] = "requester"
    """Who confirms: the requester (the principal's own human, asked in the agent's host)."""
    when: Condition = True
    """CEL (or true/false): when true, the requester confirms what will run before it runs."""
    fallback: Literal["approvers", "refuse"] = "refuse"
    """A host that cannot ask (no elicitation): approvers decide instead, or the call is refused
    (CONFIRMATION_UNAVAILABLE)."""
    wait: Duration = "60s"
    """How long the host may take to answer before the run waits as a pending confirmation
    (the requester can still confirm it until approval.expires_after)."""


class Approval(_Strict):
    when: Condition = DEFAULT_APPROVAL_WHEN
    """CEL (or true/false): when true, a human must approve first; false opts out explicitly."""
    explain: Sentence | None = None
    """Why approval is needed, in words approvers read instead of the rule's CEL (default: a
    sentence derived from ``when``)."""
    approvers: Approvers = Approvers()
    """Who decides, and how many of them."""
    expires_after: Duration = "24h"
    """A pending approval expires after this long: 90s, 30m, 24h, 7d, 1h30m."""
    amend: list[str] = []
    """Input fields an approver may change before approving (re-validated and re-checked)."""
    escalate: list[Escalate] = []
    """Higher tiers: when a rule matches the (possibly amended) input, more approvers decide."""
    confirm: Literal["requester"] | Confirm | None = None
    """The requester's own confirmation of what will run, asked through MCP elicitation:
    ``requester``, or ``{by: requester, when, fallback, wait}``. Never counts as an approval."""


class Preview(_Strict):
    python: HookRef
    """module:function of a dry run; approvers see the JSON object it returns."""
    display: dict[str, Display] = {}
    """How approvers' screens format the dry run's fields (a field without one is formatted
    like the input field of the same name); display only."""


class HttpBody(_Strict):
    json_: Any = Field(default=None, alias="json")
    """A JSON template: strings such as ``"{{ input.amount }}"`` take the input's value and type."""
    form: dict[str, str | int | float | bool] | None = None
    """Form fields (application/x-www-form-urlencoded), each a template or a literal."""


class CodeRule(_Strict):
    code: ResultCode
    """The result code when this rule matches (first match wins); ``results:`` may map it."""
    status: int | Annotated[str, Field(pattern="^[1-5]xx$")] | None = None
    """An HTTP status (402) or class ("4xx"); omitted: any status."""
    field: str | None = Field(default=None, pattern=r"^(body|headers)(\.[A-Za-z0-9_-]+)*$")
    """A response value such as ``body.error.code`` or ``headers.x-error``; needs ``equals``."""
    equals: str | int | float | bool | None = None
    """The value ``field`` must have (same JSON type) for the rule to match."""


class HttpResponse(_Strict):
    output: dict[str, Any] | None = None
    """Which response values become ``output``, e.g. ``{refund_id: "{{ body.id }}"}``. Omitted:
    a 2xx JSON object as it is."""
    codes: list[CodeRule] = []
    """Rules mapping statuses and response fields to result codes, checked in order."""
    max_bytes: int = Field(default=1024 * 1024, ge=1, le=64 * 1024 * 1024)
    """The most of the response body read back; a larger body is HTTP_RESPONSE_TOO_LARGE."""


class HttpExecutor(_Strict):
    url: str = Field(min_length=1)
    """The endpoint; ``${VAR}`` and ``${VAR:-default}`` are replaced from the environment at load;
    ``{{ input.field }}`` in the path is replaced, percent-encoded, at dispatch."""
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    """The HTTP method; GET and DELETE send no body."""
    timeout: Duration = "10s"
    """How long each phase may take: connecting, sending, and waiting for each piece of the
    response (a duration such as 10s)."""
    deadline: Duration = "30s"
    """The most the whole exchange may take, from connecting to the last byte of the response
    (more than 0, at most 1h); past it the request may have had its effect: HTTP_TIMEOUT."""
    headers: dict[str, str] = {}
    """Extra request headers; values may use ``${VAR}`` for secrets (never input references)."""
    query: dict[str, str | int | float | bool] = {}
    """Query parameters, each a template (``"{{ input.limit }}"``) or a literal; an absent value
    leaves the parameter out, a list repeats it."""
    body: HttpBody | None = None
    """``json:`` or ``form:``. Omitted: POST, PUT and PATCH send the whole input as JSON."""
    response: HttpResponse = HttpResponse()
    """What of the response becomes ``output``, which responses map to which codes, size limit."""
    status_codes: dict[int, ResultCode] = Field(
        default={}, json_schema_extra={"propertyNames": {"pattern": "^[45][0-9][0-9]$"}}
    )
    """Result codes for specific HTTP error statuses (400-599), e.g. ``404: INVOICE_NOT_FOUND``."""


class Retry(_Strict):
    attempts: int = Field(ge=1, le=10)
    """Attempts in all, the first included."""
    backoff: Duration = "1s"
    """The wait before the second attempt; it doubles for each further one, with jitter
    (between half and all of it)."""


class Executor(_Strict):
    mode: Literal["sync", "async", "deferred"] = "sync"
    """sync: the caller waits; async: it completes in the background; deferred: an external
    system accepts the work and reports completion later."""
    python: HookRef | None = None
    """A Python executor as module:function taking an ExecutionContext (sync or async)."""
    http: HttpExecutor | None = None
    """An HTTP endpoint that performs the action."""
    timeout: Duration | None = None
    """Give up waiting for the executor after this duration (the outcome then needs manual
    review); for deferred work, the deadline for the external completion (required)."""
    idempotent: bool = False
    """The executor deduplicates on operation_id (HTTP: the Idempotency-Key header): safe to call
    again with the same operation id, in the run (``retry``), after a crash, or by an operator."""
    retry: Retry | None = None
    """In-run retries with the same operation id: of failures known to have had no effect, and,
    for an idempotent executor, of possibly-applied ones (timeouts, dropped connections, 5xx)."""
    cancel: HookRef | None = None
    """deferred: asks the external system to stop a run (module:function, idempotent)."""
    orphan: Literal["manual_review", "cancel"] = "manual_review"
    """deferred: what happens to a run whose completion has not arrived within the timeout."""
    callback_secret: str | None = Field(default=None, repr=False)
    """deferred: HMAC secret of completion callbacks; write ${VAR} to keep it out of the file."""


class ResultSpec(_Strict):
    status: Literal["SUCCEEDED", "FAILED", "DENIED"] = "FAILED"
    """The status a caller sees for this code."""
    retry: Literal["NEVER", "AFTER_BACKOFF", "AFTER_CORRECTION", "MANUAL_REVIEW"] | None = None
    """Whether a retry can help; defaults to MANUAL_REVIEW for FAILED, NEVER otherwise."""
    message: str = ""
    """A default message when the executor gives none."""


class Limit(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,63}$")
    """The limit's name, unique in the action; shown to approvers and in refusals."""
    per: Literal["principal", "tenant", "resource"] = "principal"
    """Whose calls count together: the same principal, the whole tenant, or the same resource."""
    window: Duration
    """The sliding window, e.g. 24h: only calls reserved within it count."""
    count: int | None = Field(default=None, ge=0)
    """At most this many calls in the window (with sum: both bounds hold)."""
    sum: str | None = None
    """CEL number summed over the calls in the window, e.g. input.amount; needs max."""
    max: float | int | None = Field(default=None, ge=0)
    """The bound of sum."""
    on_exceed: Literal["approval", "deny"] = "approval"
    """approval: a call over the limit waits for a human (the request says which limit and how
    far over); deny: refused with LIMIT_EXCEEDED, saying when the limit frees up."""


class Spec(_Strict):
    effect: Literal["read_only", "write", "external_send", "financial", "production_change"]
    """What kind of side effect the action has."""
    risk: Literal["low", "medium", "high", "critical"]
    """How much harm a wrong call could do."""
    input: dict[str, Any] = Field(
        default=DEFAULT_INPUT_SCHEMA,
        json_schema_extra={"$ref": "https://json-schema.org/draft/2020-12/schema"},
    )
    """JSON Schema (2020-12) of the arguments; must have type: object. Omitted: no arguments."""
    output: dict[str, Any] | None = Field(
        default=None,
        json_schema_extra={"$ref": "https://json-schema.org/draft/2020-12/schema"},
    )
    """JSON Schema (2020-12) of a successful output; must have type: object. It becomes the
    tool's typed output schema, and an executor output that does not match it is refused."""
    resource: str | None = None
    """CEL: the canonical identity of the resource acted on, e.g. 'invoice/' + input.invoice_id."""
    idempotency: Idempotency = Idempotency()
    """How duplicates are recognised."""
    policy: Policy = Policy()
    """Who may propose the action and what is always denied."""
    approval: Approval | None = None
    """When humans must approve. Omitted: the safe default (agents' non-read-only calls, critical risk)."""
    guard: HookRef | None = None
    """A check run immediately before dispatch (module:function returning a GuardDecision)."""
    preview: Preview | None = None
    """A dry run before the approval request, shown to approvers; its digest is bound to the run."""
    executor: Executor
    """What performs the action: exactly one of ``python`` or ``http``."""
    results: dict[ResultCode, ResultSpec] = {}
    """Domain result codes the executor may return, with their status and retry disposition."""
    sensitive: list[str] = []
    """Values every surface masks: JSON pointers into the run (``/input/iban``,
    ``/output/account/number``); a bare name is an input field. Only the executor sees them."""
    display: dict[str, Display] = {}
    """How approvers' screens format input fields (amounts, dates); display only."""
    limits: list[Limit] = []
    """Cumulative limits across calls, enforced atomically across processes and instances."""


class Display(_Strict):
    format: Literal["money", "number", "percent", "date", "datetime"]
    """How approvers see the field: money (with currency), number, percent, date, datetime."""
    currency: str | None = Field(default=None, pattern=r"^[A-Z]{3}$")
    """money: the ISO 4217 currency, e.g. EUR."""
    minor_units: bool = False
    """money: the value is in minor units (cents), e.g. 88000 shows as 880.00 EUR."""


class CasePrincipal(_Strict):
    id: str = Field(default="test-principal", min_length=1)
    roles: list[Role] = []


class CaseUsage(_Strict):
    count: int = Field(default=0, ge=0)
    """Calls already reserved in the limit's window."""
    sum: float | int = Field(default=0, ge=0)
    """Their sum so far."""


class ManifestCase(_Strict):
    """A policy test case: the decision before execution, nothing is executed."""

    name: str = Field(min_length=1)
    """What the case shows."""
    principal: CasePrincipal = CasePrincipal()
    """The proposing principal."""
    tenant: str = Field(default="test", min_length=1)
    proposer: Literal["agent", "human", "system", "service"] = "agent"
    """Who proposes: MCP calls are always agent."""
    channel: Literal["mcp", "api", "cli", "ui", "scheduler", "internal", "recovery"] = "mcp"
    input: dict[str, Any] = {}
    """The tool arguments."""
    usage: dict[str, CaseUsage] = {}
    """Prior usage of the action's limits by name, e.g. {daily-refunds: {count: 5, sum: 900}}."""
    expect: ResultCode
    """INPUT_VALIDATION_FAILED, POLICY_DENIED (or a deny rule's code), LIMIT_EXCEEDED,
    APPROVAL_REQUIRED, or SUCCEEDED (dispatched without approval)."""


class Manifest(_Strict):
    """One action (contract §6)."""

    apiVersion: Literal["signoff/v1"]
    """Always signoff/v1."""
    kind: Literal["Action"]
    """Always Action."""
    metadata: Metadata
    spec: Spec
    tests: list[ManifestCase] = []
    """Policy test cases run by ``signoff check``."""
