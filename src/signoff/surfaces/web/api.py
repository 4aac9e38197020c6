"""The approvers' JSON API: bearer JWT in, stable codes out.

``GET /api/approvals`` · ``GET /api/runs/{id}`` · ``GET /api/runs/{id}/receipt`` (a finished
run's receipt, ``receipts.py``) · ``POST /api/runs/{id}/approve`` ·
``POST /api/runs/{id}/reject`` (body ``{"expected_version": N, "reason": "..."}``: the version is
required, the run version the approver was shown — a missing one answers 400
``APPROVAL_VERSION_REQUIRED``, a stale one 409 ``APPROVAL_RUN_CHANGED`` with the current version
and the fresh view, nothing recorded) ·
``POST /api/runs/{id}/redispatch`` (body ``{"reason": "..."}``, required: an operator's
re-dispatch of a MANUAL_REVIEW run of an idempotent executor, ``Runtime.redispatch``). Every decision goes through
``Runtime.decide``; a run of another tenant answers exactly like one that does not exist. Every
route needs an approver's token (approve scope, no propose scope): 401 without a valid token, 403
``INSUFFICIENT_SCOPE`` for an agent's. ``{id}`` is a whole run id or a start (6-12 characters) of
its random tail (``core.short_ids``), resolved among the runs the caller may see: none answers 404
``ACTION_RUN_NOT_FOUND``, several 409 ``RUN_ID_AMBIGUOUS`` with their ids.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from signoff.audit.receipt import ReceiptRefused
from signoff.core.approvals import DecisionRequest
from signoff.core.codes import CODE_DESCRIPTIONS, Code
from signoff.core.identity import Channel
from signoff.core.limits import usage_record
from signoff.core.repair import REFUSALS as REPAIR_REFUSALS
from signoff.core.run import MAX_REASON_CHARS, ActionRun, ApprovalVote
from signoff.core.runtime import RepairRequest, Runtime
from signoff.core.short_ids import RUN_ID_AMBIGUOUS
from signoff.core.visibility import ReaderKind
from signoff.surfaces.access.scopes import ScopeRefusal
from signoff.surfaces.web.auth import Authenticator, Verified
from signoff.surfaces.web.http import (
    BodyTooLarge,
    answer,
    insufficient_scope,
    not_found,
    read_body,
    too_large,
    unauthenticated,
)
from signoff.surfaces.web.receipts import Receipts, download_name, no_receipts
from signoff.surfaces.web.run_json import run_json
from signoff.surfaces.web.views import describe, pending_page

MAX_LIST = 500
APPROVAL_VERSION_REQUIRED = "APPROVAL_VERSION_REQUIRED"
"""A decision without ``expected_version``: the API never decides on a view it cannot name."""


class DecisionBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: str = Field(default="", max_length=MAX_REASON_CHARS)
    amend: dict[str, Any] | None = Field(
        default=None,
        description="approve only: new values for fields the action lets approvers amend",
    )
    expected_version: int | None = Field(
        default=None,
        ge=1,
        description="required: the run version the approver was shown (``version`` of GET the "
        "run); a decision on another version is refused APPROVAL_RUN_CHANGED",
    )


class RedispatchBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: str = Field(min_length=1, max_length=MAX_REASON_CHARS)


class ApprovalsApi:
    def __init__(
        self, runtime: Runtime, auth: Authenticator, receipts: Receipts | None = None
    ) -> None:
        self.runtime = runtime
        self.auth = auth
        self.receipts = receipts

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/api/approvals", self.list_pending, methods=["GET"]),
            Route("/api/runs/{run_id}", self.show, methods=["GET"]),
            Route("/api/runs/{run_id}/receipt", self.receipt, methods=["GET"]),
            Route("/api/runs/{run_id}/approve", self.approve, methods=["POST"]),
            Route("/api/runs/{run_id}/reject", self.reject, methods=["POST"]),
            Route("/api/runs/{run_id}/redispatch", self.redispatch, methods=["POST"]),
            Route("/api/limits/{action_id}", self.limits, methods=["GET"]),
        ]

    async def limits(self, request: Request) -> Response:
        """The current usage of an action's cumulative limits in the caller's tenant, for the
        subject named by ``?principal=`` / ``?resource=`` (tenant limits need neither)."""
        verified = await self.auth.from_request(request)
        if not isinstance(verified, Verified):
            return _refused(verified)
        usage = await self.runtime.limit_usage(
            request.path_params["action_id"],
            verified.caller.tenant_id,
            principal_id=request.query_params.get("principal"),
            resource=request.query_params.get("resource"),
        )
        if usage is None:
            return answer(Code.ACTION_NOT_REGISTERED, "No such action.", 404)
        return JSONResponse(
            {"limits": [usage_record(u) for u in usage]}, headers={"Cache-Control": "no-store"}
        )

    async def list_pending(self, request: Request) -> Response:
        verified = await self.auth.from_request(request)
        if not isinstance(verified, Verified):
            return _refused(verified)
        try:
            limit = min(max(int(request.query_params.get("limit", "100")), 1), MAX_LIST)
        except ValueError:
            return answer(Code.INPUT_VALIDATION_FAILED, "limit must be an integer.")
        after = request.query_params.get("after") or None
        if after is not None and (len(after) > 64 or not after.isprintable()):
            return answer(Code.INPUT_VALIDATION_FAILED, "after must be a run id.")
        caller = verified.caller
        page = await pending_page(self.runtime, caller.tenant_id, caller, limit, after)
        return JSONResponse(
            {
                "approvals": [run_json(self.runtime, run, caller) for run in page.runs],
                "next_after": page.next_after,
            },
            headers={"Cache-Control": "no-store"},
        )

    async def show(self, request: Request) -> Response:
        verified = await self.auth.from_request(request)
        if not isinstance(verified, Verified):
            return _refused(verified)
        caller = verified.caller
        run_id = await resolved_id(self.runtime, request.path_params["run_id"], verified)
        if not isinstance(run_id, str):
            return run_id
        run = await self.runtime.get_run(
            run_id, caller.tenant_id, reader=caller.reader(ReaderKind.APPROVER)
        )
        if run is None:
            return not_found()
        return JSONResponse(
            run_json(self.runtime, run, caller), headers={"Cache-Control": "no-store"}
        )

    async def receipt(self, request: Request) -> Response:
        """The run's receipt (``docs/receipts.md``), read as ``show`` reads the run."""
        verified = await self.auth.from_request(request)
        if not isinstance(verified, Verified):
            return _refused(verified)
        caller = verified.caller
        run_id = await resolved_id(self.runtime, request.path_params["run_id"], verified)
        if not isinstance(run_id, str):
            return run_id
        run = await self.runtime.get_run(
            run_id, caller.tenant_id, reader=caller.reader(ReaderKind.APPROVER)
        )
        if run is None:
            return not_found()
        return await receipt_answer(self.runtime, self.receipts, run)

    async def approve(self, request: Request) -> Response:
        return await self._decide(request, ApprovalVote.APPROVE)

    async def reject(self, request: Request) -> Response:
        return await self._decide(request, ApprovalVote.REJECT)

    async def redispatch(self, request: Request) -> Response:
        verified = await self.auth.from_request(request)
        if not isinstance(verified, Verified):
            return _refused(verified)
        try:
            raw = await read_body(request)
        except BodyTooLarge:
            return too_large()
        try:
            body = RedispatchBody.model_validate_json(raw or b"{}")
        except ValidationError as exc:
            return answer(Code.INPUT_VALIDATION_FAILED, _first_error(exc))
        run_id = await resolved_id(self.runtime, request.path_params["run_id"], verified)
        if not isinstance(run_id, str):
            return run_id
        return await redispatch_answer(self.runtime, run_id, verified, body.reason)

    async def _decide(self, request: Request, vote: ApprovalVote) -> Response:
        verified = await self.auth.from_request(request)
        if not isinstance(verified, Verified):
            return _refused(verified)
        try:
            raw = await read_body(request)
        except BodyTooLarge:
            return too_large()
        try:
            body = DecisionBody.model_validate_json(raw) if raw.strip() else DecisionBody()
        except ValidationError as exc:
            return answer(Code.INPUT_VALIDATION_FAILED, _first_error(exc))
        run_id = await resolved_id(self.runtime, request.path_params["run_id"], verified)
        if not isinstance(run_id, str):
            return run_id
        if body.expected_version is None:  # (after the id: an invisible run stays a missing one)
            return answer(
                APPROVAL_VERSION_REQUIRED,
                "Name the run version you were shown: expected_version (the run's version in "
                "GET /api/runs/{id}). Nothing was recorded.",
                400,
            )
        return await self._decision(
            run_id, verified, vote, body.reason, body.amend, body.expected_version
        )

    async def _decision(
        self,
        run_id: str,
        verified: Verified,
        vote: ApprovalVote,
        reason: str,
        amend: dict[str, Any] | None,
        expected_version: int,
    ) -> Response:
        caller = verified.caller
        result = await self.runtime.decide(
            run_id,
            caller.tenant_id,
            DecisionRequest(
                approver=caller.principal,
                vote=vote,
                reason=reason,
                channel=Channel.API,
                via=verified.client_id,
                amendments=amend,
                expected_version=expected_version,
            ),
            reader=caller.reader(ReaderKind.APPROVER),
        )
        if result.code == Code.ACTION_RUN_NOT_FOUND:
            return not_found()
        outcome = result.outcome.model_dump(mode="json") if result.outcome is not None else None
        message = describe(result.code) or (result.outcome.message if result.outcome else "")
        status = 200 if result.accepted else None
        if result.code == Code.APPROVAL_RUN_CHANGED:
            # The fresh view, so the approver decides again on what will run now.
            fresh = await self.runtime.get_run(
                run_id, caller.tenant_id, reader=caller.reader(ReaderKind.APPROVER)
            )
            if fresh is None:
                return not_found()
            return answer(
                result.code,
                message,
                status,
                accepted=False,
                outcome=outcome,
                current_version=fresh.version,
                run=run_json(self.runtime, fresh, caller),
            )
        return answer(result.code, message, status, accepted=result.accepted, outcome=outcome)


