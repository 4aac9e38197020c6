"""Approvals in Slack, against a loopback fake of Slack's Web API and signed interaction payloads."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from signoff import Code, Principal
from signoff.core.identity import Channel
from signoff.core.run import RunStatus
from signoff.surfaces.web.slack import SlackApprover, SlackConfig
from signoff.surfaces.web.slack.config import parse_users
from signoff.surfaces.web.slack.messages import APPROVE_ACTION, REJECT_ACTION
from tests.helpers import LEAD, status_of
from tests.surfaces.support import DEADLINE, running
from tests.web.support import BASE_URL, Site, api_decide, bearer, site_for_tests, web_config

SIGNING_SECRET = "slack-signing-secret-for-the-tests"
BOT_TOKEN = "xoxb-test-bot-token-0123456789"
LEAD_SLACK = "U0LEAD"
PROPOSER_SLACK = "U0AGENT"
NOBODY_SLACK = "U0NOBODY"


@dataclass
class FakeSlack:
    """Slack's Web API as far as signoff uses it: records every call, answers ``ok``."""

    calls: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    ts: int = 0

    async def method(self, request: Request) -> JSONResponse:
        body = await request.json()
        name = request.path_params["method"]
        async with self.changed:
            self.calls.append((name, body, request.headers.get("authorization", "")))
            self.changed.notify_all()
        if name == "chat.postMessage":
            self.ts += 1
            return JSONResponse({"ok": True, "channel": "C0APPROVALS", "ts": f"1700.{self.ts:04d}"})
        return JSONResponse({"ok": True})

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/api/{method}", self.method, methods=["POST"])])

    def named(self, name: str) -> list[dict[str, Any]]:
        return [body for called, body, _auth in self.calls if called == name]

    async def wait_for(self, name: str, count: int = 1) -> list[dict[str, Any]]:
        async def enough() -> None:
            async with self.changed:
                await self.changed.wait_for(lambda: len(self.named(name)) >= count)

        await asyncio.wait_for(enough(), DEADLINE)
        return self.named(name)


@asynccontextmanager
async def slack_site() -> AsyncIterator[tuple[Site, FakeSlack]]:
    fake = FakeSlack()
    async with running(fake.app()) as url:
        config = SlackConfig(
            bot_token=BOT_TOKEN,
            signing_secret=SIGNING_SECRET,
            channel="C0APPROVALS",
            users={
                LEAD_SLACK: SlackApprover("lead-1", "acme", ("billing-lead",)),
                PROPOSER_SLACK: SlackApprover("agent-1", "acme", ("billing-lead",)),
            },
            api_url=f"{url}/api",
        )
        async with site_for_tests(config=web_config(slack=config)) as site:
            yield site, fake


