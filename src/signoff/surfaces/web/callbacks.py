"""``POST /api/callbacks/{run_id}``: an external system reports a deferred run's final result.

Authentication is an HMAC-SHA256 over one canonical message (see ``docs/callbacks.md``)::

    signoff-callback-v1 \\n TENANT \\n RUN_ID \\n ATTEMPT_TOKEN \\n RAW_BODY

sent as ``X-Signoff-Signature: sha256=<hex>``, with ``X-Signoff-Tenant`` and ``X-Signoff-Attempt``.
The secret is the action's ``executor.callback_secret``, else the server-wide one. A missing run,
a run of another tenant and a signature that does not verify all get the same 404
``ACTION_RUN_NOT_FOUND``. This surface only authenticates and translates; ``Runtime.complete``
decides (stale attempt, repeated completion, non-terminal result).
"""

from __future__ import annotations

import logging

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from signoff.core.codes import Code
from signoff.core.results import ExecutionResult
from signoff.core.runtime import Runtime
from signoff.observability import record_callback_refusal
from signoff.surfaces.web.http import BodyTooLarge, answer, not_found, read_body, too_large
from signoff.surfaces.web.signing import SIGNATURE_HEADER, verify

CALLBACK_PATH = "/api/callbacks/{run_id}"
TENANT_HEADER = "X-Signoff-Tenant"
ATTEMPT_HEADER = "X-Signoff-Attempt"
MAX_CALLBACK_BYTES = 1024 * 1024
_VERSION = b"signoff-callback-v1"
# Verifying against this when there is no real secret keeps the refusal's cost the same.
_NO_SECRET = "signoff-no-secret-" + "x" * 32
log = logging.getLogger("signoff.callbacks")


def canonical_message(tenant: str, run_id: str, attempt_token: str, body: bytes) -> bytes:
    """What a callback's signature covers: version, tenant, run id, attempt token, raw body."""
    head = b"\n".join(part.encode() for part in (tenant, run_id, attempt_token))
    return _VERSION + b"\n" + head + b"\n" + body


class Callbacks:
    def __init__(self, runtime: Runtime, server_secret: str | None) -> None:
        self.runtime = runtime
        self.server_secret = server_secret

    def routes(self) -> list[BaseRoute]:
        return [Route(CALLBACK_PATH, self.complete, methods=["POST"])]

    async def complete(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        tenant = request.headers.get(TENANT_HEADER, "")
        attempt = request.headers.get(ATTEMPT_HEADER, "")
        try:
            body = await read_body(request, MAX_CALLBACK_BYTES)
        except BodyTooLarge:
            record_callback_refusal("TOO_LARGE")
            return too_large()
        secret = await self._secret_for(run_id, tenant) if tenant and attempt else None
        message = canonical_message(tenant, run_id, attempt, body)
        signed = verify(secret or _NO_SECRET, message, request.headers.get(SIGNATURE_HEADER))
        if secret is None or not signed:
            record_callback_refusal("UNAUTHENTICATED")
            return not_found()
        try:
            result = ExecutionResult.model_validate_json(body)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error.get("loc", ())) or "body"
            record_callback_refusal(Code.INPUT_VALIDATION_FAILED)
            return answer(
                Code.INPUT_VALIDATION_FAILED,
                f"the body must be an ExecutionResult ({where}: {error.get('msg', 'invalid')})",
            )
        completion = await self.runtime.complete(run_id, attempt, result, tenant_id=tenant)
        if completion.code == Code.ACTION_RUN_NOT_FOUND:
            record_callback_refusal(Code.ACTION_RUN_NOT_FOUND)
            return not_found()
        outcome = completion.outcome
        if not completion.accepted:
            # A finished run answers its stored code, which its executor chose: the refusal's
            # reason is that the run was already final.
            final = outcome is not None
            record_callback_refusal(Code.ACTION_RUN_ALREADY_TERMINAL if final else completion.code)
        return answer(
            completion.code,
            outcome.message if outcome is not None else "",
            200 if completion.accepted or outcome is not None else None,
            accepted=completion.accepted,
            outcome=outcome.model_dump(mode="json") if outcome is not None else None,
        )

    async def _secret_for(self, run_id: str, tenant: str) -> str | None:
        """The secret that authenticates callbacks for this run, looked up in the claimed tenant."""
        run = await self.runtime.get_run(run_id, tenant)
        if run is None:
            return None
        action = self.runtime.action(run.action_id)
        own = action.definition.callback_secret if action is not None else None
        if own is None and self.server_secret is None:
            log.warning("callback for %s refused: no callback secret is configured", run_id)
        return own or self.server_secret
