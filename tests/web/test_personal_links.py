"""Personal links stay personal (contract §12): each approver's link goes to that approver's own
channel; a directory that sends several approvers' links of an action needing two or more
approvals to one receiver is refused at start unless allowed; with single sign-on, redeeming a
link needs its own approver signed in."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from signoff.core.run import RunStatus
from signoff.surfaces.web import WebhookConfig
from signoff.surfaces.web.links import (
    LINK_SIGN_IN_REQUIRED,
    LINK_WRONG_APPROVER,
    SHARED_LINK_RECEIVER,
    DirectoryEntry,
    SharedLinkReceiver,
)
from signoff.surfaces.web.signing import verify
from signoff.surfaces.web.surface import WebNotifications
from tests.helpers import stored_run
from tests.surfaces.support import DEADLINE, running
from tests.web.oidc_provider import Provider, oidc_provider
from tests.web.support import Site, site_for_tests, web_config
from tests.web.test_links import code_in, decide, links_of, path_of
from tests.web.test_sso import sign_in_as, sso_site

SECRET = "webhook-secret-for-the-tests-0123456789"
ROLES = ("billing-lead",)


def directory(**channels: dict[str, str]) -> dict[str, DirectoryEntry]:
    return {who: DirectoryEntry(who, "acme", ROLES, **channel) for who, channel in channels.items()}


def notifications(approvers: dict[str, DirectoryEntry], **config: Any) -> WebNotifications:
    webhook = WebhookConfig(secret=SECRET, url="https://hooks.example/all")
    return WebNotifications(
        web_config(webhook=webhook, approvers=approvers, link_secret=SECRET, **config)
    )


async def test_two_approvers_links_to_the_shared_webhook_are_refused_at_start(site: Site) -> None:
    shared = notifications(directory(**{"lead-1": {}, "lead-2": {}}))
    with pytest.raises(SharedLinkReceiver) as refused:
        shared.check_receivers(site.runtime)
    assert refused.value.code == SHARED_LINK_RECEIVER
    assert "invoice.review" in str(refused.value) and "lead-1, lead-2" in str(refused.value)
    # One personal receiver that both approvers' links go to is just as shared.
    same = {"webhook": "https://hooks.example/team"}
    with pytest.raises(SharedLinkReceiver):
        notifications(directory(**{"lead-1": same, "lead-2": same})).check_receivers(site.runtime)
    with pytest.raises(SharedLinkReceiver):
        slack_dm = {"slack": "U0SAME"}
        approvers = directory(**{"lead-1": slack_dm, "lead-2": slack_dm})
        # (Slack configured is checked by WebConfig; the receiver rule holds on its own.)
        WebNotifications(web_config(approvers=approvers, slack=_slack())).check_receivers(
            site.runtime
        )


def _slack() -> Any:
    from signoff.surfaces.web.slack.config import SlackConfig

    return SlackConfig(bot_token="xoxb-test", signing_secret="s" * 32, channel="C0")


async def test_own_channels_or_an_explicit_opt_in_start(site: Site) -> None:
    own = directory(
        **{
            "lead-1": {"webhook": "https://hooks.example/lead-1"},
            "lead-2": {"webhook": "https://hooks.example/lead-2"},
        }
    )
    assert notifications(own).check_receivers(site.runtime) == []
    shared = notifications(directory(**{"lead-1": {}, "lead-2": {}}), shared_link_receiver=True)
    allowed = shared.check_receivers(site.runtime)
    assert allowed and all("lead-1, lead-2" in problem for problem in allowed)


@asynccontextmanager
async def receiver() -> AsyncIterator[
    tuple[str, list[tuple[str, dict[str, Any]]], asyncio.Condition]
]:
    """A webhook receiver recording every delivery by path (``arrived`` notified on each)."""
    got: list[tuple[str, dict[str, Any]]] = []
    arrived = asyncio.Condition()

    async def hook(request: Request) -> Response:
        body = await request.body()
        assert verify(SECRET, body, request.headers.get("x-signoff-signature"))
        async with arrived:
            got.append((request.url.path, json.loads(body)))
            arrived.notify_all()
        return Response(status_code=204)

    app = Starlette(routes=[Route("/{who}", hook, methods=["POST"])])
    async with running(app) as url:
        yield url, got, arrived


async def test_each_approvers_link_reaches_only_their_own_webhook() -> None:
    async with receiver() as (url, got, arrived):
        approvers = directory(
            **{"lead-1": {"webhook": f"{url}/lead-1"}, "lead-2": {"webhook": f"{url}/lead-2"}}
        )
        webhook = WebhookConfig(secret=SECRET, url=f"{url}/shared")
        config = web_config(webhook=webhook, approvers=approvers, link_secret=SECRET)
        async with site_for_tests(config=config) as site:
            await site.propose(action="invoice.review")

            async def three() -> None:
                async with arrived:
                    await arrived.wait_for(lambda: len(got) >= 3)

            await asyncio.wait_for(three(), DEADLINE)
    by_path = {path: body for path, body in got}
    assert set(by_path) == {"/shared", "/lead-1", "/lead-2"}
    assert by_path["/shared"]["links"]["approvers"] == []  # no personal link in the shared one
    for who in ("lead-1", "lead-2"):
        assert by_path[f"/{who}"]["event"] == "approval.link"
        assert by_path[f"/{who}"]["link"]["approver_id"] == who


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider() as running_provider:
        yield running_provider


async def test_with_sso_a_link_decides_only_for_its_own_approver_signed_in(
    provider: Provider,
) -> None:
    async with sso_site(provider) as site:
        pending = await site.propose()
        run = await stored_run(site.store, pending.run_id)
        theirs = await links_of(site).issue(run, DirectoryEntry("lead-2", "acme", ROLES))
        mine = await links_of(site).issue(run, DirectoryEntry("fin-lead", "acme", ROLES))
        anonymous = await decide(site, mine)
        assert anonymous.status_code == 401 and code_in(anonymous) == LINK_SIGN_IN_REQUIRED
        await sign_in_as(site, "fin-lead")
        browser = site.clients[-1]  # the client the sign-in walked with holds the session
        page = await browser.get(path_of(theirs))
        version = page.text.split('name="version" value="', 1)[1].split('"', 1)[0]
        form = {"decision": "approve", "version": version}
        wrong = await browser.post(path_of(theirs), data=form)
        assert wrong.status_code == 403 and code_in(wrong) == LINK_WRONG_APPROVER
        still = await stored_run(site.store, pending.run_id)
        assert still.status is RunStatus.WAITING_APPROVAL and site.recorder.count == 0
        assert still.approval is not None and still.approval.decisions == ()
        done = await browser.post(path_of(mine), data=form)
    assert done.status_code == 200, done.text
    assert (await stored_run(site.store, pending.run_id)).status is RunStatus.SUCCEEDED


def test_signoff_serve_refuses_a_shared_receiver_at_start_with_its_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from signoff.cli import app
    from tests.cli.test_bound_decisions import two_lead_manifests

    monkeypatch.setenv("SIGNOFF_DEMO_INVOICES_DB", str(tmp_path / "invoices.db"))
    manifests = two_lead_manifests(tmp_path)
    env = {
        "SIGNOFF_JWT_SECRET": "a-test-secret-that-is-long-enough-for-hs256",
        "SIGNOFF_WEBHOOK_URL": "https://hooks.example/all",
        "SIGNOFF_WEBHOOK_SECRET": SECRET,
        "SIGNOFF_APPROVERS": json.dumps(
            {who: {"tenant": "acme", "roles": list(ROLES)} for who in ("lead-1", "lead-2")}
        ),
    }
    args = ["serve", "--transport", "http", "--database", "memory://", "--manifests"]
    result = CliRunner().invoke(app, [*args, str(manifests), "--port", "0"], env=env)
    assert result.exit_code == 2, result.output
    assert result.stderr.rstrip().endswith(f"[{SHARED_LINK_RECEIVER}]")
    assert "invoice.send_reminder" in result.stderr and "lead-1, lead-2" in result.stderr
