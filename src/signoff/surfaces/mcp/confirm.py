"""The ``Confirmer`` over MCP elicitation: the requester's own human confirms what will run.

Presentation and transport only; what needs confirming, what an answer does and who may give it
are the core's (``core/confirmation.py``).

- A host declares it can be asked with the ``elicitation`` client capability (a client without
  it gets the manifest's fallback).
- Handshake-era sessions (protocol <= 2025-11-25: stdio, stateful HTTP) are asked mid-call with
  ``elicitation/create`` (form mode); no answer within ``approval.confirm.wait`` leaves the run
  pending.
- 2026-07-28 requests cannot carry a server-to-client request: the call answers an
  ``InputRequiredResult`` (SEP-2322) with the same form under the key ``confirm`` and a
  ``requestState`` naming the durable run; the client retries the call with its answer. A client
  that never retries leaves the run pending; it can retry later (the state holds no secret and
  stays valid until the run expires), and only the same principal's retry counts.

The form shows exactly what will run: each value of ``will_run`` display-formatted (money with
its currency, dates readably), sensitive values masked, as one-choice fields the human cannot
edit, and one boolean, ``signoff_confirm``, that must be true. An accepted form that changed a
shown value, or left ``signoff_confirm`` false, counts as declined.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from signoff.core.confirmer import ConfirmationAnswer, ConfirmationRequest
from signoff.core.results import ActionOutcome
from signoff.core.runtime import Runtime
from signoff.surfaces.access.caller import Caller
from signoff.surfaces.mcp.runs import RunQueries
from signoff.surfaces.mcp.tasks import TaskIds
from signoff.surfaces.web.display import shown

logger = logging.getLogger(__name__)

INPUT_KEY = "confirm"
"""The ``input_requests`` key of the confirmation form (2026-07-28)."""
CONFIRM_FIELD = "signoff_confirm"
_STATE_PREFIX = "signoff-confirm:"


def can_elicit(ctx: ServerRequestContext[Any, Any]) -> bool:
    """The client declared the elicitation capability (form mode) on this session/request."""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    # An empty ``elicitation: {}`` means form mode (the spec's backwards-compatible default).
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _shown_values(request: ConfirmationRequest) -> dict[str, str]:
    return {name: shown(value, request.display.get(name)) for name, value in request.values.items()}


def form(request: ConfirmationRequest) -> tuple[str, dict[str, Any]]:
    """The elicitation message and requested schema for ``request``."""
    values = _shown_values(request)
    lines = "\n".join(f"  {name}: {text}" for name, text in values.items())
    message = (
        f"{request.message}\n{lines}\n"
        f"(what will run: sha256 {request.digest[:12]}; run {request.run_id})"
    )
    properties: dict[str, Any] = {
        name: {"type": "string", "title": name, "enum": [text], "default": text}
        for name, text in values.items()
        if name != CONFIRM_FIELD
    }
    properties[CONFIRM_FIELD] = {
        "type": "boolean",
        "title": f"Run {request.title} exactly as shown",
        "default": False,
    }
    return message, {"type": "object", "properties": properties, "required": [CONFIRM_FIELD]}


def answer_of(request: ConfirmationRequest, result: types.ElicitResult) -> ConfirmationAnswer:
    """What an elicitation result means: accept only with ``signoff_confirm`` true and every
    shown value as shown."""
    if result.action == "cancel":
        return ConfirmationAnswer.CANCEL
    if result.action != "accept":
        return ConfirmationAnswer.DECLINE
    content: Mapping[str, Any] = result.content or {}
    if content.get(CONFIRM_FIELD) is not True:
        return ConfirmationAnswer.DECLINE
    values = _shown_values(request)
    if any(name in values and content[name] != values[name] for name in content):
        return ConfirmationAnswer.DECLINE
    return ConfirmationAnswer.ACCEPT


def elicit_request(request: ConfirmationRequest) -> types.ElicitRequest:
    message, schema = form(request)
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
    )


def input_required(request: ConfirmationRequest, state: str) -> types.InputRequiredResult:
    """The 2026-07-28 answer to a call that waits for the requester's confirmation."""
    return types.InputRequiredResult(
        input_requests={INPUT_KEY: elicit_request(request)},
        request_state=f"{_STATE_PREFIX}{state}",
    )


def opened_state(state: str | None) -> str | None:
    """The handle a ``requestState`` of ours carries (``None``: not ours)."""
    if state is None or not state.startswith(_STATE_PREFIX):
        return None
    return state.removeprefix(_STATE_PREFIX)


def elicit_result(responses: Mapping[str, Any] | None) -> types.ElicitResult | None:
    """The client's answer to our confirmation form in ``input_responses``."""
    found = (responses or {}).get(INPUT_KEY)
    if found is None:
        return None
    if isinstance(found, types.ElicitResult):
        return found
    try:
        dumped = found.model_dump() if hasattr(found, "model_dump") else found
        return types.ElicitResult.model_validate(dumped)
    except ValueError:
        return None


class SessionConfirmer:
    """Asks through this request's session. 2026-07-28 requests answer ``None`` at once: the
    surface returns an ``InputRequiredResult`` for the committed run instead."""

    def __init__(self, ctx: ServerRequestContext[Any, Any]) -> None:
        self._ctx = ctx

    @property
    def available(self) -> bool:
        return can_elicit(self._ctx)

    async def ask(self, request: ConfirmationRequest) -> ConfirmationAnswer | None:
        if modern(self._ctx):
            return None
        message, schema = form(request)
        result: types.ElicitResult | None = None
        try:
            with anyio.move_on_after(request.wait.total_seconds()):
                result = await self._ctx.session.elicit_form(
                    message, schema, related_request_id=self._ctx.request_id
                )
        except (NoBackChannelError, MCPError):
            logger.info("run %s: the host could not be asked now", request.run_id)
            return None
        return answer_of(request, result) if result is not None else None


async def answered(
    runtime: Runtime,
    runs: RunQueries,
    ids: TaskIds,
    caller: Caller,
    handle: str,
    params: types.CallToolRequestParams,
) -> ActionOutcome:
    """The requester's answer carried by a retried call, handed to the core (which refuses
    anyone but the requester); without an answer, the run as the caller may read it."""
    run_id = ids.open(caller.tenant_id, handle)
    if run_id is None:
        return await runs.get(caller, "")
    result = elicit_result(params.input_responses)
    request = await runtime.confirmation_request(run_id, caller.tenant_id, caller.principal)
    if result is None or request is None:
        return await runs.get(caller, run_id)
    answer = answer_of(request, result)
    return await runtime.confirm(run_id, caller.tenant_id, caller.principal, answer, request.digest)
