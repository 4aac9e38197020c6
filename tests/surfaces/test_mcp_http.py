"""Streamable HTTP at /mcp: bearer JWTs, 401 metadata, tenants, disconnects — through ``mcp.Client``."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette

from signoff import Code, ExecutionStatus
from signoff.surfaces.access.caller import make_caller
from signoff.surfaces.access.jwt import JwtConfig, JwtConfigError, JwtVerifier, issue_token
from signoff.surfaces.access.scopes import DEFAULT_PROPOSE as PROPOSE
from signoff.surfaces.mcp.http import (
    BearerAuth,
    FixedIdentity,
    HttpOptions,
    build_http_app,
    signoff_mcp,
)
from tests.surfaces.support import (
    DEADLINE,
    SECRET,
    Gate,
    World,
    check_output,
    http_client,
    lookup_definition,
    running,
    tool_named,
    until_final,
    world,
)

SMALL = {"invoice_id": "INV-1", "amount": 10, "idempotency_key": "k-1"}
LARGE = {"invoice_id": "INV-2", "amount": 5000, "idempotency_key": "k-2"}
MODES = ["auto", "legacy"]


def token(sub: str = "agent-1", tenant: str = "acme", roles: tuple[str, ...] = ("billing",)) -> str:
    return issue_token(SECRET, sub, tenant, roles, scopes=[PROPOSE])


@dataclass
class Served:
    world: World
    url: str
    app: Starlette
    gate: Gate


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    gate = Gate()
    w = world(lookup_definition(gate, id="slow.read"))
    verifier = JwtVerifier(JwtConfig(secret=SECRET))
    app = build_http_app(w.runtime, BearerAuth(verifier, "http://127.0.0.1"))
    async with running(app) as url:
        yield Served(w, url, app, gate)


@pytest.mark.parametrize("mode", MODES)
async def test_a_valid_token_lists_the_tools_its_roles_may_propose_and_calls_them(
    served: Served, mode: str
) -> None:
    w, url = served.world, served.url
    async with http_client(url, token(roles=("support",)), mode=mode) as support:
        support_tools = {t.name for t in (await support.list_tools()).tools}
    async with http_client(url, token(), mode=mode) as agent:
        listed = (await agent.list_tools()).tools
        result = await agent.call_tool("invoice_cancel", SMALL)
    assert "invoice_cancel" not in support_tools and "invoice_get" in support_tools
    assert "invoice_cancel" in {t.name for t in listed}
    outcome = check_output(tool_named(listed, "invoice_cancel"), result)
    assert outcome["code"] == Code.SUCCEEDED
    assert w.recorder.calls[0].principal.id == "agent-1"
    assert w.recorder.calls[0].tenant_id == "acme"


@pytest.mark.parametrize("mode", MODES)
async def test_invalid_input_over_http_still_gets_a_run_with_input_validation_failed(
    served: Served, mode: str
) -> None:
    w, url = served.world, served.url
    async with http_client(url, token(), mode=mode) as agent:
        result = await agent.call_tool("invoice_cancel", {"invoice_id": 5, "idempotency_key": "x"})
    assert result.structured_content is not None
    assert result.structured_content["code"] == Code.INPUT_VALIDATION_FAILED
    assert await w.audit(result.structured_content["run_id"])


async def _post_initialize(url: str, headers: dict[str, str]) -> httpx2.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }
    async with httpx2.AsyncClient() as http:
        return await http.post(
            url + "/mcp",
            json=body,
            headers={"Accept": "application/json, text/event-stream", **headers},
        )


def _expired() -> str:
    return issue_token(
        SECRET, "agent-1", "acme", ["billing"], now=time.time() - 7200, scopes=[PROPOSE]
    )


def _forged() -> str:
    return issue_token(
        "another-secret-that-is-also-long-enough!!",
        "agent-1",
        "acme",
        ["billing"],
        scopes=[PROPOSE],
    )


def _no_tenant() -> str:
    claims = {"sub": "agent-1", "roles": ["billing"], "exp": int(time.time()) + 60}
    return jwt.encode(claims, SECRET, algorithm="HS256")


def _unsigned() -> str:
    claims = {"sub": "agent-1", "tenant": "acme", "exp": int(time.time()) + 60}
    header, payload = (_b64(json.dumps(part).encode()) for part in ({"alg": "none"}, claims))
    return f"{header}.{payload}."


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer " + _expired(),
        "Bearer " + _forged(),
        "Bearer " + _no_tenant(),
        "Bearer " + _unsigned(),
        "Bearer not-a-jwt",
        "Basic YWdlbnQ6cGFzcw==",
    ],
    ids=["missing", "expired", "forged", "no-tenant", "alg-none", "garbage", "basic"],
)
async def test_a_request_without_a_valid_token_gets_401_with_resource_metadata(
    served: Served, authorization: str | None
) -> None:
    w, url = served.world, served.url
    headers = {"Authorization": authorization} if authorization else {}
    response = await _post_initialize(url, headers)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert (
        'resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/mcp"' in challenge
    )
    async with w.store.unit() as unit:
        assert await unit.runs.list() == []


async def test_the_protected_resource_metadata_names_the_mcp_endpoint(
    served: Served,
) -> None:
    url = served.url
    async with httpx2.AsyncClient() as http:
        documents = [
            (await http.get(url + path)).json()
            for path in (
                "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource",
            )
        ]
    assert documents[0] == documents[1]
    assert documents[0]["resource"] == "http://127.0.0.1/mcp"
    # signoff issues no tokens: without a configured authorization server it names none.
    assert "authorization_servers" not in documents[0]
    assert documents[0]["scopes_supported"] == ["signoff:propose", "signoff:approve"]
    assert documents[0]["bearer_methods_supported"] == ["header"]


async def test_the_mcp_client_refuses_to_connect_without_a_token(
    served: Served,
) -> None:
    url = served.url
    with pytest.raises((MCPError, httpx2.HTTPStatusError, ExceptionGroup)):
        async with http_client(url, None, mode="legacy") as client:
            await client.list_tools()


async def test_a_foreign_host_header_is_refused(served: Served) -> None:
    url = served.url
    response = await _post_initialize(
        url, {"Authorization": "Bearer " + token(), "Host": "evil.example"}
    )
    assert response.status_code == 421


@pytest.mark.parametrize("mode", MODES)
async def test_another_tenants_run_over_http_answers_exactly_like_a_missing_one(
    served: Served, mode: str
) -> None:
    url = served.url
    async with http_client(url, token(tenant="acme"), mode=mode) as acme:
        pending = await acme.call_tool("invoice_cancel", LARGE)
    assert pending.structured_content is not None
    theirs = pending.structured_content["run_id"]
    missing = "01900000-0000-7000-8000-000000000000"
    async with http_client(url, token(sub="agent-1", tenant="globex"), mode=mode) as globex:
        answers = []
        for run_id in (theirs, missing):
            got = await globex.call_tool("signoff_get_run", {"run_id": run_id})
            assert got.structured_content is not None
            answers.append({k: v for k, v in got.structured_content.items() if k != "run_id"})
    assert answers[0] == answers[1]
    assert answers[0]["code"] == Code.ACTION_RUN_NOT_FOUND


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_that_disconnects_mid_call_over_http_leaves_a_consistent_run(
    served: Served, mode: str
) -> None:
    w, url = served.world, served.url
    gate = served.gate

    async def call() -> Any:
        async with http_client(url, token(), mode=mode) as client:
            return await client.call_tool("slow_read", {"invoice_id": "INV-1"})

    task = asyncio.create_task(call())
    await gate.wait_started()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    gate.release.set()

    async with http_client(url, token(), mode=mode) as again:
        listed = await again.call_tool("signoff_list_runs", {"limit": 1})
        assert listed.structured_content is not None
        run_id = listed.structured_content["runs"][0]["run_id"]
        final = await until_final(again, run_id)
    assert final["status"] == ExecutionStatus.SUCCEEDED
    kinds = [e.kind for e in await w.audit(run_id)]
    assert kinds == ["proposed", "resolved", "policy_allowed", "dispatching", "executed"]
    assert len(gate.calls) == 1


async def test_a_reload_reaches_http_clients_listening_for_tool_changes(
    served: Served,
) -> None:
    w, url = served.world, served.url
    async with http_client(url, token()) as client:
        async with client.listen(tools_list_changed=True) as subscription:
            w.registry.register(lookup_definition(lambda c: {}, id="invoice.archive"))
            await signoff_mcp(served.app).notify_tools_changed()
            event = await asyncio.wait_for(anext(aiter(subscription)), DEADLINE)
        names = {t.name for t in (await client.list_tools()).tools}
    assert type(event).__name__ == "ToolsListChanged"
    assert "invoice_archive" in names


# ----------------------------------------------------------------- RS256 and JWKS


def _rsa() -> tuple[Any, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return key, pem.decode()


def _rs256(key: Any, kid: str | None = None, **claims: Any) -> str:
    body = {
        "sub": "agent-1",
        "tenant": "acme",
        "roles": ["billing"],
        "exp": int(time.time()) + 60,
        "scope": PROPOSE,
    }
    body.update(claims)
    return jwt.encode(body, key, algorithm="RS256", headers={"kid": kid} if kid else None)


async def test_an_rs256_token_verifies_against_a_pem_public_key_file(tmp_path: Path) -> None:
    key, pem = _rsa()
    other, _ = _rsa()
    (tmp_path / "key.pem").write_text(pem)
    config = JwtConfig.from_env({"SIGNOFF_JWT_PUBLIC_KEY": str(tmp_path / "key.pem")})
    assert config is not None
    verifier = JwtVerifier(config)
    accepted = await verifier.verify_token(_rs256(key))
    assert accepted is not None and accepted.claims is not None
    assert accepted.claims["tenant"] == "acme"
    assert await verifier.verify_token(_rs256(other)) is None
    # An HS256 token signed with the public key text must not pass (algorithm confusion).
    assert await verifier.verify_token(_hs256_with(pem)) is None


def _hs256_with(secret: str) -> str:
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = {"sub": "agent-1", "tenant": "acme", "exp": int(time.time()) + 60}
    payload = _b64(json.dumps(claims).encode())
    signature = hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64(signature)}"


async def test_rs256_tokens_verify_against_a_jwks_file_by_kid(tmp_path: Path) -> None:
    first, _ = _rsa()
    second, _ = _rsa()
    keys = []
    for kid, key in (("one", first), ("two", second)):
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        keys.append({**jwk, "kid": kid, "alg": "RS256", "use": "sig"})
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": keys}))
    config = JwtConfig.from_env({"SIGNOFF_JWT_JWKS": str(tmp_path / "jwks.json")})
    assert config is not None
    verifier = JwtVerifier(config)
    assert await verifier.verify_token(_rs256(second, "two")) is not None
    assert await verifier.verify_token(_rs256(second, "one")) is None
    assert await verifier.verify_token(_rs256(first, "three")) is None

    w = world()
    app = build_http_app(w.runtime, BearerAuth(verifier, "http://127.0.0.1"))
    async with running(app) as url, http_client(url, _rs256(first, "one")) as client:
        result = await client.call_tool("invoice_get", {"invoice_id": "INV-1"})
    assert result.structured_content is not None
    assert result.structured_content["code"] == Code.SUCCEEDED


async def test_audience_and_issuer_are_checked_when_configured() -> None:
    verifier = JwtVerifier(JwtConfig(secret=SECRET, audience="signoff", issuer="https://idp"))
    good = issue_token(SECRET, "a", "acme", [], audience="signoff", issuer="https://idp")
    wrong_aud = issue_token(SECRET, "a", "acme", [], audience="other", issuer="https://idp")
    no_iss = issue_token(SECRET, "a", "acme", [], audience="signoff")
    assert await verifier.verify_token(good) is not None
    assert await verifier.verify_token(wrong_aud) is None
    assert await verifier.verify_token(no_iss) is None


@pytest.mark.parametrize(
    "env",
    [
        {"SIGNOFF_JWT_SECRET": "too-short"},
        {"SIGNOFF_JWT_SECRET": SECRET, "SIGNOFF_JWT_JWKS": "/nonexistent"},
        {"SIGNOFF_JWT_PUBLIC_KEY": "/nonexistent/key.pem"},
    ],
)
def test_bad_key_configuration_is_refused_at_start(env: dict[str, str]) -> None:
    with pytest.raises(JwtConfigError):
        JwtConfig.from_env(env)


def test_no_key_configuration_means_no_verifier() -> None:
    assert JwtConfig.from_env({}) is None


# ------------------------------------------------------------ the fixed test identity


async def test_a_fixed_identity_serves_loopback_without_tokens() -> None:
    w = world()
    caller = make_caller("conformance", "test", "billing")
    app = build_http_app(w.runtime, FixedIdentity(caller, "127.0.0.1"), HttpOptions())
    async with running(app) as url, http_client(url, None) as client:
        result = await client.call_tool("invoice_get", {"invoice_id": "INV-1"})
    assert result.structured_content is not None
    assert result.structured_content["code"] == Code.SUCCEEDED
    assert w.recorder.calls[0].principal.id == "conformance"


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "example.com"])
def test_a_fixed_identity_is_refused_off_loopback(host: str) -> None:
    caller = make_caller("conformance", "test", "")
    with pytest.raises(ValueError, match="loopback"):
        build_http_app(world().runtime, FixedIdentity(caller, host))


async def test_a_remembered_token_is_refused_once_it_expires() -> None:
    now = [time.time()]
    verifier = JwtVerifier(JwtConfig(secret=SECRET), clock=lambda: now[0])
    short = issue_token(SECRET, "agent-1", "acme", ["billing"], ttl_seconds=60)
    assert await verifier.verify_token(short) is not None
    assert await verifier.verify_token(short) is not None
    now[0] += 3600
    assert await verifier.verify_token(short) is None


@pytest.mark.parametrize("mode", MODES)
async def test_on_sqlite_a_disconnect_mid_call_and_an_approval_leave_consistent_runs(
    tmp_path: Path, mode: str
) -> None:
    from signoff.core.run import ApprovalVote
    from signoff.core.runtime import DecisionRequest
    from signoff.store.factory import open_store
    from tests.helpers import LEAD

    store = await open_store(f"sqlite+aiosqlite:///{tmp_path}/signoff.db")
    gate = Gate()
    w = world(lookup_definition(gate, id="slow.read"), store=store)
    app = build_http_app(
        w.runtime, BearerAuth(JwtVerifier(JwtConfig(secret=SECRET)), "http://127.0.0.1")
    )
    try:
        async with running(app) as url:

            async def call() -> Any:
                async with http_client(url, token(), mode=mode) as client:
                    return await client.call_tool("slow_read", {"invoice_id": "INV-1"})

            task = asyncio.create_task(call())
            await gate.wait_started()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            gate.release.set()

            async with http_client(url, token(), mode=mode) as agent:
                pending = await agent.call_tool("invoice_cancel", LARGE)
                assert pending.structured_content is not None
                run_id = pending.structured_content["run_id"]
                poll = asyncio.create_task(until_final(agent, run_id))
                decided = await w.runtime.decide(
                    run_id, "acme", DecisionRequest(approver=LEAD, vote=ApprovalVote.APPROVE)
                )
                assert decided.accepted
                approved = await poll
                slow = await agent.call_tool("signoff_list_runs", {"status": "SUCCEEDED"})
        assert approved["status"] == ExecutionStatus.SUCCEEDED
        assert slow.structured_content is not None
        actions = {o["action"] for o in slow.structured_content["runs"]}
        assert actions == {"slow.read", "invoice.cancel"}
        assert len(gate.calls) == 1 and w.recorder.count == 1
    finally:
        await w.runtime.drain()
        await store.close()
