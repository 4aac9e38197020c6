"""Runs, scopes and results for the store tests, with every field set."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from signoff.core.clock import new_run_id
from signoff.core.codes import Code
from signoff.core.identity import Channel, Principal, ProposerType
from signoff.core.results import ExecutionResult
from signoff.core.run import (
    ActionRun,
    Amendment,
    ApprovalDecision,
    ApprovalState,
    ApprovalVote,
    DuplicateScope,
    PreviewRecord,
    RunStatus,
)

T0 = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
CEST = timezone(timedelta(hours=2))


def scope(tenant: str, key: str | None = None) -> DuplicateScope:
    return DuplicateScope(
        tenant_id=tenant,
        action_id="invoice.cancel",
        idempotency_key=key or f"key-{uuid.uuid4().hex[:8]}",
        visibility="resource:invoice/INV-1 — ünïcødé",
    )


def result(output: dict[str, Any] | None = None) -> ExecutionResult:
    return ExecutionResult.succeeded(output if output is not None else {"cancelled": True})


def new_run(tenant: str, **changes: Any) -> ActionRun:
    """A fresh REQUESTED run at version 1."""
    fields: dict[str, Any] = {
        "run_id": new_run_id(),
        "tenant_id": tenant,
        "action_id": "invoice.cancel",
        "principal": Principal(id="agent-1", roles=("billing",)),
        "channel": Channel.MCP,
        "proposer_type": ProposerType.AGENT,
        "idempotency_key": "key-1",
        "input": {"invoice_id": "INV-1", "amount": 10},
        "created_at": T0,
        "updated_at": T0,
    }
    fields.update(changes)
    return ActionRun(**fields)


def full_run(tenant: str) -> ActionRun:
    """A run with every field away from its default, with awkward values in each.

    Optional text fields added to ``ActionRun`` later get a value automatically; any other new
    field makes the round-trip test fail until it is added here.
    """
    run = _full_run(tenant)
    extra = {
        name: f"{name}-ü"
        for name, info in ActionRun.model_fields.items()
        if info.annotation == (str | None) and getattr(run, name) is None
    }
    return run.model_copy(update=extra)


def _full_run(tenant: str) -> ActionRun:
    decided = ApprovalDecision(
        approver_id="lead-1",
        roles=("billing-lead", "ops"),
        decision=ApprovalVote.APPROVE,
        reason="fine — ok",
        at=T0 + timedelta(minutes=5),
        channel=Channel.CLI,
        via="os-user alice",
        digest="d" * 64,
    )
    return new_run(
        tenant,
        principal=Principal(id="agent-ü", roles=("billing", "admin")),
        channel=Channel.API,
        proposer_type=ProposerType.SERVICE,
        idempotency_key="key with spaces ~!",
        input={
            "invoice_id": "INV-42",
            "amount": 1234.5,
            "nested": {"list": [1, 2.25, None, True, "ß"], "empty": {}},
            "big": 2**53 + 1,
            "quote": 'it\'s "quoted" \\ and \u0000 nul',
        },
        input_hash="a" * 64,
        resource="invoice/INV-42",
        status=RunStatus.WAITING_APPROVAL,
        version=3,
        attempt=2,
        attempt_token="0123456789abcdef",
        executor_mode="sync",
        approval=ApprovalState(
            approval_id="ap-1",
            approver_roles=("billing-lead",),
            count=2,
            requested_at=T0,
            expires_at=T0 + timedelta(hours=24),
            decisions=(decided,),
            digest="d" * 64,
            reason="Over the limit 'daily' (per principal, 1d): 6 of 5 calls, over by 1 call.",
        ),
        duplicate_scope=scope(tenant, "key with spaces ~!"),
        duplicate_of=new_run_id(),
        result=ExecutionResult.failure(Code.ACTION_FAILED, "partly", output={"detail": ["x", 1]}),
        dispatched_at=T0 + timedelta(seconds=1),
        deadline_at=datetime(2026, 3, 2, 14, 0, 0, 999999, tzinfo=CEST),
        preview=PreviewRecord(
            output={"would_cancel": "INV-42", "open_balance": 1234.5, "note": "ü"},
            digest="d" * 64,
            at=T0 + timedelta(seconds=2),
        ),
        approved_input={"invoice_id": "INV-42", "amount": 1000.25},
        amendments=(
            Amendment(
                approver_id="lead-1",
                at=T0 + timedelta(minutes=4),
                changes={"amount": 1000.25},
                previous={"amount": 1234.5},
            ),
        ),
        limits_held=("daily", "tenant-hourly"),
        created_at=T0,
        updated_at=T0 + timedelta(microseconds=1),
    )
