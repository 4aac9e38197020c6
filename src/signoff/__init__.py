"""signoff: a governed MCP server for business actions.

What executor and guard authors import::

    from signoff import ExecutionContext, ExecutionResult, GuardDecision
"""

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
from signoff.core.results import ActionOutcome, ExecutionContext, ExecutionResult, GuardDecision
from signoff.core.run import ActionRun, RunStatus

__version__ = "0.1.0"

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
