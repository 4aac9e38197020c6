"""Completion callbacks: the HMAC format of docs/callbacks.md, and every refusal's answer."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import httpx
import pytest

from signoff import Code, ExecutionStatus, RunStatus
from tests.helpers import stored_run
from tests.web.support import ACTION_CALLBACK_SECRET, CALLBACK_SECRET, Site

SUCCESS = {"status": "SUCCEEDED", "code": "SUCCEEDED", "output": {"provider_ref": "pay-1"}}


def sign(secret: str, tenant: str, run_id: str, attempt: str, body: bytes) -> str:
    """The documented canonical message, computed independently of the server's code."""
    message = f"signoff-callback-v1\n{tenant}\n{run_id}\n{attempt}\n".encode() + body
    return "sha256=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


async def post(
    http: httpx.AsyncClient,
    run_id: str,
    attempt: str,
    result: dict[str, Any] | bytes = SUCCESS,
    *,
    tenant: str = "acme",
    secret: str = ACTION_CALLBACK_SECRET,
    signed_tenant: str | None = None,
    signed_body: bytes | None = None,
) -> httpx.Response:
    body = result if isinstance(result, bytes) else json.dumps(result).encode()
    signature = sign(
        secret, signed_tenant or tenant, run_id, attempt, signed_body if signed_body else body
    )
    return await http.post(
        f"/api/callbacks/{run_id}",
        content=body,
        headers={
            "Content-Type": "application/json",
            "X-Signoff-Tenant": tenant,
            "X-Signoff-Attempt": attempt,
            "X-Signoff-Signature": signature,
        },
    )


async def waiting(site: Site, action: str = "payout.send", key: str = "p-1") -> tuple[str, str]:
    outcome = await site.propose(action=action, key=key)
    assert outcome.code == Code.ACTION_DEFERRED
    run = await stored_run(site.store, outcome.run_id)
    assert run is not None and run.status is RunStatus.WAITING_EXTERNAL
    assert run.attempt_token is not None
    return outcome.run_id, run.attempt_token


async def missing_answer(http: httpx.AsyncClient) -> httpx.Response:
    return await post(http, "0190-no-such-run", "whatever")


async def test_a_matching_callback_completes_the_run(site: Site) -> None:
    run_id, attempt = await waiting(site)
    async with site.client() as http:
        response = await post(http, run_id, attempt)
    assert response.status_code == 200
    body = response.json()
    assert (body["code"], body["accepted"]) == (Code.SUCCEEDED, True)
    assert body["outcome"]["output"] == {"provider_ref": "pay-1"}
    outcome = await site.runtime.get(run_id, "acme")
    assert outcome is not None and outcome.status is ExecutionStatus.SUCCEEDED


async def test_an_action_without_its_own_secret_uses_the_server_wide_one(site: Site) -> None:
    run_id, attempt = await waiting(site, action="payout.plain")
    async with site.client() as http:
        wrong = await post(http, run_id, attempt, secret=ACTION_CALLBACK_SECRET)
        right = await post(http, run_id, attempt, secret=CALLBACK_SECRET)
    assert wrong.status_code == 404
    assert (right.status_code, right.json()["code"]) == (200, Code.SUCCEEDED)


async def test_an_actions_own_secret_wins_over_the_server_wide_one(site: Site) -> None:
    run_id, attempt = await waiting(site)
    async with site.client() as http:
        response = await post(http, run_id, attempt, secret=CALLBACK_SECRET)
        missing = await missing_answer(http)
    assert response.status_code == 404 and response.json() == missing.json()
    assert (await stored_run(site.store, run_id)).status is RunStatus.WAITING_EXTERNAL


async def test_a_stale_attempt_token_is_refused(site: Site) -> None:
    run_id, _attempt = await waiting(site)
    async with site.client() as http:
        response = await post(http, run_id, "an-earlier-attempt")
    assert (response.status_code, response.json()["code"]) == (409, Code.STALE_ACTION_ATTEMPT)
    assert (await stored_run(site.store, run_id)).status is RunStatus.WAITING_EXTERNAL


