"""signoff: a governed MCP server for business actions.

What executor and guard authors import::

    from signoff import ExecutionContext, ExecutionResult, GuardDecision

The names below load on first use (PEP 562 ``__getattr__``), so ``import signoff`` (and every
``signoff`` command's start-up, which imports this package first) costs nothing until one is used.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from signoff.core.codes import Code, ExecutionStatus, RetryDisposition
    from signoff.core.definition import (
        ActionDefinition,
        ApprovalSpec,
        DenyRule,
        DuplicateVisibility,
        Effect,
        ExecutorMode,
        IdempotencySpec,
        KeyRequirement,
        PolicySpec,
        ResultMapping,
        Risk,
    )
    from signoff.core.identity import Channel, Principal, ProposerType
    from signoff.core.proposal import ActionProposal
    from signoff.core.results import (
        ActionOutcome,
        ExecutionContext,
        ExecutionResult,
        GuardDecision,
    )
    from signoff.core.run import ActionRun, RunStatus

# Each public name and the module that defines it.
_HOMES = {
    "Code": "signoff.core.codes",
    "ExecutionStatus": "signoff.core.codes",
    "RetryDisposition": "signoff.core.codes",
    "ActionDefinition": "signoff.core.definition",
    "ApprovalSpec": "signoff.core.definition",
    "DenyRule": "signoff.core.definition",
    "DuplicateVisibility": "signoff.core.definition",
    "Effect": "signoff.core.definition",
    "ExecutorMode": "signoff.core.definition",
    "IdempotencySpec": "signoff.core.definition",
    "KeyRequirement": "signoff.core.definition",
    "PolicySpec": "signoff.core.definition",
    "ResultMapping": "signoff.core.definition",
    "Risk": "signoff.core.definition",
    "Channel": "signoff.core.identity",
    "Principal": "signoff.core.identity",
    "ProposerType": "signoff.core.identity",
    "ActionProposal": "signoff.core.proposal",
    "ActionOutcome": "signoff.core.results",
    "ExecutionContext": "signoff.core.results",
    "ExecutionResult": "signoff.core.results",
    "GuardDecision": "signoff.core.results",
    "ActionRun": "signoff.core.run",
    "RunStatus": "signoff.core.run",
}

__all__ = [
    "ActionDefinition",
    "ActionOutcome",
    "ActionProposal",
    "ActionRun",
    "ApprovalSpec",
    "Channel",
    "Code",
    "DenyRule",
    "DuplicateVisibility",
    "Effect",
    "ExecutionContext",
    "ExecutionResult",
    "ExecutionStatus",
    "ExecutorMode",
    "GuardDecision",
    "IdempotencySpec",
    "KeyRequirement",
    "PolicySpec",
    "Principal",
    "ProposerType",
    "ResultMapping",
    "RetryDisposition",
    "Risk",
    "RunStatus",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'signoff' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
