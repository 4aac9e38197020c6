"""A recorded history for the replay tests, made by the real ``Runtime`` from real manifests.

``BASE`` is the manifest the history ran under; ``build`` drives proposals, approvals, an
amendment, a rejection and the limits (a parked call, a denied one) on a ``ManualClock``, and
names every run it made. The agents' amounts are chosen so that a tightened limit decides
differently only when usage is rebuilt in time order (see ``ORDER``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from signoff import Principal
from signoff.core.clock import ManualClock
from signoff.core.ports import Store
from signoff.core.registry import ActionRegistry
from signoff.core.run import ApprovalVote
from signoff.core.runtime import DecisionRequest, Runtime
from signoff.manifest import load_manifests
from tests.helpers import proposal
from tests.manifest.support import write

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
TENANT = "acme"
SECRET = "card 4111-1111-1111-1111"
A1 = Principal(id="agent-1", roles=("billing",))
A2 = Principal(id="agent-2", roles=("billing",))
A3 = Principal(id="agent-3", roles=("billing",))
INTERN = Principal(id="intern", roles=("viewer",))
LEAD = Principal(id="lead-1", roles=("billing-lead",))

BASE = """\
apiVersion: signoff/v1
kind: Action
metadata:
  id: invoice.pay
  title: Pay an invoice
spec:
  effect: financial
  risk: high
  input:
    type: object
    properties:
      invoice_id: {type: string}
      amount: {type: number}
      note: {type: string}
    required: [invoice_id, amount]
    additionalProperties: false
  resource: "'invoice/' + input.invoice_id"
  idempotency: {key: required, scope: resource}
  policy:
    roles: [billing]
    deny:
      - when: "input.amount > 100000.0"
        code: AMOUNT_OVER_LIMIT
  approval:
    when: "input.amount > 1000.0"
    approvers: {roles: [billing-lead]}
    expires_after: 2h
    amend: [amount]
  executor:
    python: tests.manifest.hooks:echo
  sensitive: [note]
  limits:
    - name: spend
      per: principal
      window: 1h
      sum: input.amount
      max: 20000
      on_exceed: deny
    - name: calls
      per: principal
      window: 1h
      count: 4
"""


def edited(old: str, new: str, text: str = BASE) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


STRICTER_DENY = edited(
    "    deny:\n",
    '    deny:\n      - when: "input.amount > 7000.0"\n        code: AMOUNT_TOO_HIGH\n',
)
APPROVAL_LOWERED = edited('when: "input.amount > 1000.0"', 'when: "input.amount > 50.0"')
APPROVAL_RAISED = edited('when: "input.amount > 1000.0"', 'when: "input.amount > 10000.0"')
SPEND_TIGHTENED = edited("      max: 20000\n", "      max: 10000\n")
RENAMED = (
    BASE.replace("amount: {type: number}", "total: {type: number}")
    .replace("required: [invoice_id, amount]", "required: [invoice_id, total]")
    .replace("input.amount", "input.total")
    .replace("amend: [amount]", "amend: [total]")
)
OTHER_ACTION = edited("  id: invoice.pay\n", "  id: invoice.remind\n")


def manifests(directory: Path, text: str = BASE) -> Path:
    write(directory, "pay.yaml", text)
    return directory


def registry(directory: Path) -> ActionRegistry:
    return ActionRegistry(load_manifests(directory, environ={}).compiled)


@dataclass
class History:
    """The runs ``build`` made, by name (``ids``), in the order they were proposed."""

    tenant: str
    ids: dict[str, str] = field(default_factory=dict)
    clock: ManualClock = field(default_factory=lambda: ManualClock(START))

    def __getitem__(self, name: str) -> str:
        return self.ids[name]

    def names(self, run_ids: set[str]) -> set[str]:
        by_id = {v: k for k, v in self.ids.items()}
        return {by_id[r] for r in run_ids}


async def build(store: Store, registry_: ActionRegistry, tenant: str = TENANT) -> History:
    """The recorded history, in ``tenant`` (the comments say what each step decided)."""
    history = History(tenant)
    clock = history.clock
    runtime = Runtime(registry_, store, clock=clock, instance_id="replay-history")
    keys = iter(range(1, 1000))

    async def propose(name: str, who: Principal, amount: Any, **extra: Any) -> None:
        n = next(keys)
        data = {"invoice_id": f"INV-{n}", "amount": amount, **extra}
        outcome = await runtime.propose(proposal(data, f"key-{n}", who, tenant, "invoice.pay"))
        history.ids[name] = outcome.run_id

    async def decide(name: str, vote: ApprovalVote, amend: float | None = None) -> None:
        request = DecisionRequest(
            approver=LEAD,
            vote=vote,
            reason="checked",
            amendments={"amount": amend} if amend is not None else None,
        )
        result = await runtime.decide(history[name], tenant, request)
        assert result.accepted, result

    def at(minutes: int) -> None:
        clock.advance(START + timedelta(minutes=minutes) - clock.now())

    try:
        await propose("small", A1, 100)  # runs at once
        at(1)
        await propose("large", A1, 5000, note=SECRET)  # waits for approval
        at(2)
        await propose("huge", A1, 200000)  # AMOUNT_OVER_LIMIT
        at(3)
        await propose("bad", A1, "lots")  # INPUT_VALIDATION_FAILED
        at(4)
        await propose("intern", INTERN, 10)  # POLICY_DENIED: no billing role
        await propose("screened", A1, 2**64)  # refused by the input limits: not stored as sent
        at(5)
        await decide("large", ApprovalVote.APPROVE)
        at(6)
        await propose("amended", A2, 8000, note=SECRET)
        await decide("amended", ApprovalVote.APPROVE, amend=3000)
        at(7)
        await propose("rejected", A2, 9000)
        await decide("rejected", ApprovalVote.REJECT)
        at(8)
        await propose("fourth", A1, 50)
        await propose("fifth", A1, 60)  # the fourth call of agent-1 in the hour: fits
        await propose("sixth", A1, 70)  # the fifth: over the calls limit, parked
        at(10)
        await propose("overspend", A2, 19000)  # 3000 + 19000 > 20000: LIMIT_EXCEEDED
        # ORDER: agent-3 under a spend limit of 10000 (SPEND_TIGHTENED) —
        at(20)
        await propose("o1", A3, 6000)  # waits; approved at 50m, so it counts from 50m on
        at(30)
        await propose("o2", A3, 6000)  # 12000: denied under 10000, and then holds nothing
        await decide("o2", ApprovalVote.APPROVE)
        at(40)
        await propose("o3", A3, 3000)  # 9000 under 10000 only if o2 is not counted
        await decide("o3", ApprovalVote.APPROVE)
        at(50)
        await decide("o1", ApprovalVote.APPROVE)
        at(85)
        await propose("o4", A3, 4500)  # o1 (50m) + o3 (40m) + 4500 = 13500 > 10000
    finally:
        await runtime.drain()
    return history
