"""``POST /api/policy/replay`` over a history the real runtime stored on SQLite: the report of a
stricter manifest with its rules, who may ask (operators only), masking that a submitted
manifest cannot undo, and manifests that do not load answered with their codes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff.app import Settings, assemble
from signoff.core.codes import Code
from signoff.core.visibility import MASK
from signoff.store.history import history_of
from signoff.store.sql import open_sql_store
from signoff.surfaces.access.jwt import JwtConfig, JwtVerifier, issue_token
from signoff.surfaces.access.scopes import DEFAULT_APPROVE, DEFAULT_OPERATE, DEFAULT_PROPOSE
from signoff.surfaces.mcp.http import BearerAuth, HttpOptions, build_http_app
from signoff.surfaces.web import WebConfig, build_web
from signoff.surfaces.web.replay import MAX_REPLAY_BODY, Replaying
from tests.replay import history as recorded

SECRET_KEY = "a-test-secret-that-is-long-enough-for-hs256"
BASE_URL = "http://127.0.0.1:8000"


def bearer(scopes: Sequence[str], tenant: str = recorded.TENANT) -> dict[str, str]:
    token = issue_token(SECRET_KEY, "ops-1", tenant, ("ops",), ttl_seconds=600, scopes=scopes)
    return {"Authorization": f"Bearer {token}"}


OPERATOR = (DEFAULT_OPERATE,)


@dataclass
class Server:
    http: httpx.AsyncClient
    history: recorded.History

    async def replay(self, body: dict[str, Any], scopes: Sequence[str] = OPERATOR) -> Any:
        return await self.http.post("/api/policy/replay", json=body, headers=bearer(scopes))


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    """The server on the manifests the history ran under, over the SQLite store it wrote."""
    store = await open_sql_store(f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}")
    registry = recorded.registry(recorded.manifests(tmp_path / "serving"))
    history = await recorded.build(store, registry)
    runtime = assemble(Settings(instance_id="api"), registry, store).runtime
    verifier = JwtVerifier(JwtConfig(secret=SECRET_KEY))
    config = WebConfig(public_url=BASE_URL, session_secret="s" * 32, callback_secret="c" * 32)
    view = history_of(store)
    assert view is not None
    web = build_web(runtime, config, verifier, replaying=Replaying(registry, view))
    app = build_http_app(runtime, BearerAuth(verifier, BASE_URL), HttpOptions(routes=web.routes))
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE_URL)
    try:
        yield Server(client, history)
    finally:
        await client.aclose()
        await runtime.drain()
        await store.close()


def changes(report: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [c for a in report["actions"] for c in a["changes"] if c["kind"] == kind]


async def test_a_stricter_manifest_reports_the_runs_it_would_deny_with_the_rule(
    server: Server,
) -> None:
    response = await server.replay({"manifests": {"pay.yaml": recorded.STRICTER_DENY}})
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["tenant"] == recorded.TENANT
    assert report["totals"]["replayed"] == 15 and report["totals"]["changed"] == 4
    assert report["totals"]["by_kind"] == {"allowed_to_denied": 2, "deny_code_changed": 2}
    [denied] = changes(report, "allowed_to_denied")
    assert denied["rule"] == "policy.deny[0] (AMOUNT_TOO_HIGH): input.amount > 7000.0"
    ids = {line["run_id"] for line in denied["runs"]}
    assert server.history.names(ids) == {"amended", "rejected"}
    assert {line["now"]["code"] for line in denied["runs"]} == {"AMOUNT_TOO_HIGH"}
    same = await server.replay({"manifests": {"pay.yaml": recorded.BASE}})
    assert same.json()["totals"]["changed"] == 0


async def test_runs_per_change_are_capped_and_the_rest_counted(server: Server) -> None:
    body = {"manifests": {"pay.yaml": recorded.APPROVAL_RAISED}, "runs": 2}
    [change] = changes((await server.replay(body)).json(), "approval_no_longer_required")
    assert (change["count"], len(change["runs"]), change["more"]) == (7, 2, 5)
    too_many = await server.replay({**body, "runs": 101})
    assert (too_many.status_code, too_many.json()["code"]) == (400, Code.INPUT_VALIDATION_FAILED)


async def test_a_manifest_that_drops_sensitive_unmasks_nothing(server: Server) -> None:
    """The server's own ``sensitive: [note]`` still masks; the submitted one dropped it."""
    unmasked = recorded.STRICTER_DENY.replace("  sensitive: [note]\n", "")
    assert unmasked != recorded.STRICTER_DENY
    response = await server.replay({"manifests": {"pay.yaml": unmasked}, "runs": 50})
    assert response.status_code == 200
    assert recorded.SECRET not in response.text
    [denied] = changes(response.json(), "allowed_to_denied")
    amended = next(r for r in denied["runs"] if r["run_id"] == server.history["amended"])
    assert amended["input"]["note"] == MASK


async def test_a_renamed_action_shows_no_input_of_runs_the_server_does_not_define(
    server: Server,
) -> None:
    """A submitted manifest that defines the stored runs' action under no ``sensitive``, while
    the server's definitions say nothing of it, shows no input at all."""
    text = recorded.OTHER_ACTION.replace("  sensitive: [note]\n", "")
    response = await server.replay({"manifests": {"pay.yaml": text}, "runs": 50})
    assert recorded.SECRET not in response.text
    [removed] = changes(response.json(), "action_removed")
    assert {json.dumps(line["input"]) for line in removed["runs"]} == {"null"}


