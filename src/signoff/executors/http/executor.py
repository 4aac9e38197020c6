"""The HTTP executor: one request per dispatch, built from the input, every outcome classified.

=====================================================  ==========  ==========================
what happened                                          status      code / retry
=====================================================  ==========  ==========================
the request cannot be built from this input            FAILED      HTTP_REQUEST_INVALID /
(a path parameter missing, a value of the wrong kind)              AFTER_CORRECTION
connection refused / connect timeout (nothing sent)    FAILED      HTTP_UNREACHABLE /
                                                                   AFTER_BACKOFF
a phase's ``timeout`` or the overall ``deadline``      FAILED      HTTP_TIMEOUT /
passed, or dropped connection after sending                        HTTP_CONNECTION_LOST,
                                                                   possibly applied
a response                                             see ``signoff.executors.http.response``
=====================================================  ==========  ==========================

"Possibly applied" is ``MANUAL_REVIEW``; an idempotent executor with ``executor.retry`` is called
again inside the run with the same operation id, which the endpoint receives as ``Idempotency-Key``.
No message carries the URL (it may hold credentials), header values or the upstream body.
The response body is read through ``body.read_limited``: decompressed as it arrives, never past
``response.max_bytes`` of inflated bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote

import httpx

from signoff.core.codes import ExecutionStatus
from signoff.core.disclosure import redact
from signoff.core.results import ExecutionContext, ExecutionResult
from signoff.executors.http.body import ACCEPT_ENCODING, BodyUndecodable, read_limited
from signoff.executors.http.response import ResponseSpec
from signoff.executors.http.template import (
    ABSENT,
    REFERENCE,
    TemplateError,
    as_text,
    render,
    render_text,
)

RESERVED_HEADERS = frozenset({"idempotency-key", "x-signoff-run-id", "x-signoff-tenant"})
DEFAULT_DEADLINE: Final = 30.0
"""Seconds the whole exchange may take unless the manifest says otherwise (``http.deadline``)."""
RESERVED_PREFIX = "x-signoff-"
USER_AGENT = "signoff-http-executor/1"
BODYLESS_METHODS = frozenset({"GET", "DELETE"})
INPUT_BODY: Final = "input"
"""``body_kind`` default for POST/PUT/PATCH: the whole input as a JSON object."""


Pair = tuple[str, str | int | float | bool | None]
"""A query parameter or form field (always a string here; the wider type is httpx's)."""


@dataclass(frozen=True, slots=True)
class HttpRequest:
    url: str
    params: list[Pair]
    json: Any = None
    form: list[Pair] | None = None


BUILT_IN_CODES = frozenset(
    {
        "HTTP_REQUEST_INVALID",
        "HTTP_UNREACHABLE",
        "HTTP_TIMEOUT",
        "HTTP_CONNECTION_LOST",
        "HTTP_RESPONSE_TOO_LARGE",
        "HTTP_CLIENT_ERROR",
        "HTTP_SERVER_ERROR",
        "HTTP_UNEXPECTED_STATUS",
    }
)
"""The codes ``send`` and the response classifier produce themselves (kept in step by a test)."""


@dataclass(frozen=True, slots=True)
class HttpExecutor:
    """An async executor calling ``url``; headers may hold secrets, so ``repr`` hides them.

    ``url`` may carry ``{{ input.x }}`` in its path (each value percent-encoded as one segment),
    ``query`` maps parameter names to templates, ``body_kind`` is ``input`` (the whole input as
    JSON), ``json`` (``body`` is a JSON template), ``form`` (``body`` maps form fields to
    templates) or ``none``.
    """

    url: str = field(repr=False)
    method: str = "POST"
    timeout: float = 10.0
    """Seconds each phase may take (connect, write, each read)."""
    deadline: float = DEFAULT_DEADLINE
    """Seconds the whole exchange may take, connect to last byte; then ``HTTP_TIMEOUT``."""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    query: Mapping[str, Any] = field(default_factory=dict)
    body_kind: str = INPUT_BODY
    body: Any = None
    response: ResponseSpec = field(default_factory=ResponseSpec)
    deferred: bool = False
    """2xx means "accepted": the output is the receipt and completion is reported later."""

    @property
    def declared_codes(self) -> tuple[str, ...]:
        """Every code this executor can answer with: its built-ins and the manifest's mappings."""
        mapped = {rule.code for rule in self.response.codes} | set(
            self.response.status_codes.values()
        )
        return tuple(sorted(BUILT_IN_CODES | mapped))

    def __post_init__(self) -> None:
        if self.method in BODYLESS_METHODS and self.body_kind == INPUT_BODY:
            object.__setattr__(self, "body_kind", "none")

    async def __call__(self, context: ExecutionContext) -> ExecutionResult | dict[str, Any]:
        """Dispatch: the classified result, or for accepted deferred work its receipt."""
        result = await self.send(context)
        if self.deferred and result.status is ExecutionStatus.SUCCEEDED:
            return result.output or {}
        return result

    def build(self, data: Mapping[str, Any]) -> HttpRequest:
        """The request for this input (``TemplateError`` when the input cannot fill it)."""
        scope = {"input": data}
        url = REFERENCE.sub(
            lambda m: _segment(render_text(m.group(0), scope), m.group(0)), self.url
        )
        params = _pairs(self.query, scope, "query")
        if self.body_kind == "json":
            body = render(self.body, scope)
            return HttpRequest(url, params, json=None if body is ABSENT else body)
        if self.body_kind == "form":
            return HttpRequest(url, params, form=_pairs(self.body, scope, "form"))
        if self.body_kind == INPUT_BODY:
            return HttpRequest(url, params, json=dict(data))
        return HttpRequest(url, params)

    async def send(self, context: ExecutionContext) -> ExecutionResult:
        """Send one request and classify what happened."""
        try:
            built = self.build(context.input)
        except TemplateError as exc:
            return ExecutionResult.correctable_failure(
                "HTTP_REQUEST_INVALID", f"the request cannot be built from this input: {exc}"
            )
        headers = {
            "User-Agent": USER_AGENT,
            "Accept-Encoding": ACCEPT_ENCODING,
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
                    self.method,
                    built.url,
                    params=httpx.QueryParams(built.params),
                    json=built.json if self.body_kind in ("json", INPUT_BODY) else None,
                    data=_form(built.form),
                    headers=headers,
                )
            except Exception:  # e.g. a header value that is not ASCII: nothing was sent
                return ExecutionResult.permanent_failure(
                    "HTTP_REQUEST_INVALID", "the request could not be built (URL or headers)"
                )
            try:
                async with asyncio.timeout(self.deadline):
                    return await self._exchange(client, request)
            except TimeoutError:
                return self._lost("HTTP_TIMEOUT", f"no complete response within {self.deadline}s")

    async def _exchange(self, client: httpx.AsyncClient, request: httpx.Request) -> ExecutionResult:
        try:
            response = await client.send(request, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            return ExecutionResult.retryable_failure(
                "HTTP_UNREACHABLE", "the endpoint could not be reached; nothing was sent"
            ).model_copy(update={"detail": _detail(request, exc)})
        except httpx.TimeoutException:
            return self._lost("HTTP_TIMEOUT", f"no response within {self.timeout}s")
        except httpx.TransportError as exc:
            lost = self._lost("HTTP_CONNECTION_LOST", _lost_message(exc))
            return lost.model_copy(update={"detail": _detail(request, exc)})
        try:
            content = await read_limited(response, self.response.max_bytes)
        except BodyUndecodable as exc:
            return self.response.classify(response, b"").model_copy(
                update={"detail": f"the response body could not be decoded ({exc})"}
            )
        except httpx.TimeoutException:
            return self._lost("HTTP_TIMEOUT", f"the response did not finish within {self.timeout}s")
        except httpx.TransportError as exc:
            return self._lost("HTTP_CONNECTION_LOST", _lost_message(exc))
        finally:
            await response.aclose()
        return self.response.classify(response, content)

    @staticmethod
    def _lost(code: str, message: str) -> ExecutionResult:
        """The request may have arrived and had its effect."""
        return ExecutionResult.possibly_applied_failure(code, message)


def _detail(request: httpx.Request, exc: Exception) -> str:
    """For the run's audit trail only: where it went and what failed, credentials redacted."""
    return redact(f"{request.method} {request.url}: {type(exc).__name__}: {exc}")


def _lost_message(exc: Exception) -> str:
    return f"the connection failed after the request was sent ({type(exc).__name__})"


def _segment(value: Any, where: str) -> str:
    """One path segment: percent-encoded (``/`` too), never ``.`` or ``..``."""
    text = as_text(value, where)
    if text in ("", ".", ".."):
        raise TemplateError(f"{where} cannot be the path segment {text!r}")
    return quote(text, safe="")


def _pairs(template: Any, scope: Mapping[str, Any], kind: str) -> list[Pair]:
    """Query parameters or form fields: an absent or null value is left out, a list repeats."""
    pairs: list[Pair] = []
    for name, value in (template or {}).items():
        rendered = render_text(value, scope) if isinstance(value, str) else value
        if rendered is ABSENT or rendered is None:
            continue
        for item in rendered if isinstance(rendered, list) else [rendered]:
            pairs.append((str(name), as_text(item, f"{kind} {name}")))
    return pairs


def _form(pairs: list[Pair] | None) -> dict[str, list[str]] | None:
    if pairs is None:
        return None
    grouped: dict[str, list[str]] = {}
    for name, value in pairs:
        grouped.setdefault(name, []).append(str(value))
    return grouped
