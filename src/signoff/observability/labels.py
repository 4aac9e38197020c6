"""Where every metric label value comes from: this server's own names, or ``unknown``.

A label value is one of a set fixed by this build (stages, statuses, retry dispositions, audit
kinds, table names, MCP methods, the catalog's codes) or by what the operator registered (action
ids, tool names, the codes an action declares: its ``results:``, deny rules and executor codes).
Anything a client, an executor or an upstream can invent — a tool name, a JSON-RPC method, a
code nobody declared — is ``unknown``, so no caller can grow the number of series.
"""

from __future__ import annotations

from collections.abc import Collection

from signoff.core.audit_events import AuditKind
from signoff.core.codes import Code, ExecutionStatus, RetryDisposition
from signoff.core.run import ApprovalVote

UNKNOWN = "unknown"

STAGES = frozenset(
    {"resolve", "validate", "policy", "reserve", "guard", "execute", "record", "approval"}
)
TABLES = frozenset({"signoff_runs", "signoff_audit_events", "signoff_duplicates", "runs", "audit"})
CATALOG = frozenset(str(code) for code in Code)
STATUSES = frozenset(str(status) for status in ExecutionStatus)
RETRIES = frozenset(str(retry) for retry in RetryDisposition)
VOTES = frozenset(str(vote) for vote in ApprovalVote)
CALLBACK_REASONS = CATALOG | {"UNAUTHENTICATED", "TOO_LARGE"}
AUDIT_KINDS = frozenset(str(kind) for kind in AuditKind)
# JSON-RPC's reserved error codes (-32768..-32000): the SDK's and MCP's own errors.
_RESERVED_ERRORS = range(-32768, -31999)


def one_of(value: str, allowed: Collection[str]) -> str:
    """``value`` when it is one of ``allowed``, else ``unknown``."""
    return value if value in allowed else UNKNOWN


def json_rpc_error(code: int) -> str:
    """A JSON-RPC error code as a label: one of the reserved codes, else ``unknown``."""
    return str(code) if code in _RESERVED_ERRORS else UNKNOWN
