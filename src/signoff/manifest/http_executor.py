"""The HTTP executor: one JSON request per dispatch, every outcome classified explicitly.

=====================================================  ==========  ==========================
what happened                                          status      retry
=====================================================  ==========  ==========================
2xx                                                    SUCCEEDED   NEVER (JSON object = output;
                                                                   deferred work: the receipt)
4xx                                                    FAILED      AFTER_CORRECTION
5xx, timeout or dropped connection after sending       FAILED      MANUAL_REVIEW, or
                                                                   AFTER_BACKOFF if idempotent
connection refused / connect timeout (nothing sent)    FAILED      AFTER_BACKOFF
3xx and other statuses                                 FAILED      MANUAL_REVIEW
=====================================================  ==========  ==========================

The endpoint receives ``Idempotency-Key: <operation_id>``, so an idempotent endpoint recognises a
re-dispatch of the same attempt. Codes per HTTP status come from the manifest (``status_codes``);
the manifest's ``results:`` mapping can then change a code's status or retry disposition.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from signoff.core.codes import ExecutionStatus, RetryDisposition
from signoff.core.results import ExecutionContext, ExecutionResult

RESERVED_HEADERS = frozenset({"idempotency-key", "x-signoff-run-id", "x-signoff-tenant"})
RESERVED_PREFIX = "x-signoff-"
USER_AGENT = "signoff-http-executor/1"


@dataclass(frozen=True, slots=True)
class HttpExecutor:
    """An async executor calling ``url``; headers may hold secrets, so ``repr`` hides their values."""

    url: str
    method: str = "POST"
    timeout: float = 10.0
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    idempotent: bool = False
    status_codes: Mapping[int, str] = field(default_factory=dict)
    deferred: bool = False
    """2xx means "accepted": the JSON body is the receipt and completion is reported later."""

    async def __call__(self, context: ExecutionContext) -> ExecutionResult | dict[str, Any]:
        """Dispatch: the classified result, or for accepted deferred work its receipt."""
        result = await self.send(context)
        if self.deferred and result.status is ExecutionStatus.SUCCEEDED:
            return result.output or {}
        return result

    async def send(self, context: ExecutionContext) -> ExecutionResult:
        """Send one request and classify what happened."""
        headers = {
            "User-Agent": USER_AGENT,
            **self.headers,
            "Idempotency-Key": context.operation_id,
            "X-Signoff-Run-Id": context.run_id,
            "X-Signoff-Tenant": context.tenant_id,
            "X-Signoff-Action": context.action_id,
        }
        async with httpx.AsyncClient(
            timeout=httpx.Timeout(self.timeout), follow_redirects=False
        ) as client:
            try:
                request = client.build_request(
                    self.method, self.url, json=context.input, headers=headers
                )
            except Exception as exc:  # e.g. a header value that is not ASCII: nothing was sent
                return ExecutionResult.permanent_failure(
                    "HTTP_REQUEST_INVALID", f"the request could not be built: {exc}"
                )
            try:
                response = await client.send(request)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
                return ExecutionResult.retryable_failure(
                    "HTTP_UNREACHABLE", f"{self.url} could not be reached; nothing was sent ({exc})"
                )
            except httpx.TimeoutException:
                return self._after_sending("HTTP_TIMEOUT", f"no response within {self.timeout}s")
            except httpx.TransportError as exc:
                return self._after_sending(
                    "HTTP_CONNECTION_LOST",
                    f"the connection failed after the request was sent: {type(exc).__name__}",
                )
        return self.classify(response)

    def _after_sending(self, code: str, message: str, output: Any = None) -> ExecutionResult:
        """The request may have arrived: only an idempotent endpoint may simply be called again."""
        retry = (
            RetryDisposition.AFTER_BACKOFF if self.idempotent else RetryDisposition.MANUAL_REVIEW
        )
        return ExecutionResult.failure(code, message, retry, output=output)

    def classify(self, response: httpx.Response) -> ExecutionResult:
        """Turn a response into a result (see the table in the module docstring)."""
        status = response.status_code
        body = _json_object(response)
        if 200 <= status < 300:
            if body is None:
                return ExecutionResult.succeeded({}, message=f"HTTP {status}")
            return ExecutionResult.succeeded(body)
        detail: dict[str, Any] = {"http_status": status}
        if body is not None:
            detail["body"] = body
        message = f"HTTP {status} {response.reason_phrase}".strip()
        if 400 <= status < 500:
            code = self.status_codes.get(status, "HTTP_CLIENT_ERROR")
            return ExecutionResult.failure(
                code, message, RetryDisposition.AFTER_CORRECTION, output=detail
            )
        if 500 <= status < 600:
            code = self.status_codes.get(status, "HTTP_SERVER_ERROR")
            return self._after_sending(code, message, output=detail)
        return ExecutionResult.failure(
            "HTTP_UNEXPECTED_STATUS", message, RetryDisposition.MANUAL_REVIEW, output=detail
        )


def _json_object(response: httpx.Response) -> dict[str, Any] | None:
    try:
        value = json.loads(response.content) if response.content else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
