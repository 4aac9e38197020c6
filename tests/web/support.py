"""Shared pieces of the web surface tests: a runtime with the invoice actions, the HTTP app with
the web routes, tokens, and an httpx client over the ASGI transport."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx
from starlette.applications import Starlette

from signoff import ActionDefinition, ActionOutcome, ExecutionContext, Principal
from signoff.app import Settings, assemble
from signoff.core.clock import ManualClock
from signoff.core.definition import ApprovalSpec, Escalation
from signoff.core.ports import Store
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.store.memory import InMemoryStore
from signoff.surfaces.access.jwt import JwtConfig, JwtVerifier, issue_token
from signoff.surfaces.access.scopes import DEFAULT_APPROVE
from signoff.surfaces.mcp.http import BearerAuth, HttpOptions, build_http_app
from signoff.surfaces.web import WebConfig, WebNotifications, build_web
from signoff.surfaces.web.links import DecisionLinks
from signoff.surfaces.web.receipts import KeySource, Receipts
from tests.helpers import LARGE, NO_APPROVAL, Recorder, definition, proposal

JWT_SECRET = "a-test-secret-that-is-long-enough-for-hs256"
CALLBACK_SECRET = "server-wide-callback-secret-0123456789"
ACTION_CALLBACK_SECRET = "payout-own-callback-secret-0123456789"
SESSION_SECRET = "session-secret-for-the-tests-0123456789"
BASE_URL = "http://127.0.0.1:8000"
TWO_LEADS = ApprovalSpec(when="true", approver_roles=("billing-lead",), count=2)
SENSITIVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "invoice_id": {"type": "string", "pattern": "^INV-[0-9]+$"},
        "amount": {"type": "number", "minimum": 0},
        "reason": {"type": "string"},
    },
    "required": ["invoice_id", "amount"],
    "additionalProperties": False,
}


def token(
    sub: str = "lead-1",
    tenant: str = "acme",
    roles: Sequence[str] = ("billing-lead",),
    ttl_seconds: int = 3600,
    scopes: Sequence[str] = (DEFAULT_APPROVE,),
) -> str:
    """An approver's token by default (scope ``signoff:approve``)."""
    return issue_token(JWT_SECRET, sub, tenant, roles, ttl_seconds=ttl_seconds, scopes=scopes)


def bearer(**claims: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(**claims)}"}


def hidden(html: str, name: str) -> str:
    """The value of the hidden form field ``name`` in a rendered page."""
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found is not None, f"no hidden field {name}"
    return found.group(1)


class ExternalSystem:
    """A deferred executor's far side: accepts work, deduplicates by operation id."""

    def __init__(self) -> None:
        self.accepted: dict[str, dict[str, Any]] = {}

    async def send(self, context: ExecutionContext) -> dict[str, Any]:
        self.accepted.setdefault(context.operation_id, dict(context.input))
        return {"provider_ref": f"pay-{len(self.accepted)}"}


def preview_adjustment(context: ExecutionContext) -> dict[str, Any]:
    """A dry run: what cancelling would do to the invoice."""
    return {"would_cancel": context.input["invoice_id"], "refund": context.input["amount"]}


AMENDABLE = ApprovalSpec(
    when="true",
    approver_roles=("billing-lead",),
    amend=("amount",),
    escalate=(Escalation(when="input.amount > 10000.0", count=2),),
)


def invoice_actions(recorder: Recorder, external: ExternalSystem) -> list[ActionDefinition]:
    """invoice.cancel (lead approval above 1000, ``reason`` sensitive), invoice.review (two leads),
    and two deferred payouts: one with its own callback secret, one using the server's."""
    return [
        definition(recorder, input_schema=SENSITIVE_SCHEMA, sensitive_fields=("reason",)),
        definition(recorder, id="invoice.review", approval=TWO_LEADS),
        definition(recorder, id="invoice.adjust", approval=AMENDABLE, preview=preview_adjustment),
        definition(
            external.send,
            id="payout.send",
            mode="deferred",
            approval=NO_APPROVAL,
            timeout=timedelta(minutes=10),
            callback_secret=ACTION_CALLBACK_SECRET,
        ),
        definition(
            external.send,
            id="payout.plain",
            mode="deferred",
            approval=NO_APPROVAL,
            timeout=timedelta(minutes=10),
        ),
    ]


@dataclass
class Site:
    runtime: Runtime
    app: Starlette
    clock: ManualClock
    recorder: Recorder
    external: ExternalSystem
    config: WebConfig
    store: Store
    links: DecisionLinks | None = None
    clients: list[httpx.AsyncClient] = field(default_factory=list)

    async def propose(
        self,
        input: dict[str, Any] | None = None,
        *,
        key: str = "key-1",
        tenant: str = "acme",
        action: str = "invoice.cancel",
        principal: Principal | None = None,
    ) -> ActionOutcome:
        extra = {"principal": principal} if principal is not None else {}
        return await self.runtime.propose(
            proposal(input or LARGE, key=key, tenant=tenant, action=action, **extra)
        )

    def client(self, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app),
            base_url=BASE_URL,
            headers=headers or {},
        )
        self.clients.append(client)
        return client


def web_config(**overrides: Any) -> WebConfig:
    fields: dict[str, Any] = {
        "public_url": BASE_URL,
        "session_secret": SESSION_SECRET,
        "callback_secret": CALLBACK_SECRET,
    }
    fields.update(overrides)
    return WebConfig(**fields)


def build_site(
    store: Store | None = None,
    config: WebConfig | None = None,
    *,
    jwt_config: JwtConfig | None = None,
    extra: Sequence[ActionDefinition] = (),
    receipt_keys: KeySource | None = None,
) -> Site:
    clock = ManualClock()
    recorder, external = Recorder(), ExternalSystem()
    store = store if store is not None else InMemoryStore()
    config = config or web_config()
    notifications = WebNotifications(config, links=store.links)
    registry = ActionRegistry([*invoice_actions(recorder, external), *extra])
    settings = Settings(instance_id="default")
    runtime = assemble(settings, registry, store, clock=clock, notifier=notifications).runtime
    verifier = JwtVerifier(jwt_config or JwtConfig(secret=JWT_SECRET))
    receipts = Receipts(store, receipt_keys) if receipt_keys is not None else None
    web = build_web(runtime, config, verifier, notifications, receipts=receipts)
    app = build_http_app(
        runtime,
        BearerAuth(verifier, BASE_URL),
        HttpOptions(routes=web.routes, lifespan=web.lifespan),
    )
    return Site(runtime, app, clock, recorder, external, config, store, web.links)


@asynccontextmanager
async def site_for_tests(store: Store | None = None, **options: Any) -> AsyncIterator[Site]:
    site = build_site(store, **options)
    try:
        yield site
    finally:
        for client in site.clients:
            await client.aclose()
        await site.runtime.drain()


async def api_decide(
    site: Site,
    http: httpx.AsyncClient,
    run_id: str,
    verb: str = "approve",
    json: dict[str, Any] | None = None,
    *,
    version: int | None = None,
) -> httpx.Response:
    """``POST /api/runs/{id}/{verb}`` bound to ``version`` (default: the run's version as
    stored now, as if the approver had just read it; 1 for a run that does not exist)."""
    if version is None:
        async with site.store.unit() as unit:
            run = await unit.runs.get(run_id)
        version = run.version if run is not None else 1
    body = {**(json or {}), "expected_version": version}
    return await http.post(f"/api/runs/{run_id}/{verb}", json=body)
