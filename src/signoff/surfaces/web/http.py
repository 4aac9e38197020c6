"""Small HTTP helpers shared by the web routes: bounded bodies, JSON answers, status mapping."""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import parse_qs, unquote_to_bytes

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from signoff.core.codes import Code
from signoff.surfaces.access.scopes import ScopeRefusal

MAX_BODY_BYTES = 64 * 1024
log = logging.getLogger("signoff.http")

# HTTP status of each answer code; anything not listed is a 200 (the decision or completion
# happened, or the stored result is returned).
STATUS_OF: dict[str, int] = {
    Code.UNAUTHENTICATED: 401,
    Code.INSUFFICIENT_SCOPE: 403,
    Code.APPROVER_NOT_ELIGIBLE: 403,
    Code.ACTION_RUN_NOT_FOUND: 404,
    Code.APPROVAL_ALREADY_DECIDED: 409,
    Code.APPROVAL_NOT_PENDING: 409,
    Code.APPROVAL_RUN_CHANGED: 409,
    Code.AMENDMENT_NOT_ALLOWED: 422,
    Code.AMENDMENT_INVALID: 422,
    Code.AMENDMENT_DENIED: 422,
    Code.APPROVAL_EXPIRED: 409,
    Code.STALE_ACTION_ATTEMPT: 409,
    Code.INPUT_VALIDATION_FAILED: 400,
    Code.ACTION_RESULT_NOT_TERMINAL: 422,
    Code.REPAIR_NOT_APPLICABLE: 409,
    Code.REPAIR_NOT_IDEMPOTENT: 409,
    Code.ACTION_NOT_REGISTERED: 409,
    Code.RECEIPT_RUN_NOT_FINISHED: 409,
    Code.RECEIPT_NOT_ANCHORED: 409,
    Code.RECEIPT_NOT_CHAINED: 409,
    Code.RECEIPT_RUN_INCONSISTENT: 409,
    Code.RECEIPT_TRAIL_INCONSISTENT: 409,
    Code.RECEIPT_KEYS_MISSING: 503,
    Code.MANIFEST_INVALID: 400,
}

NOT_FOUND_MESSAGE = "No such run."


class BodyTooLarge(Exception):
    pass


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The raw body, refusing more than ``limit`` bytes whatever Content-Length claims."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def answer(code: str, message: str = "", status: int | None = None, **fields: Any) -> JSONResponse:
    """``{"code": ..., "message": ..., **fields}`` with the status the code maps to."""
    return JSONResponse(
        {"code": code, "message": message, **fields},
        status_code=status if status is not None else STATUS_OF.get(code, 200),
        headers={"Cache-Control": "no-store"},
    )


def not_found() -> JSONResponse:
    """The one answer for a run that is missing, in another tenant, or not provably the caller's."""
    return answer(Code.ACTION_RUN_NOT_FOUND, NOT_FOUND_MESSAGE)


def unauthenticated() -> JSONResponse:
    response = answer(Code.UNAUTHENTICATED, "A valid bearer token is required.")
    response.headers["WWW-Authenticate"] = 'Bearer error="invalid_token"'
    return response


def too_large() -> JSONResponse:
    return answer(Code.INPUT_VALIDATION_FAILED, "The request body is too large.", status=413)


def insufficient_scope(refusal: ScopeRefusal) -> JSONResponse:
    """403 for a valid token of the wrong kind, naming the scope needed (RFC 6750 §3.1)."""
    response = answer(
        Code.INSUFFICIENT_SCOPE,
        refusal.description,
        error="insufficient_scope",
        scope=refusal.scope,
    )
    response.headers["WWW-Authenticate"] = refusal.challenge()
    return response


# In a path: no control character at all. In a query: none but tab, newline and carriage return
# (a pasted search). NUL is what PostgreSQL refuses outright; the others are never meant.
_PATH_UNUSABLE = re.compile(r"[\x00-\x1f\x7f]")
_QUERY_UNUSABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
UNUSABLE_TARGET_MESSAGE = (
    "The request's path or query holds a character that cannot be used (NUL or another control "
    "character, or percent-escapes that are not UTF-8)."
)


def usable_target(scope: Scope) -> bool:
    """Whether the request's path and query, percent-decoded, are UTF-8 without control
    characters — so no route, and no database, ever sees such a value."""
    raw = scope.get("raw_path") or str(scope.get("path", "")).encode("utf-8", "surrogatepass")
    raw_path = bytes(raw).partition(b"?")[0]  # some servers leave the query on it
    query = bytes(scope.get("query_string") or b"").replace(b"+", b" ")
    try:
        path = unquote_to_bytes(raw_path).decode("utf-8")
        decoded_query = unquote_to_bytes(query).decode("utf-8")
    except UnicodeDecodeError:
        return False
    decoded_path = str(scope.get("path", ""))
    return not (
        _PATH_UNUSABLE.search(path)
        or _PATH_UNUSABLE.search(decoded_path)
        or _QUERY_UNUSABLE.search(decoded_query)
    )


class UsableTargets:
    """ASGI middleware, outermost: a path or query holding NUL, another control character or
    percent-escapes that are not UTF-8 answers ``400 INPUT_VALIDATION_FAILED`` on every route
    (MCP, API, inbox, links, callbacks, operator endpoints) and every store, before any route or
    database sees it (PostgreSQL refused such a run id with a 500)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or usable_target(scope):
            await self.app(scope, receive, send)
            return
        await _refusal(str(scope.get("path", "")))(scope, receive, send)


def _refusal(path: str) -> Response:
    if path.startswith("/approvals"):
        page = (
            "<!doctype html><meta charset=utf-8><title>signoff: bad request</title>"
            f"<h1>Bad request</h1><p>{UNUSABLE_TARGET_MESSAGE} [{Code.INPUT_VALIDATION_FAILED}]</p>"
        )
        return HTMLResponse(page, status_code=400, headers={"Cache-Control": "no-store"})
    return answer(Code.INPUT_VALIDATION_FAILED, UNUSABLE_TARGET_MESSAGE, status=400)


class FaultBarrier:
    """ASGI middleware: a fault inside signoff (a store outage, a bug) answers a plain 500 with
    the stable code — JSON for the API and callbacks, a short page for the inbox — never a
    traceback or the exception's text. The log has the detail."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except Exception:
            log.exception("%s %s failed", scope.get("method"), scope.get("path"))
            if started:
                return  # the answer is under way; the connection ends here
            await _fault_response(str(scope.get("path", "")))(scope, receive, send)


def _fault_response(path: str) -> Response:
    message = "signoff could not answer this request; nothing was changed. Try again later."
    if path.startswith("/approvals"):
        page = (
            "<!doctype html><meta charset=utf-8><title>signoff: unavailable</title>"
            f"<h1>Something went wrong</h1><p>{message} [{Code.ACTION_RUNTIME_FAILED}]</p>"
        )
        return HTMLResponse(page, status_code=500, headers={"Cache-Control": "no-store"})
    return answer(Code.ACTION_RUNTIME_FAILED, message, status=500)


async def read_form(request: Request) -> dict[str, str] | None:
    """An ``application/x-www-form-urlencoded`` body as first values, or ``None``."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        return None
    try:
        raw = await read_body(request)
        parsed = parse_qs(
            raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False, max_num_fields=20
        )
    except (BodyTooLarge, UnicodeDecodeError, ValueError):
        return None
    return {key: values[0] for key, values in parsed.items() if values}
