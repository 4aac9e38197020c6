"""Small builders shared by the tests: definitions, proposals, a recording executor."""

from __future__ import annotations

import threading
from asyncio import selector_events
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from signoff import (
    ActionDefinition,
    ActionProposal,
    ApprovalSpec,
    Channel,
    ExecutionContext,
    Principal,
    ProposerType,
)
from signoff.core.clock import ManualClock
from signoff.core.definition import DenyRule, IdempotencySpec, PolicySpec
from signoff.core.ports import Store
from signoff.core.registry import ActionRegistry
from signoff.core.run import ActionRun, ApprovalVote, RunStatus
from signoff.core.runtime import DecisionRequest, Runtime
from signoff.store.memory import InMemoryStore

NO_APPROVAL = ApprovalSpec(when="false")
# An amount that runs without approval, and one that needs a billing lead.
SMALL = {"invoice_id": "INV-1", "amount": 10}
LARGE = {"invoice_id": "INV-2", "amount": 5000}
AGENT = Principal(id="agent-1", roles=("billing",))
LEAD = Principal(id="lead-1", roles=("billing-lead",))
LEAD2 = Principal(id="lead-2", roles=("billing-lead",))
INVOICE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "invoice_id": {"type": "string", "pattern": "^INV-[0-9]+$"},
        "amount": {"type": "number", "minimum": 0},
    },
    "required": ["invoice_id", "amount"],
    "additionalProperties": False,
}


@dataclass
class Recorder:
    """An executor that counts its calls (the domain side effect) and echoes the input."""

    calls: list[ExecutionContext] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def __call__(self, context: ExecutionContext) -> dict[str, Any]:
        with self.lock:
            self.calls.append(context)
        return {"done": context.input, "operation_id": context.operation_id}

    @property
    def count(self) -> int:
        return len(self.calls)


def bare_run(status: str = "REQUESTED", **overrides: Any) -> ActionRun:
    """A minimal stored run for store-level tests (id ``r1``, tenant ``t``)."""
    at = datetime(2026, 1, 1, tzinfo=UTC)
    fields: dict[str, Any] = {
        "run_id": "r1",
        "tenant_id": "t",
        "action_id": "a",
        "principal": AGENT,
        "channel": "mcp",
        "proposer_type": "agent",
        "status": status,
        "created_at": at,
        "updated_at": at,
    }
    fields.update(overrides)
    return ActionRun(**fields)


def definition(executor: Any, **overrides: Any) -> ActionDefinition:
    fields: dict[str, Any] = {
        "id": "invoice.cancel",
        "effect": "write",
        "risk": "high",
        "input_schema": INVOICE_SCHEMA,
        "resource": "'invoice/' + input.invoice_id",
        "idempotency": IdempotencySpec(key="required", scope="resource"),
        "policy": PolicySpec(
            roles=("billing", "billing-lead"),
            deny=(DenyRule(when="input.amount > 100000.0", code="AMOUNT_OVER_LIMIT"),),
        ),
        "approval": ApprovalSpec(
            when="input.amount > 1000.0", approver_roles=("billing-lead",), count=1
        ),
        "executor": executor,
    }
    fields.update(overrides)
    return ActionDefinition(**fields)


def proposal(
    input: Any,
    key: str | None = "key-1",
    principal: Principal = AGENT,
    tenant: str = "acme",
    action: str = "invoice.cancel",
) -> ActionProposal:
    return ActionProposal(
        action_id=action,
        input=input,
        principal=principal,
        tenant_id=tenant,
        channel=Channel.MCP,
        proposer_type=ProposerType.AGENT,
        idempotency_key=key,
    )


def approve(approver: Principal = LEAD, reason: str = "ok") -> DecisionRequest:
    return DecisionRequest(approver=approver, vote=ApprovalVote.APPROVE, reason=reason)


def reject(approver: Principal = LEAD, reason: str = "no") -> DecisionRequest:
    return DecisionRequest(approver=approver, vote=ApprovalVote.REJECT, reason=reason)


def memory_runtime(*definitions: ActionDefinition, clock: ManualClock | None = None) -> Runtime:
    return Runtime(ActionRegistry(definitions), InMemoryStore(), clock=clock or ManualClock())


async def stored_run(store: Store, run_id: str) -> ActionRun:
    """The run as stored, read past the runtime (any tenant; no expiry on reading)."""
    async with store.unit() as unit:
        run = await unit.runs.get(run_id)
    assert run is not None, f"run {run_id} is not stored"
    return run


async def status_of(runtime: Runtime, run_id: str, tenant: str = "acme") -> RunStatus:
    """The run's status through the facade; a missing run fails the test plainly."""
    run = await runtime.get_run(run_id, tenant)
    assert run is not None, f"no run {run_id} in {tenant}"
    return run.status


@dataclass
class Writes:
    count: int = 0


@contextmanager
def socket_writes() -> Iterator[Writes]:
    """Counts the writes to asyncio's socket transports while open: round trips to a database
    server, each answered before the next (SQLAlchemy's events miss statements sent straight
    to the driver)."""
    transport: Any = vars(selector_events)["_SelectorSocketTransport"]
    write = transport.write
    seen = Writes()

    def counted(self: Any, data: Any) -> None:
        seen.count += 1
        write(self, data)

    transport.write = counted
    try:
        yield seen
    finally:
        transport.write = write
