"""Over stdio, a line the SDK cannot read still gets an answer: a JSON-RPC error, never silence.

The SDK's stdio reader hands an unreadable line (invalid JSON, nesting beyond the JSON parser's
recursion limit, a message that is not JSON-RPC) to the session as an exception, which only logs
it: the client waits forever. ``screen`` sits between the two and answers such a line with a
JSON-RPC error carrying the request's id when it can be read from the raw text (``-32700`` parse
error, or ``-32600`` invalid request), ``null`` otherwise.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

log = logging.getLogger("signoff.mcp")

MAX_SCAN_CHARS = 1024 * 1024
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_ID_VALUE = re.compile(r'\s*:\s*(-?[0-9]{1,18}(?![0-9.eE])|"(?:[^"\\]|\\.){0,255}")')


def request_id(text: str) -> int | str | None:
    """The top-level ``"id"`` of a JSON-RPC line the JSON parser could not read, if visible."""
    depth = 0
    for match in _TOKEN.finditer(text, 0, min(len(text), MAX_SCAN_CHARS)):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
        elif token in ("]", "}"):
            depth -= 1
        elif depth == 1 and token == '"id"':
            value = _ID_VALUE.match(text, match.end())
            if value is None:
                return None
            try:
                found = json.loads(value.group(1))
            except ValueError:
                return None
            return found if isinstance(found, int | str) else None
    return None


def error_reply(exc: Exception) -> types.JSONRPCError | None:
    """The answer to an unreadable line; ``None`` for a readable message without an id (a
    notification, which gets no answer)."""
    parse_error = True
    raw: Any = None
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        raw = first.get("input")
        parse_error = first.get("type") == "json_invalid"
    if isinstance(raw, dict):
        found = raw.get("id")
        ident = found if isinstance(found, int | str) and not isinstance(found, bool) else None
        if ident is None and "method" in raw and "id" not in raw:
            return None
    else:
        ident = request_id(raw) if isinstance(raw, str) else None
    code, message = (
        (types.PARSE_ERROR, "Parse error: the line is not JSON this server can read.")
        if parse_error
        else (types.INVALID_REQUEST, "Invalid request: not a JSON-RPC message.")
    )
    return types.JSONRPCError(
        jsonrpc="2.0", id=ident, error=types.ErrorData(code=code, message=message)
    )


async def screen(
    source: ReadStream[SessionMessage | Exception],
    forward: MemoryObjectSendStream[SessionMessage | Exception],
    replies: WriteStream[SessionMessage],
) -> None:
    """Pass readable messages on; answer unreadable lines directly."""
    async with forward:
        async for item in source:
            if isinstance(item, Exception):
                reply = error_reply(item)
                log.warning("answered an unreadable stdio line (%s)", type(item).__name__)
                if reply is not None:
                    await replies.send(SessionMessage(reply))
                continue
            await forward.send(item)
