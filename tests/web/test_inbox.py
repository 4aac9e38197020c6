"""The web inbox without a browser: sign-in, CSRF, tenants, masking, decisions, sign-out."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from signoff import Code, Principal, RunStatus
from signoff.core.identity import Channel
from signoff.surfaces.access.caller import Caller
from signoff.surfaces.web.session import Sessions
from tests.helpers import stored_run
from tests.web.support import SESSION_SECRET, Site, hidden, token

LEAD: dict[str, Any] = {"sub": "lead-1", "roles": ("billing-lead",)}


async def sign_in(
    http: httpx.AsyncClient, jwt: str, next_url: str = "/approvals"
) -> httpx.Response:
    form = await http.get("/approvals/sign-in")
    return await http.post(
        "/approvals/sign-in",
        data={"csrf": hidden(form.text, "csrf"), "token": jwt, "next": next_url},
    )


async def test_an_anonymous_visitor_is_sent_to_sign_in(site: Site) -> None:
    async with site.client() as http:
        response = await http.get("/approvals")
        detail = await http.get("/approvals/runs/some-run")
    assert response.status_code == 303
    assert response.headers["location"] == "/approvals/sign-in?next=%2Fapprovals"
    assert detail.headers["location"] == "/approvals/sign-in?next=%2Fapprovals%2Fruns%2Fsome-run"


async def test_signing_in_sets_an_http_only_same_site_session_cookie_and_lists_the_runs(
    site: Site,
) -> None:
    pending = await site.propose({"invoice_id": "INV-7", "amount": 4200, "reason": "Jane Doe"})
    async with site.client() as http:
        signed = await sign_in(http, token(**LEAD))
        inbox = await http.get("/approvals")
    assert signed.status_code == 303 and signed.headers["location"] == "/approvals"
    cookie = signed.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=lax" in cookie and "path=/approvals" in cookie
    assert inbox.status_code == 200
    page = inbox.text
    assert f'href="/approvals/runs/{pending.run_id}"' in page
    for shown in ("agent-1", "invoice/INV-7", "risk-high", "INV-7", "4200", "in 24 h", "0 s ago"):
        assert shown in page, shown
    assert "Jane Doe" not in page
    assert "Signed in as <strong>lead-1</strong>" in page


async def test_a_token_that_does_not_verify_gets_no_session(site: Site) -> None:
    async with site.client() as http:
        refused = await sign_in(http, "eyJhbGciOiJIUzI1NiJ9.e30.forged")
        inbox = await http.get("/approvals")
    assert refused.status_code == 401
    assert 'role="alert"' in refused.text
    assert inbox.status_code == 303


async def test_the_sign_in_form_itself_needs_its_csrf_token(site: Site) -> None:
    async with site.client() as http:
        await http.get("/approvals/sign-in")
        response = await http.post(
            "/approvals/sign-in", data={"csrf": "guess", "token": token(**LEAD)}
        )
        inbox = await http.get("/approvals")
    assert response.status_code == 403
    assert inbox.status_code == 303


async def test_an_approval_through_the_inbox_resumes_the_run_and_is_recorded_as_ui(
    site: Site,
) -> None:
    pending = await site.propose()
    async with site.client() as http:
        await sign_in(http, token(**LEAD))
        page = await http.get(f"/approvals/runs/{pending.run_id}")
        decided = await http.post(
            f"/approvals/runs/{pending.run_id}/decide",
            data={
                "csrf": hidden(page.text, "csrf"),
                "version": hidden(page.text, "version"),
                "decision": "approve",
                "reason": "checked",
            },
        )
        after = await http.get(decided.headers["location"])
    assert decided.status_code == 303
    assert decided.headers["location"].endswith("?decided=1")
    assert 'id="decision-result"' in after.text and "SUCCEEDED" in after.text
    outcome = await site.runtime.get(pending.run_id, "acme")
    assert outcome is not None and outcome.code == Code.SUCCEEDED
    run = await stored_run(site.store, pending.run_id)
    assert run is not None and run.approval is not None
    (decision,) = run.approval.decisions
    assert (decision.approver_id, decision.channel, decision.via, decision.reason) == (
        "lead-1",
        Channel.UI,
        "web-inbox",
        "checked",
    )


async def test_a_refused_decision_shows_its_code(site: Site) -> None:
    proposer = Principal(id="lead-1", roles=("billing-lead",))
    pending = await site.propose(principal=proposer)
    async with site.client() as http:
        await sign_in(http, token(**LEAD))
        page = await http.get(f"/approvals/runs/{pending.run_id}")
        assert "You proposed this run" in page.text
        decided = await http.post(
            f"/approvals/runs/{pending.run_id}/decide",
            data={"csrf": hidden(page.text, "csrf"), "version": "1", "decision": "approve"},
        )
    assert decided.status_code == 403
    assert Code.APPROVER_NOT_ELIGIBLE in decided.text and "Decision not recorded" in decided.text
    assert (await stored_run(site.store, pending.run_id)).status is RunStatus.WAITING_APPROVAL


@pytest.mark.parametrize("csrf", [None, "", "forged-token", "other-session"])
async def test_a_decision_without_the_sessions_csrf_token_is_refused(
    site: Site, csrf: str | None
) -> None:
    pending = await site.propose()
    async with site.client() as http, site.client() as other:
        await sign_in(http, token(**LEAD))
        await sign_in(other, token(**LEAD))
        theirs = hidden((await other.get("/approvals")).text, "csrf")
        data = {"decision": "approve", "reason": "csrf"}
        if csrf is not None:
            data["csrf"] = theirs if csrf == "other-session" else csrf
        response = await http.post(f"/approvals/runs/{pending.run_id}/decide", data=data)
    assert response.status_code == 403
    run = await stored_run(site.store, pending.run_id)
    assert run is not None and run.status is RunStatus.WAITING_APPROVAL
    assert run.approval is not None and run.approval.decisions == ()
    assert site.recorder.count == 0


async def test_a_json_or_multipart_post_is_refused_like_a_missing_csrf_token(site: Site) -> None:
    pending = await site.propose()
    async with site.client() as http:
        await sign_in(http, token(**LEAD))
        csrf = hidden((await http.get("/approvals")).text, "csrf")
        as_json = await http.post(
            f"/approvals/runs/{pending.run_id}/decide", json={"csrf": csrf, "decision": "approve"}
        )
    assert as_json.status_code == 403
    assert site.recorder.count == 0


async def test_an_approver_of_another_tenant_sees_and_decides_nothing(site: Site) -> None:
    acme = await site.propose()
    globex_lead = token(sub="lead-9", tenant="globex", roles=("billing-lead",))
    async with site.client() as http:
        await sign_in(http, globex_lead)
        inbox = await http.get("/approvals")
        detail = await http.get(f"/approvals/runs/{acme.run_id}")
        missing = await http.get("/approvals/runs/no-such-run")
        decided = await http.post(
            f"/approvals/runs/{acme.run_id}/decide",
            data={"csrf": hidden(inbox.text, "csrf"), "version": "1", "decision": "approve"},
        )
    assert acme.run_id not in inbox.text and "Nothing is waiting for you" in inbox.text
    assert detail.status_code == missing.status_code == decided.status_code == 404
    assert detail.text == missing.text
    assert Code.ACTION_RUN_NOT_FOUND in decided.text
    run = await stored_run(site.store, acme.run_id)
    assert run is not None and run.status is RunStatus.WAITING_APPROVAL
    assert run.approval is not None and run.approval.decisions == ()


async def test_signing_out_ends_the_session_even_for_a_copied_cookie(site: Site) -> None:
    async with site.client() as http:
        await sign_in(http, token(**LEAD))
        inbox = await http.get("/approvals")
        copied = http.cookies["signoff_session"]
        out = await http.post("/approvals/sign-out", data={"csrf": hidden(inbox.text, "csrf")})
        after = await http.get("/approvals")
    assert out.status_code == 303 and out.headers["location"].startswith("/approvals/sign-in")
    assert after.status_code == 303
    async with site.client() as thief:
        replay = await thief.get("/approvals", headers={"Cookie": f"signoff_session={copied}"})
    assert replay.status_code == 303


async def test_a_tampered_session_cookie_is_no_session(site: Site) -> None:
    async with site.client() as http:
        await sign_in(http, token(sub="clerk", roles=("billing",)))
        body, _, mac = http.cookies["signoff_session"].partition(".")
    import base64
    import json

    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["roles"] = ["billing-lead"]
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    async with site.client() as attacker:
        response = await attacker.get(
            "/approvals", headers={"Cookie": f"signoff_session={forged}.{mac}"}
        )
    assert response.status_code == 303


async def test_an_expired_token_cannot_sign_in(site: Site) -> None:
    async with site.client() as http:
        signed = await sign_in(http, token(**LEAD, ttl_seconds=-10))
    assert signed.status_code == 401


@pytest.mark.parametrize(("token_left", "lasts"), [(60, 60), (None, 3600), (86_400, 3600)])
def test_a_session_ends_with_its_token_or_its_lifetime_whichever_comes_first(
    token_left: int | None, lasts: int
) -> None:
    now = [1_000_000.0]
    sessions = Sessions(SESSION_SECRET, 3600, clock=lambda: now[0])
    caller = Caller(principal=Principal(id="lead-1", roles=("billing-lead",)), tenant_id="acme")
    expires = int(now[0]) + token_left if token_left is not None else None
    cookie = sessions.encode(sessions.signed_in(caller, expires))
    now[0] += lasts - 1
    assert sessions.decode(cookie) is not None
    now[0] += 1
    assert sessions.decode(cookie) is None


@pytest.mark.parametrize(
    "next_url", ["https://evil.example/", "//evil.example/approvals", "/mcp", "/approvals\\@evil"]
)
async def test_sign_in_never_redirects_outside_the_inbox(site: Site, next_url: str) -> None:
    async with site.client() as http:
        signed = await sign_in(http, token(**LEAD), next_url)
    assert signed.headers["location"] == "/approvals"


async def test_pages_forbid_framing_and_scripts_and_are_not_cached(site: Site) -> None:
    async with site.client() as http:
        page = await http.get("/approvals/sign-in")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert "script-src" not in policy
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["cache-control"] == "no-store"
    assert "<script" not in page.text


async def test_every_visible_form_control_has_a_label(site: Site) -> None:
    pending = await site.propose()
    async with site.client() as http:
        pages = [(await http.get("/approvals/sign-in")).text]
        await sign_in(http, token(**LEAD))
        pages.append((await http.get(f"/approvals/runs/{pending.run_id}")).text)
    for page in pages:
        controls = re.findall(r"<(textarea|input|select)\b([^>]*)>", page)
        for tag, attributes in controls:
            if 'type="hidden"' in attributes:
                continue
            found = re.search(r'id="([^"]+)"', attributes)
            assert found is not None, f"{tag} without an id"
            assert f'<label for="{found.group(1)}"' in page
    assert 'name="decision" value="approve"' in pages[1]
    assert 'name="decision" value="reject"' in pages[1]
