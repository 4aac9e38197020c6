"""Executors and guards that answer outside what their manifest declares (typed-output tests)."""

from __future__ import annotations

from typing import Any

from signoff import ExecutionContext, ExecutionResult, GuardDecision


def by_input(context: ExecutionContext) -> ExecutionResult | dict[str, Any]:
    """Answers as ``input.answer`` says: a declared shape, another shape, or some code."""
    answer = context.input.get("note", "")
    if answer == "wrong-shape":
        return {"refund_id": "R-1"}
    if answer.startswith("code:"):
        return ExecutionResult.permanent_failure(answer.removeprefix("code:"), "refused")
    return {"echo": dict(context.input)}


def deny_undeclared(context: ExecutionContext) -> GuardDecision:
    if context.input.get("note") == "guard":
        return GuardDecision.deny("INVOICE_LOCKED_BY_ERP", "locked")
    return GuardDecision.allow()
