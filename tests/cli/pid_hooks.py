"""An executor that reports which process ran it and what that process's environment holds."""

from __future__ import annotations

import os
from typing import Any

from signoff import ExecutionContext, GuardDecision


def send(context: ExecutionContext) -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "to": context.input["to"],
        # Set only in the operator's shell by the test: it must never reach the executor.
        "payments_token": os.environ.get("PAYMENTS_TOKEN"),
    }


def refuse_blocked(context: ExecutionContext) -> GuardDecision:
    """Refuses payments to "Blocked Ltd" immediately before dispatch (after any approval)."""
    if context.input["to"] == "Blocked Ltd":
        return GuardDecision.deny("PAYEE_BLOCKED", "The payee is blocked.")
    return GuardDecision.allow()
