"""Approval webhooks: signed bodies on request and decision; a failing receiver harms nothing."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from signoff import Code, ExecutionStatus
from signoff.surfaces.web import WebhookConfig
from tests.helpers import LEAD, approve
from tests.surfaces.support import DEADLINE, free_socket, running
from tests.web.support import BASE_URL, site_for_tests, web_config

WEBHOOK_SECRET = "webhook-secret-for-the-tests-0123456789"


@dataclass
class Receiver:
    """A loopback webhook receiver answering ``status``; ``hold`` keeps it from answering."""

    status: int = 204
    hold: asyncio.Event | None = None
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def endpoint(self, request: Request) -> Response:
        self.received.append((dict(request.headers), await request.body()))
        self.arrived.set()
        if self.hold is not None:
            await self.hold.wait()
        return Response(status_code=self.status)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/hook", self.endpoint, methods=["POST"])])

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _headers, body in self.received]


@asynccontextmanager
async def receiving(receiver: Receiver) -> AsyncIterator[str]:
    async with running(receiver.app()) as url:
        yield url + "/hook"


def hook(url: str, **overrides: Any) -> WebhookConfig:
    fields: dict[str, Any] = {"secret": WEBHOOK_SECRET, "url": url, "backoff": 0.0}
    fields.update(overrides)
    return WebhookConfig(**fields)


async def test_requests_and_decisions_are_posted_with_an_hmac_of_the_body() -> None:
    receiver = Receiver()
    async with (
        receiving(receiver) as url,
        site_for_tests(config=web_config(webhook=hook(url))) as site,
    ):
        pending = await site.propose({"invoice_id": "INV-5", "amount": 4000, "reason": "Jane Doe"})
        await site.runtime.drain()
        await site.runtime.decide(pending.run_id, "acme", approve(LEAD))
        await site.runtime.drain()
    assert len(receiver.received) == 2
    for headers, body in receiver.received:
        expected = hmac.new(WEBHOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert headers["x-signoff-signature"] == f"sha256={expected}"
        assert headers["content-type"] == "application/json"
    requested, decided = receiver.bodies()
    # Inputs are masked as on the approvers' screens (executor output is the executor's business).
    assert "Jane Doe" not in json.dumps(requested)
    assert decided["run"]["input"]["reason"] == requested["run"]["input"]["reason"] != "Jane Doe"
    assert (requested["event"], requested["decision"]) == ("approval.requested", None)
    assert requested["run"]["status"] == "PENDING_APPROVAL"
    assert requested["run"]["tenant"] == "acme"
    assert requested["run"]["input"]["invoice_id"] == "INV-5"
    assert requested["links"]["inbox"] == f"{BASE_URL}/approvals/runs/{pending.run_id}"
    assert (decided["event"], decided["decision"]) == ("approval.decided", "approved")
    assert decided["run"]["outcome"]["code"] == Code.SUCCEEDED
    assert receiver.received[0][0]["x-signoff-event"] == "approval.requested"


async def test_a_per_action_webhook_takes_that_actions_events() -> None:
    everyone, reviewers = Receiver(), Receiver()
    async with receiving(everyone) as url, receiving(reviewers) as review_url:
        config = web_config(webhook=hook(url, routes={"invoice.review": review_url}))
        async with site_for_tests(config=config) as site:
            await site.propose(key="a")
            await site.propose(key="b", action="invoice.review")
            await site.runtime.drain()
    assert [b["run"]["action"] for b in everyone.bodies()] == ["invoice.cancel"]
    assert [b["run"]["action"] for b in reviewers.bodies()] == ["invoice.review"]


async def test_a_failing_webhook_never_blocks_or_loses_a_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    receiver = Receiver(status=500)
    async with receiving(receiver) as url:
        config = web_config(webhook=hook(url, attempts=2))
        async with site_for_tests(config=config) as site:
            pending = await site.propose()
            decision = await site.runtime.decide(pending.run_id, "acme", approve(LEAD))
            await site.runtime.drain()
            outcome = await site.runtime.get(pending.run_id, "acme")
    assert pending.status is ExecutionStatus.PENDING_APPROVAL
    assert decision.accepted and decision.code == Code.SUCCEEDED
    assert outcome is not None and outcome.code == Code.SUCCEEDED
    assert site.recorder.count == 1
    assert len(receiver.received) == 4  # two events, two attempts each
    warnings = [r for r in caplog.records if r.name == "signoff.webhook"]
    assert len(warnings) == 4 and all(r.levelno == logging.WARNING for r in warnings)


async def test_an_unreachable_webhook_never_blocks_or_loses_a_run() -> None:
    closed = free_socket()
    port = closed.getsockname()[1]
    closed.close()
    config = web_config(webhook=hook(f"http://127.0.0.1:{port}/hook", attempts=1))
    async with site_for_tests(config=config) as site:
        pending = await site.propose()
        decision = await site.runtime.decide(pending.run_id, "acme", approve(LEAD))
        await site.runtime.drain()
    assert decision.accepted and decision.code == Code.SUCCEEDED


async def test_a_hanging_webhook_does_not_hold_up_proposals_or_decisions() -> None:
    receiver = Receiver(hold=asyncio.Event())
    async with receiving(receiver) as url:
        config = web_config(webhook=hook(url, attempts=1, timeout=DEADLINE))
        async with site_for_tests(config=config) as site:
            pending = await site.propose()
            await asyncio.wait_for(receiver.arrived.wait(), DEADLINE)
            # The receiver has the request and is not answering; the runtime goes on regardless.
            decision = await site.runtime.decide(pending.run_id, "acme", approve(LEAD))
            assert decision.code == Code.SUCCEEDED
            assert receiver.hold is not None
            receiver.hold.set()
            await site.runtime.drain()


def test_a_web_surface_with_a_webhook_but_no_connected_notifier_is_refused() -> None:
    """The notifier is the application's (``build_application(notifier=...)``); the web surface
    can neither install one nor silently drop the configured one."""
    from signoff.core.registry import ActionRegistry
    from signoff.core.runtime import Runtime
    from signoff.store.memory import InMemoryStore
    from signoff.surfaces.web import build_web

    runtime = Runtime(ActionRegistry(), InMemoryStore())
    with pytest.raises(ValueError, match="WebNotifications"):
        build_web(runtime, web_config(webhook=hook("http://127.0.0.1:9/")), None)