async def resolved_id(runtime: Runtime, given: str, verified: Verified) -> str | Response:
    """The whole id ``given`` names among the runs the caller may see, or the answer to send."""
    caller = verified.caller
    match = await runtime.resolve_id(
        given, caller.tenant_id, reader=caller.reader(ReaderKind.APPROVER)
    )
    if match.run_id is not None:
        return match.run_id
    if match.candidates:
        return answer(
            RUN_ID_AMBIGUOUS,
            "Several runs you may see have a short id starting like this; give more of it.",
            409,
            candidates=list(match.candidates),
        )
    return not_found()


async def redispatch_answer(
    runtime: Runtime, run_id: str, verified: Verified, reason: str
) -> Response:
    """Re-dispatch as the verified operator: a refusal keeps the run (its code says why); a
    re-dispatch answers the new run's outcome."""
    caller = verified.caller
    outcome = await runtime.redispatch(
        run_id,
        caller.tenant_id,
        RepairRequest(caller.principal, reason, channel=Channel.API, via=verified.client_id),
    )
    if outcome.code == Code.ACTION_RUN_NOT_FOUND:
        return not_found()
    if outcome.code in REPAIR_REFUSALS or outcome.run_id == run_id:  # refused: nothing ran
        return answer(outcome.code, outcome.message, redispatched=False)
    return answer(
        outcome.code,
        outcome.message,
        200,
        redispatched=True,
        outcome=outcome.model_dump(mode="json"),
    )


async def receipt_answer(runtime: Runtime, receipts: Receipts | None, run: ActionRun) -> Response:
    """A visible run's receipt as a download, or the refusal's code with its catalog text."""
    made = await receipts.of(runtime, run) if receipts is not None else no_receipts()
    if isinstance(made, ReceiptRefused):
        if made.code == Code.ACTION_RUN_NOT_FOUND:
            return not_found()
        return answer(made.code, CODE_DESCRIPTIONS[made.code])
    return JSONResponse(
        made,
        headers={
            "Cache-Control": "no-store",
            "Content-Disposition": f'attachment; filename="{download_name(run.run_id)}"',
        },
    )


def _refused(refusal: ScopeRefusal | None) -> Response:
    return unauthenticated() if refusal is None else insufficient_scope(refusal)


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error.get("loc", ())) or "body"
    return f"{where}: {error.get('msg', 'invalid')}"