@pytest.mark.parametrize(
    ("scopes", "status", "code"),
    [
        ((DEFAULT_OPERATE,), 200, None),
        ((DEFAULT_OPERATE, DEFAULT_APPROVE), 200, None),
        ((DEFAULT_APPROVE,), 403, Code.INSUFFICIENT_SCOPE),
        ((DEFAULT_PROPOSE,), 403, Code.INSUFFICIENT_SCOPE),
        ((DEFAULT_PROPOSE, DEFAULT_OPERATE), 403, Code.INSUFFICIENT_SCOPE),
        ((), 403, Code.INSUFFICIENT_SCOPE),
    ],
)
async def test_only_an_operators_token_is_served(
    server: Server, scopes: tuple[str, ...], status: int, code: str | None
) -> None:
    response = await server.replay({"manifests": {"pay.yaml": recorded.STRICTER_DENY}}, scopes)
    assert response.status_code == status
    if code is not None:
        assert response.json()["code"] == code
        assert response.json()["scope"] == DEFAULT_OPERATE
        assert "actions" not in response.json()


async def test_no_token_or_a_forged_one_is_401(server: Server) -> None:
    body = {"manifests": {"pay.yaml": recorded.BASE}}
    none = await server.http.post("/api/policy/replay", json=body)
    forged = issue_token("x" * 40, "ops-1", recorded.TENANT, (), scopes=OPERATOR)
    bad = await server.http.post(
        "/api/policy/replay", json=body, headers={"Authorization": f"Bearer {forged}"}
    )
    for response in (none, bad):
        assert (response.status_code, response.json()["code"]) == (401, Code.UNAUTHENTICATED)


async def test_an_operator_of_another_tenant_replays_nothing_of_this_one(server: Server) -> None:
    body = {"manifests": {"pay.yaml": recorded.STRICTER_DENY}}
    response = await server.http.post(
        "/api/policy/replay", json=body, headers=bearer(OPERATOR, tenant="globex")
    )
    assert response.status_code == 200
    assert response.json()["totals"]["replayed"] == 0


async def test_manifests_that_do_not_load_answer_each_problem_with_file_line_and_code(
    server: Server,
) -> None:
    broken = recorded.BASE.replace("risk: high", "risk: 9").replace(
        'when: "input.amount > 1000.0"', 'when: "input.amount >"'
    )
    response = await server.replay({"manifests": {"pay.yaml": broken}})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == Code.MANIFEST_INVALID
    found = {(p["file"], p["code"], p["path"]) for p in body["problems"]}
    assert ("pay.yaml", "INVALID_CEL", "spec.approval.when") in found
    assert all(isinstance(p["line"], int) for p in body["problems"])
    assert any(p["path"] == "spec.risk" for p in body["problems"])


async def test_nothing_in_a_submitted_manifest_is_imported_or_read_from_the_environment(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hook naming a module that would run at import, and ``${VAR}`` naming a server
    secret: the first is not imported, the second not read (it has no default: refused)."""
    monkeypatch.setenv("SIGNOFF_PLANTED_SECRET", "planted-value-123")
    hooked = recorded.BASE.replace(
        "python: tests.manifest.hooks:echo", "python: tests.replay.never_imported:run"
    )
    response = await server.replay({"manifests": {"pay.yaml": hooked}})
    assert response.status_code == 200, response.text  # imported, it would not load
    leaking = recorded.BASE.replace(
        "  executor:\n    python: tests.manifest.hooks:echo",
        "  executor:\n    http:\n      method: POST\n"
        '      url: "https://example.test/${SIGNOFF_PLANTED_SECRET}"',
    )
    refused = await server.replay({"manifests": {"pay.yaml": leaking}})
    assert "planted-value-123" not in refused.text
    assert refused.json()["code"] == Code.MANIFEST_INVALID
    assert "UNDEFINED_VARIABLE" in {p["code"] for p in refused.json()["problems"]}


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"manifests": {}},
        {"manifests": {"pay.yaml": 7}},
        {"manifests": {"": "x"}},
        {"manifests": {"pay.yaml": "x"}, "since": "soon"},
        {"manifests": {"pay.yaml": "x"}, "since": "7d", "from": "2026-03-01T00:00:00Z"},
        {"manifests": {"pay.yaml": "x"}, "from": "yesterday"},
        {"manifests": {"pay.yaml": "x"}, "extra": 1},
    ],
)
async def test_a_malformed_body_is_refused_with_a_code(
    server: Server, body: dict[str, Any]
) -> None:
    response = await server.replay(body)
    assert (response.status_code, response.json()["code"]) == (400, Code.INPUT_VALIDATION_FAILED)


async def test_an_oversized_body_is_refused_before_it_is_read(server: Server) -> None:
    huge = {"manifests": {"pay.yaml": "#" * (MAX_REPLAY_BODY + 1)}}
    response = await server.replay(huge)
    assert (response.status_code, response.json()["code"]) == (413, Code.INPUT_VALIDATION_FAILED)
    not_json = await server.http.post(
        "/api/policy/replay", content=b"\xff{", headers=bearer(OPERATOR)
    )
    assert (not_json.status_code, not_json.json()["code"]) == (400, Code.INPUT_VALIDATION_FAILED)