@pytest.mark.parametrize("forgery", ["wrong-secret", "no-signature", "tampered-body", "bad-header"])
async def test_a_forged_callback_is_answered_like_a_missing_run(site: Site, forgery: str) -> None:
    run_id, attempt = await waiting(site)
    async with site.client() as http:
        if forgery == "wrong-secret":
            response = await post(http, run_id, attempt, secret="not-the-secret-" + "x" * 32)
        elif forgery == "tampered-body":
            failed = json.dumps({"status": "FAILED", "code": "ACTION_FAILED"}).encode()
            response = await post(
                http, run_id, attempt, failed, signed_body=json.dumps(SUCCESS).encode()
            )
        else:
            headers = {"X-Signoff-Tenant": "acme", "X-Signoff-Attempt": attempt}
            if forgery == "bad-header":
                headers["X-Signoff-Signature"] = "sha1=abc"
            response = await http.post(
                f"/api/callbacks/{run_id}", content=json.dumps(SUCCESS), headers=headers
            )
        missing = await missing_answer(http)
    assert response.status_code == missing.status_code == 404
    assert response.json() == missing.json()
    assert response.json()["code"] == Code.ACTION_RUN_NOT_FOUND
    assert (await stored_run(site.store, run_id)).status is RunStatus.WAITING_EXTERNAL


async def test_a_cross_tenant_callback_is_answered_like_a_missing_run(site: Site) -> None:
    run_id, attempt = await waiting(site)
    async with site.client() as http:
        # Correctly signed, but claiming another tenant: the run is not found there.
        response = await post(http, run_id, attempt, tenant="globex")
        missing = await missing_answer(http)
    assert response.status_code == 404 and response.json() == missing.json()
    assert (await stored_run(site.store, run_id)).status is RunStatus.WAITING_EXTERNAL


async def test_a_repeated_completion_returns_the_stored_result(site: Site) -> None:
    run_id, attempt = await waiting(site)
    failed = {"status": "FAILED", "code": "PROVIDER_DECLINED", "retry": "NEVER"}
    async with site.client() as http:
        first = await post(http, run_id, attempt)
        same = await post(http, run_id, attempt)
        different = await post(http, run_id, attempt, failed)
    assert first.json()["accepted"] is True
    for repeat in (same, different):
        assert repeat.status_code == 200
        body = repeat.json()
        assert (body["code"], body["accepted"]) == (Code.SUCCEEDED, False)
        assert body["outcome"] == first.json()["outcome"]


@pytest.mark.parametrize("status", ["ACCEPTED", "PENDING_APPROVAL"])
async def test_a_non_terminal_result_is_refused(site: Site, status: str) -> None:
    run_id, attempt = await waiting(site)
    async with site.client() as http:
        response = await post(http, run_id, attempt, {"status": status, "code": "STILL_GOING"})
    assert (response.status_code, response.json()["code"]) == (
        422,
        Code.ACTION_RESULT_NOT_TERMINAL,
    )
    assert (await stored_run(site.store, run_id)).status is RunStatus.WAITING_EXTERNAL


@pytest.mark.parametrize(
    "body", [b"not json", b'{"status": "SUCCEEDED"}', b'{"status": "WHATEVER", "code": "X"}']
)
async def test_a_signed_body_that_is_not_an_execution_result_is_refused(
    site: Site, body: bytes
) -> None:
    run_id, attempt = await waiting(site)
    async with site.client() as http:
        response = await post(http, run_id, attempt, body)
    assert (response.status_code, response.json()["code"]) == (400, Code.INPUT_VALIDATION_FAILED)


async def test_without_any_secret_configured_no_callback_is_accepted() -> None:
    from tests.web.support import site_for_tests, web_config

    async with site_for_tests(config=web_config(callback_secret=None)) as site:
        run_id, attempt = await waiting(site, action="payout.plain")
        async with site.client() as http:
            response = await post(http, run_id, attempt, secret="")
        assert response.status_code == 404
