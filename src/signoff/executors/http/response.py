"""Turning an HTTP response into a result: code rules, the output mapping, what an agent may see.

=====================================================  ==========  ===============================
what happened                                          status      code / retry
=====================================================  ==========  ===============================
a ``response.codes`` rule matches                      FAILED      its code (4xx: AFTER_CORRECTION,
                                                                   5xx: possibly applied, others:
                                                                   MANUAL_REVIEW), then ``results:``
2xx                                                    SUCCEEDED   SUCCEEDED / NEVER
4xx                                                    FAILED      ``status_codes`` or
                                                                   HTTP_CLIENT_ERROR / AFTER_CORRECTION
5xx                                                    FAILED      ``status_codes`` or
                                                                   HTTP_SERVER_ERROR, possibly applied
body over ``response.max_bytes``                       FAILED      HTTP_RESPONSE_TOO_LARGE /
                                                                   MANUAL_REVIEW
3xx and other statuses                                 FAILED      HTTP_UNEXPECTED_STATUS /
                                                                   MANUAL_REVIEW
=====================================================  ==========  ===============================

"Possibly applied" failures are ``MANUAL_REVIEW``; the dispatcher may retry them inside the run with
the same operation id when the executor is idempotent (``executor.retry``). An upstream body reaches
``output`` only through the output mapping of a 2xx response (or, without a mapping, a 2xx JSON
object as it is); failures carry ``{"http_status": n}`` and never the upstream body.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import httpx

from signoff.core.codes import RetryDisposition
from signoff.core.disclosure import redact
from signoff.core.results import ExecutionResult
from signoff.executors.http.template import ABSENT, Reference, render

DEFAULT_MAX_BYTES: Final = 1024 * 1024
PASS_THROUGH: Final = object()
"""The default output mapping: a 2xx JSON object becomes ``output`` as it is."""


@dataclass(frozen=True, slots=True)
class CodeRule:
    """``status`` (404, or a class such as "4xx"), optionally ``field`` == ``equals`` -> ``code``."""

    code: str
    status: int | str | None = None
    field: Reference | None = None
    equals: Any = None

    def matches(self, status: int, scope: Mapping[str, Any]) -> bool:
        if isinstance(self.status, int) and self.status != status:
            return False
        if isinstance(self.status, str) and self.status[0] != str(status)[0]:
            return False
        if self.field is None:
            return True
        value = self.field.lookup(scope)
        return value is not ABSENT and value == self.equals and type(value) is type(self.equals)


@dataclass(frozen=True, slots=True)
class ResponseSpec:
    output: Any = PASS_THROUGH
    codes: tuple[CodeRule, ...] = ()
    status_codes: Mapping[int, str] = field(default_factory=dict)
    max_bytes: int = DEFAULT_MAX_BYTES

    def classify(self, response: httpx.Response, content: bytes | None) -> ExecutionResult:
        """``content`` is the body as read, or ``None`` when it was over ``max_bytes``."""
        status = response.status_code
        result = self._classified(response, content)
        # The reason phrase is the upstream's text: the agent reads the standard one, the
        # operator (audit trail) what the upstream sent when it differs.
        phrase = response.reason_phrase
        if phrase and phrase != httpx.codes.get_reason_phrase(status):
            note = redact(f"upstream reason phrase: {phrase}")
            result = result.model_copy(
                update={"detail": f"{result.detail}; {note}" if result.detail else note}
            )
        return result

    def _classified(self, response: httpx.Response, content: bytes | None) -> ExecutionResult:
        status = response.status_code
        detail: dict[str, Any] = {"http_status": status}
        message = f"HTTP {status} {httpx.codes.get_reason_phrase(status)}".strip()
        if content is None:
            return ExecutionResult.manual_review_failure(
                "HTTP_RESPONSE_TOO_LARGE",
                f"{message}: the response is over the {self.max_bytes}-byte limit",
            ).model_copy(update={"output": detail})
        scope = {"status": status, "body": _json(content), "headers": response.headers}
        for rule in self.codes:
            if rule.matches(status, scope):
                return _failure(status, rule.code, message, detail)
        if 200 <= status < 300:
            return self._succeeded(status, scope)
        if 400 <= status < 500:
            return _failure(
                status, self.status_codes.get(status, "HTTP_CLIENT_ERROR"), message, detail
            )
        if 500 <= status < 600:
            return _failure(
                status, self.status_codes.get(status, "HTTP_SERVER_ERROR"), message, detail
            )
        return _failure(status, "HTTP_UNEXPECTED_STATUS", message, detail)

    def _succeeded(self, status: int, scope: Mapping[str, Any]) -> ExecutionResult:
        body = scope["body"]
        if self.output is PASS_THROUGH:
            if isinstance(body, dict):
                return ExecutionResult.succeeded(body)
            return ExecutionResult.succeeded({}, message=f"HTTP {status}")
        output = render(self.output, scope)
        return ExecutionResult.succeeded(output if isinstance(output, dict) else {})


def _failure(status: int, code: str, message: str, detail: dict[str, Any]) -> ExecutionResult:
    if 400 <= status < 500:
        return ExecutionResult.failure(code, message, RetryDisposition.AFTER_CORRECTION, detail)
    if 500 <= status < 600:
        return ExecutionResult.possibly_applied_failure(code, message, detail)
    return ExecutionResult.failure(code, message, RetryDisposition.MANUAL_REVIEW, detail)


def _json(content: bytes) -> Any:
    if not content:
        return None
    try:
        return json.loads(content)
    except ValueError:
        return None