def press(
    run_id: str,
    action_id: str = APPROVE_ACTION,
    user: str = LEAD_SLACK,
    *,
    ts: str = "1700.0001",
    version: int = 1,
) -> bytes:
    """A button press on the message of ``run_id`` as it was at ``version`` (1: as proposed)."""
    payload = {
        "type": "block_actions",
        "user": {"id": user, "name": "someone"},
        "container": {"type": "message", "channel_id": "C0APPROVALS", "message_ts": ts},
        "channel": {"id": "C0APPROVALS"},
        "actions": [{"action_id": action_id, "value": f"{run_id}@{version}", "type": "button"}],
        "response_url": "http://169.254.169.254/never-called",
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


def signed(body: bytes, *, secret: str = SIGNING_SECRET, at: int | None = None) -> dict[str, str]:
    timestamp = str(int(time.time()) if at is None else at)
    digest = hmac.new(secret.encode(), f"v0:{timestamp}:".encode() + body, hashlib.sha256)
    return {
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": f"v0={digest.hexdigest()}",
        "Content-Type": "application/x-www-form-urlencoded",
    }


async def send(site: Site, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return await site.client().post("/api/slack/interactions", content=body, headers=headers)


async def settled(site: Site, run_id: str, status: RunStatus) -> None:
    async def reached() -> None:
        while await status_of(site.runtime, run_id) is not status:
            await site.runtime.wait(run_id, "acme", 1.0)

    await asyncio.wait_for(reached(), DEADLINE)


async def test_an_approval_request_posts_a_block_kit_message_with_both_buttons() -> None:
    async with slack_site() as (site, fake):
        pending = await site.propose(
            {"invoice_id": "INV-2", "amount": 5000, "reason": "<!channel> secret note"}
        )
        (posted,) = await fake.wait_for("chat.postMessage")
    assert fake.calls[0][2] == f"Bearer {BOT_TOKEN}"
    assert posted["channel"] == "C0APPROVALS"
    text = json.dumps(posted["blocks"])
    buttons = [
        element
        for block in posted["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
    ]
    assert {b.get("action_id") for b in buttons} >= {APPROVE_ACTION, REJECT_ACTION}
    assert all(b.get("value") in (f"{pending.run_id}@1", None) for b in buttons)
    assert "Why:" in text and "billing-lead" in text
    assert "INV-2" in text and "5000" in text
    assert "secret note" not in text and "<!channel>" not in text  # reason is sensitive
    assert f"{BASE_URL}/approvals/runs/{pending.run_id}" in text


async def test_agent_text_in_the_message_can_never_become_a_mention_or_a_link() -> None:
    sneaky = Principal(id="<!channel> <http://evil.example|click>", roles=("billing",))
    async with slack_site() as (site, fake):
        await site.propose(action="invoice.review", principal=sneaky)
        (posted,) = await fake.wait_for("chat.postMessage")
    body = json.dumps(posted["blocks"])
    assert "<!channel>" not in body and "<http://evil" not in body
    assert "&lt;!channel&gt;" in body


async def test_a_signed_approve_press_decides_through_the_runtime_and_updates_the_message() -> None:
    async with slack_site() as (site, fake):
        pending = await site.propose()
        await fake.wait_for("chat.postMessage")
        body = press(pending.run_id)
        answered = await send(site, body, signed(body))
        assert answered.status_code == 200
        await settled(site, pending.run_id, RunStatus.SUCCEEDED)
        (update,) = await fake.wait_for("chat.update")
        run = await site.runtime.get_run(pending.run_id, "acme")
    assert run is not None and run.approval is not None
    (decision,) = run.approval.decisions
    assert decision.approver_id == "lead-1"
    assert decision.channel is Channel.SLACK and decision.via == f"slack:{LEAD_SLACK}"
    assert site.recorder.count == 1
    assert update["ts"] == "1700.0001" and update["channel"] == "C0APPROVALS"
    assert "SUCCEEDED" in json.dumps(update["blocks"])
    assert not any(b["type"] == "actions" for b in update["blocks"])  # no more buttons


async def test_a_reject_press_rejects() -> None:
    async with slack_site() as (site, _fake):
        pending = await site.propose()
        body = press(pending.run_id, REJECT_ACTION)
        assert (await send(site, body, signed(body))).status_code == 200
        await settled(site, pending.run_id, RunStatus.DENIED)
        outcome = await site.runtime.get(pending.run_id, "acme")
    assert outcome is not None and outcome.code == Code.APPROVAL_REJECTED
    assert site.recorder.count == 0


@pytest.mark.parametrize(
    "headers",
    [
        lambda body: signed(body, secret="not-the-signing-secret"),
        lambda body: signed(body, at=int(time.time()) - 6 * 60),  # stale: over five minutes
        lambda body: signed(body, at=int(time.time()) + 6 * 60),
        lambda body: {"Content-Type": "application/x-www-form-urlencoded"},
        lambda body: {**signed(body), "X-Slack-Request-Timestamp": "soon"},
        lambda body: {**signed(body), "X-Slack-Signature": "v0=" + "0" * 64},
    ],
    ids=["forged", "stale", "future", "unsigned", "bad-timestamp", "wrong-signature"],
)
async def test_an_unverified_press_is_refused_and_decides_nothing(headers: Any) -> None:
    async with slack_site() as (site, _fake):
        pending = await site.propose()
        body = press(pending.run_id)
        answered = await send(site, body, headers(body))
        run = await site.runtime.get_run(pending.run_id, "acme")
    assert answered.status_code == 401
    assert answered.json()["code"] == Code.UNAUTHENTICATED
    assert run is not None and run.status is RunStatus.WAITING_APPROVAL
    assert run.approval is not None and run.approval.decisions == ()


async def test_a_replayed_press_is_refused_and_counted_once() -> None:
    async with slack_site() as (site, _fake):
        pending = await site.propose(action="invoice.review")  # needs two leads
        body = press(pending.run_id)
        headers = signed(body)
        first = await send(site, body, headers)
        again = await send(site, body, headers)
        assert first.status_code == 200
        assert again.status_code == 409 and again.json()["code"] == "SLACK_REQUEST_REPLAYED"
        await site.runtime.drain()
        run = await site.runtime.get_run(pending.run_id, "acme")
    assert run is not None and run.approval is not None
    assert [d.approver_id for d in run.approval.decisions] == ["lead-1"]


async def test_an_unmapped_slack_user_is_told_and_decides_nothing() -> None:
    async with slack_site() as (site, fake):
        pending = await site.propose()
        body = press(pending.run_id, user=NOBODY_SLACK)
        assert (await send(site, body, signed(body))).status_code == 200
        (told,) = await fake.wait_for("chat.postEphemeral")
        run = await site.runtime.get_run(pending.run_id, "acme")
    assert told["user"] == NOBODY_SLACK and "not linked" in told["text"]
    assert run is not None and run.approval is not None and run.approval.decisions == ()


async def test_a_mapped_user_the_runtime_refuses_is_told_why_and_decides_nothing() -> None:
    async with slack_site() as (site, fake):
        pending = await site.propose()  # proposed by agent-1, whom PROPOSER_SLACK maps to
        body = press(pending.run_id, user=PROPOSER_SLACK)
        assert (await send(site, body, signed(body))).status_code == 200
        (told,) = await fake.wait_for("chat.postEphemeral")
        run = await site.runtime.get_run(pending.run_id, "acme")
    assert "may not decide" in told["text"]
    assert run is not None and run.status is RunStatus.WAITING_APPROVAL


async def test_a_decision_made_in_the_api_updates_the_slack_message_too() -> None:
    async with slack_site() as (site, fake):
        pending = await site.propose()
        await fake.wait_for("chat.postMessage")
        approved = await api_decide(
            site, site.client(bearer()), pending.run_id, json={"reason": "ok"}
        )
        assert approved.status_code == 200
        (update,) = await fake.wait_for("chat.update")
    assert update["ts"] == "1700.0001"
    assert LEAD.id in json.dumps(update["blocks"])


@pytest.mark.parametrize(
    "users",
    [
        '{"U1": {"id": "a", "tenant": "t"}}',
        '{"U1": {"id": "a", "tenant": "t", "roles": 5}}',
        "[]",
        "{",
    ],
)
def test_a_malformed_user_mapping_is_a_configuration_error(users: str) -> None:
    from signoff.surfaces.web.slack import SlackConfigError

    with pytest.raises(SlackConfigError):
        parse_users(users)


def test_the_slack_secrets_never_show_in_repr() -> None:
    config = SlackConfig(bot_token=BOT_TOKEN, signing_secret=SIGNING_SECRET, channel="C1")
    assert BOT_TOKEN not in repr(config) and SIGNING_SECRET not in repr(config)
