"""Hooks the test manifests point at (``tests.manifest.hooks:...``)."""

from __future__ import annotations

from typing import Any

from signoff import ExecutionContext, GuardDecision

NOT_CALLABLE = 42


def echo(context: ExecutionContext) -> dict[str, Any]:
    return {"echo": context.input}


async def allow(context: ExecutionContext) -> GuardDecision:
    return GuardDecision.allow()


def two_arguments(context: ExecutionContext, extra: int) -> dict[str, Any]:
    return {}


def stop(context: ExecutionContext) -> None:
    """A deferred action's cancel hook."""
