"""``POST /api/slack/interactions``: verified Approve/Reject presses become decisions."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from slack_sdk.signature import Clock as SlackClock
from slack_sdk.signature import SignatureVerifier
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from signoff.core.approvals import DecisionRequest
from signoff.core.codes import Code
from signoff.core.identity import Channel
from signoff.core.run import ApprovalVote
from signoff.core.runtime import Runtime
from signoff.surfaces.web.http import BodyTooLarge, read_body
from signoff.surfaces.web.slack.config import SlackConfig
from signoff.surfaces.web.slack.messages import (
    APPROVE_ACTION,
    REJECT_ACTION,
    VERSION_MARK,
    SlackApi,
    SlackNotifier,
)

log = logging.getLogger("signoff.slack")

REPLAY_WINDOW_SECONDS = 5 * 60
_RUN_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


class _Clock(SlackClock):
    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now

    def now(self) -> float:
        return self._now()


def _refusal(code: str, message: str, status: int) -> JSONResponse:
    return JSONResponse({"code": code, "message": message}, status_code=status)


class SlackInteractions:
    """``POST /api/slack/interactions``: verified button presses become decisions."""

    def __init__(
        self,
        runtime: Runtime,
        config: SlackConfig,
        api: SlackApi,
        notifier: SlackNotifier | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.runtime = runtime
        self.config = config
        self.api = api
        self.notifier = notifier
        self.clock = clock
        self.verifier = SignatureVerifier(config.signing_secret, clock=_Clock(clock))
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()

    def routes(self) -> list[BaseRoute]:
        return [Route("/api/slack/interactions", self.interaction, methods=["POST"])]

    def _verified(self, body: bytes, request: Request) -> str | None:
        """The request's signature when it is authentic and fresh, else ``None``."""
        timestamp = request.headers.get("x-slack-request-timestamp", "")
        signature = request.headers.get("x-slack-signature", "")
        if not timestamp.isdigit() or not signature.startswith("v0="):
            return None
        try:
            valid = self.verifier.is_valid(body=body, timestamp=timestamp, signature=signature)
        except (ValueError, UnicodeDecodeError):
            return None
        return signature if valid else None

    def _first_time(self, signature: str) -> bool:
        now = self.clock()
        while self._seen and next(iter(self._seen.values())) < now:
            self._seen.popitem(last=False)
        if signature in self._seen:
            return False
        self._seen[signature] = now + 2 * REPLAY_WINDOW_SECONDS
        return True

    async def interaction(self, request: Request) -> Response:
        try:
            body = await read_body(request)
        except BodyTooLarge:
            return _refusal(Code.INPUT_VALIDATION_FAILED, "The request body is too large.", 413)
        signature = self._verified(body, request)
        if signature is None:
            return _refusal(
                Code.UNAUTHENTICATED, "The Slack signature is missing, wrong or stale.", 401
            )
        if not self._first_time(signature):
            return _refusal(
                "SLACK_REQUEST_REPLAYED", "This Slack request was already handled.", 409
            )
        press = _button_press(body)
        if press is None:
            return _refusal(Code.INPUT_VALIDATION_FAILED, "Not a signoff button press.", 400)
        task = asyncio.get_running_loop().create_task(self._handle(press))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        # Slack wants an answer within 3 s; the decision (which may dispatch) carries on.
        return Response(status_code=200)

    async def _handle(self, press: _Press) -> None:
        approver = self.config.users.get(press.user_id)
        if approver is None:
            log.warning("slack user %s is not mapped to an approver", press.user_id)
            await self._tell(
                press, "Your Slack account is not linked to a signoff approver; ask an operator."
            )
            return
        if self.notifier is not None and press.channel and press.message_ts:
            self.notifier.remember(press.run_id, press.channel, press.message_ts)
        try:
            result = await self.runtime.decide(
                press.run_id,
                approver.tenant_id,
                DecisionRequest(
                    approver=approver.principal,
                    vote=press.vote,
                    reason=f"{'Approved' if press.vote is ApprovalVote.APPROVE else 'Rejected'} in Slack",
                    channel=Channel.SLACK,
                    via=f"slack:{press.user_id}",
                    expected_version=press.version,
                ),
            )
        except Exception:
            log.exception("slack decision on run %s failed", press.run_id)
            await self._tell(press, "signoff could not record that; try the inbox.")
            return
        if not result.accepted:
            await self._tell(press, _REFUSALS.get(result.code, f"Not recorded ({result.code})."))
        if result.code == Code.APPROVAL_RUN_CHANGED and self.notifier is not None:
            # The message showed another version: show the run as it stands, with fresh buttons.
            fresh = await self.runtime.get_run(press.run_id, approver.tenant_id)
            if fresh is not None:
                await self.notifier.refresh(fresh)

    async def _tell(self, press: _Press, text: str) -> None:
        """A message only the pressing user sees."""
        if press.channel:
            await self.api.call(
                "chat.postEphemeral",
                {"channel": press.channel, "user": press.user_id, "text": text},
            )

    async def drain(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


_REFUSALS: dict[str, str] = {
    Code.ACTION_RUN_NOT_FOUND: "That run does not exist in your tenant.",
    Code.APPROVER_NOT_ELIGIBLE: "You may not decide this run (no approver role for it, or you proposed it).",
    Code.APPROVAL_ALREADY_DECIDED: "You already decided this run; a decision counts once.",
    Code.APPROVAL_NOT_PENDING: "This run is no longer waiting for approval.",
    Code.APPROVAL_EXPIRED: "This approval expired.",
    Code.APPROVAL_RUN_CHANGED: "Not recorded: the run changed since this message was posted "
    "(the message now shows what will run). Read it and decide again.",
}


@dataclass(frozen=True, slots=True)
class _Press:
    user_id: str
    run_id: str
    vote: ApprovalVote
    channel: str | None
    message_ts: str | None
    version: int


def _button_press(body: bytes) -> _Press | None:
    """The one signoff button a ``block_actions`` payload reports, or ``None``."""
    try:
        form = parse_qs(body.decode("utf-8"), strict_parsing=True, max_num_fields=10)
        payload = json.loads(form["payload"][0])
    except (UnicodeDecodeError, ValueError, KeyError, IndexError):
        return None
    if not isinstance(payload, dict) or payload.get("type") != "block_actions":
        return None
    user = payload.get("user")
    actions = payload.get("actions")
    if not isinstance(user, dict) or not isinstance(actions, list) or len(actions) != 1:
        return None
    action = actions[0]
    user_id = user.get("id")
    if not isinstance(action, dict) or not isinstance(user_id, str) or not user_id:
        return None
    votes = {APPROVE_ACTION: ApprovalVote.APPROVE, REJECT_ACTION: ApprovalVote.REJECT}
    vote = votes.get(str(action.get("action_id")))
    value = action.get("value")
    if vote is None or not isinstance(value, str):
        return None
    # ``RUN_ID@VERSION``: a message's buttons carry the version it showed.
    run_id, mark, version = value.rpartition(VERSION_MARK)
    if not mark or not _RUN_ID.match(run_id) or not version.isdigit() or len(version) > 18:
        return None
    container = _mapping(payload.get("container"))
    channel = _mapping(payload.get("channel"))
    channel_id = container.get("channel_id") or channel.get("id")
    ts = container.get("message_ts")
    return _Press(
        user_id=user_id[:64],
        run_id=run_id,
        vote=vote,
        channel=channel_id if isinstance(channel_id, str) else None,
        message_ts=ts if isinstance(ts, str) else None,
        version=int(version),
    )


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
