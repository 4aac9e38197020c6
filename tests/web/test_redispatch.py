"""``POST /api/runs/{id}/redispatch``: an operator's re-dispatch over the approvers' JSON API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from signoff import Code, ExecutionStatus
from signoff.core.identity import Channel
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.store.memory import InMemoryStore
from signoff.surfaces.access.jwt import JwtConfig, JwtVerifier
from signoff.surfaces.access.scopes import DEFAULT_PROPOSE
from signoff.surfaces.mcp.http import BearerAuth, HttpOptions, build_http_app
from signoff.surfaces.web import build_web
from tests.core.test_repair import APPROVAL_ROLES, Flaky
from tests.helpers import definition, proposal
from tests.web.support import BASE_URL, JWT_SECRET, bearer, web_config


@dataclass
class Api:
    runtime: Runtime
    executor: Flaky
    http: httpx.AsyncClient

    async def failed_run(self) -> str:
        outcome = await self.runtime.propose(proposal({"invoice_id": "INV-1", "amount": 10}))
        assert outcome.retry == "MANUAL_REVIEW"
        return outcome.run_id


async def _api(idempotent: bool) -> AsyncIterator[Api]:
    executor = Flaky()
    action = definition(executor, approval=APPROVAL_ROLES, executor_idempotent=idempotent)
    runtime = Runtime(ActionRegistry([action]), InMemoryStore())
    verifier = JwtVerifier(JwtConfig(secret=JWT_SECRET))
    web = build_web(runtime, web_config(), verifier)
    app = build_http_app(
        runtime,
        BearerAuth(verifier, BASE_URL),
        HttpOptions(routes=web.routes, lifespan=web.lifespan),
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        yield Api(runtime, executor, http)
    await runtime.drain()


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    async for built in _api(idempotent=True):
        yield built


@pytest.fixture
async def plain_api() -> AsyncIterator[Api]:
    async for built in _api(idempotent=False):
        yield built


async def test_an_approver_redispatches_over_the_api_and_gets_the_new_runs_outcome(
    api: Api,
) -> None:
    run_id = await api.failed_run()

    response = await api.http.post(
        f"/api/runs/{run_id}/redispatch", json={"reason": "ERP confirmed"}, headers=bearer()
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["code"], body["redispatched"]) == (Code.SUCCEEDED, True)
    assert body["outcome"]["status"] == ExecutionStatus.SUCCEEDED
    repair = await api.runtime.get_run(body["outcome"]["run_id"], "acme")
    assert repair is not None and (repair.repair_of, repair.channel) == (run_id, Channel.API)
    assert api.executor.seen[0] == api.executor.seen[1]


async def test_a_non_idempotent_executor_is_refused_with_its_code(plain_api: Api) -> None:
    run_id = await plain_api.failed_run()

    response = await plain_api.http.post(
        f"/api/runs/{run_id}/redispatch", json={"reason": "please"}, headers=bearer()
    )

    assert (response.status_code, response.json()["code"]) == (409, Code.REPAIR_NOT_IDEMPOTENT)
    assert len(plain_api.executor.seen) == 1


@pytest.mark.parametrize(
    ("headers", "body", "status", "code"),
    [
        (None, {"reason": "x"}, 401, None),
        ("agent", {"reason": "x"}, 403, Code.INSUFFICIENT_SCOPE),
        ("clerk", {"reason": "x"}, 403, Code.APPROVER_NOT_ELIGIBLE),
        ("lead", {}, 400, Code.INPUT_VALIDATION_FAILED),
        ("lead", {"reason": ""}, 400, Code.INPUT_VALIDATION_FAILED),
        ("other-tenant", {"reason": "x"}, 404, Code.ACTION_RUN_NOT_FOUND),
    ],
)
async def test_only_an_eligible_approver_with_a_reason_may_redispatch(
    api: Api, headers: str | None, body: dict[str, str], status: int, code: str | None
) -> None:
    run_id = await api.failed_run()
    credentials = {
        None: {},
        "agent": bearer(scopes=(DEFAULT_PROPOSE,)),
        "clerk": bearer(sub="clerk", roles=("billing",)),
        "lead": bearer(),
        "other-tenant": bearer(tenant="globex"),
    }[headers]

    response = await api.http.post(f"/api/runs/{run_id}/redispatch", json=body, headers=credentials)

    assert response.status_code == status
    if code is not None:
        assert response.json()["code"] == code
    assert len(api.executor.seen) == 1
