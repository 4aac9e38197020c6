"""What may reach an agent, and how operator detail is made safe to keep (contract §4).

One rule for every way an executor, guard, preview, cancel hook or external completion can
answer — sync, async, deferred dispatch, completion, cancel hook, preview, guard, every retried
attempt:

- **A hook that raised** answers with its code's catalog message (``told``), never the
  exception's text; the exception, redacted, is the result's operator ``detail`` (``raised``).
- **A message a hook returned** reaches the agent only when it reads as a plain sentence
  (``plain``): no URL or DSN, file path, traceback, exception class name, SQL, control
  character, credential-looking ``key=value`` or bearer token, and at most
  ``MAX_MESSAGE_CHARS`` long. Otherwise the agent gets the code's catalog message and the
  hook's message, redacted, goes to ``detail`` (``screened``, ``screened_decision``).

``ExecutionResult.detail`` is never serialised with the result (so never stored in a run, never
replayed to a duplicate, never answered) and is written only to the run's audit trail, after
``redact`` has removed credentials from URLs and secret-looking query and key=value parameters.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from signoff.core.codes import CODE_DESCRIPTIONS, Code, ExecutionStatus

if TYPE_CHECKING:
    from signoff.core.registry import CompiledAction
    from signoff.core.results import ExecutionResult, GuardDecision

MAX_DETAIL_CHARS = 2000
MAX_MESSAGE_CHARS = 500
REDACTED = "***"

# scheme://user:password@host  ->  scheme://***@host
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.\-]*://)[^/\s@?#]+@")
_SECRET_NAMES = (
    r"(?:api[_\-]?key|apikey|key|token|access[_\-]?token|refresh[_\-]?token|id[_\-]?token|"
    r"secret|client[_\-]?secret|password|passwd|pwd|pass|auth|authorization|signature|sig|"
    r"credential|credentials|session|sessionid)"
)
# ?api_key=...&token=...  and  password=... / Password: ... in DSNs and messages
_QUERY_SECRET = re.compile(
    rf"(?i)(?P<lead>[?&;\s,(]|^)(?P<name>{_SECRET_NAMES})(?P<sep>\s*[=:]\s*)[^&\s#;,)'\"]+"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}")
# What a plain sentence for an agent never contains.
_INTERNALS = re.compile(
    r"""
      [a-zA-Z][a-zA-Z0-9+.\-]*://                          # a URL or a DSN
    | \bTraceback\b | \bFile\s+"                           # a Python traceback
    | (?:^|[\s'"(=:,\[])(?:~|\.{1,2})?/[^\s/'"]+/          # a POSIX path: /srv/x, ./a/b, ~/a/b
    | \b[A-Za-z]:\\ | \\\\[^\s\\]+\\                       # a Windows or UNC path
    | \b[A-Z]\w*(?:Error|Exception)\b                      # an exception class
    | \[SQL | \b(?:SELECT|INSERT|UPDATE|DELETE)\b.*\b(?:FROM|INTO|SET|WHERE)\b  # SQL
    | [\x00-\x1f\x7f]                                      # newlines, control characters
    """,
    re.VERBOSE,
)
_CATALOG = frozenset(str(code) for code in Code)
_CODE_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
_FALLBACK = {
    ExecutionStatus.SUCCEEDED: "The action completed.",
    ExecutionStatus.FAILED: "The action failed; its code and retry say what to do next.",
    ExecutionStatus.DENIED: "The action was refused.",
    ExecutionStatus.VALIDATION_FAILED: "The input was refused.",
    ExecutionStatus.CANCELLED: "The run was cancelled.",
}


def redact(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    """``text`` without URL credentials, secret parameters or bearer tokens; bounded."""
    text = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _QUERY_SECRET.sub(rf"\g<lead>\g<name>\g<sep>{REDACTED}", text)
    if len(text) > limit:
        text = text[:limit] + "…"
    return text


def exception_detail(exc: BaseException) -> str:
    """An exception for the audit trail: its type and redacted text."""
    return redact(f"{type(exc).__name__}: {exc}")


def raised(hook: str, exc: BaseException) -> str:
    """The operator detail of a hook (``executor``, ``dispatch``, ``guard``…) that raised."""
    return redact(f"{hook} raised {type(exc).__name__}: {exc}")


def plain(message: str) -> bool:
    """Whether ``message`` may reach an agent as it is (see the module docstring)."""
    return (
        len(message) <= MAX_MESSAGE_CHARS
        and _INTERNALS.search(message) is None
        and redact(message) == message
    )


def code_name(code: str) -> str:
    """``code`` when it looks like a code (``INVOICE_LOCKED``), else a neutral word: for
    messages naming a code someone else chose."""
    return code if _CODE_NAME.fullmatch(code) else "an undeclared code"


def told(
    code: str,
    action: CompiledAction | None = None,
    status: ExecutionStatus = ExecutionStatus.FAILED,
) -> str:
    """The code's catalog message: the manifest's ``results:`` message for a domain code, the
    catalog's description for one of signoff's codes, else a sentence for the status."""
    if action is not None:
        mapping = action.definition.results.get(code)
        if mapping is not None and mapping.message and plain(mapping.message):
            return mapping.message
    if code in _CATALOG:
        return CODE_DESCRIPTIONS[Code(code)]
    return _FALLBACK.get(status, _FALLBACK[ExecutionStatus.FAILED])


def _with_detail(existing: str | None, added: str) -> str:
    return redact(f"{existing}; {added}" if existing else added)


def screened(action: CompiledAction | None, result: ExecutionResult) -> ExecutionResult:
    """``result`` with a message an agent may read: a returned message that is not plain is
    replaced by the code's catalog message and kept, redacted, in ``detail``."""
    if plain(result.message):
        return result
    return result.model_copy(
        update={
            "message": told(result.code, action, result.status),
            "detail": _with_detail(result.detail, f"message: {result.message}"),
        }
    )


def screened_decision(action: CompiledAction | None, decision: GuardDecision) -> GuardDecision:
    """A guard's refusal, with a message an agent may read (as ``screened``)."""
    if plain(decision.message):
        return decision
    return decision.model_copy(
        update={
            "message": told(decision.code, action, ExecutionStatus.DENIED),
            "detail": _with_detail(decision.detail, f"message: {decision.message}"),
        }
    )
