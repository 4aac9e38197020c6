"""The runtime's observer port: facts about governed calls for logs, metrics and traces.

The core reports what happened — a call answered, a decision recorded, a stage run, a
compare-and-set lost — and never formats a log line or touches a metrics or tracing library.
``signoff.observability`` implements the port; the default observer does nothing.

An observer must not raise and must not block: it runs inline on the governed path.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from signoff.core.codes import Code
from signoff.core.proposal import ActionProposal
from signoff.core.registry import CompiledAction
from signoff.core.results import ActionOutcome

AttributeValue = str | int | float | bool
CATALOG = frozenset(str(code) for code in Code)


@dataclass(frozen=True, slots=True)
class CallReport:
    """One proposal answered (``duration_s``: from proposal to answer, this process's clock)."""

    run_id: str
    tenant_id: str
    action: str
    principal: str
    channel: str
    status: str
    code: str
    retry: str
    duration_s: float
    duplicate_of: str | None = None
    input: Mapping[str, Any] | None = None
    registered: bool = False
    """``action`` is a registered action's id (not a name a client made up)."""
    own_code: bool = False
    """``code`` is one of signoff's catalog codes or one the registered action declares."""


@dataclass(frozen=True, slots=True)
class DecisionReport:
    """One approver's decision handled. ``waited_s``: since approval was requested, when this
    decision settled the run (quorum reached, rejected); ``None`` while still waiting."""

    run_id: str
    tenant_id: str
    action: str
    approver: str
    vote: str
    code: str
    accepted: bool
    status: str
    duration_s: float
    waited_s: float | None = None
    registered: bool = False
    """``action`` is a registered action's id."""


class StageScope(Protocol):
    def set(self, **attributes: AttributeValue) -> None:
        """Facts learned during the stage (``code``, ``approval_required``, ``duplicate``…)."""
        ...


class RuntimeObserver(Protocol):
    def call_finished(self, report: CallReport) -> None: ...

    def decision(self, report: DecisionReport) -> None: ...

    def stage(self, name: str, run_id: str, action: str) -> Any:
        """A context manager yielding a ``StageScope`` around one pipeline stage."""
        ...

    def cas_conflict(self, operation: str) -> None: ...


class _NoScope:
    __slots__ = ()

    def set(self, **attributes: AttributeValue) -> None:
        return None


_NO_SCOPE = _NoScope()


class NoObserver:
    """Observes nothing, at the cost of a method call."""

    def call_finished(self, report: CallReport) -> None:
        return None

    def decision(self, report: DecisionReport) -> None:
        return None

    @contextmanager
    def stage(self, name: str, run_id: str, action: str) -> Iterator[StageScope]:
        yield _NO_SCOPE

    def cas_conflict(self, operation: str) -> None:
        return None


NO_OBSERVER = NoObserver()


def own_code(action: CompiledAction | None, code: str) -> bool:
    """``code`` is one of this server's own names: the catalog's, or declared by ``action``."""
    return code in CATALOG or (action is not None and action.declares(code))


def call_report(
    proposal: ActionProposal,
    outcome: ActionOutcome,
    duration_s: float,
    action: CompiledAction | None = None,
) -> CallReport:
    """What the observer hears of one call; ``action``: the registered action it resolved to."""
    return CallReport(
        run_id=outcome.run_id,
        tenant_id=proposal.tenant_id,
        action=proposal.action_id,
        principal=proposal.principal.id,
        channel=str(proposal.channel),
        status=str(outcome.status),
        code=str(outcome.code),
        retry=str(outcome.retry),
        duration_s=duration_s,
        duplicate_of=outcome.duplicate_of,
        input=proposal.input if isinstance(proposal.input, dict) else None,
        registered=action is not None,
        own_code=own_code(action, str(outcome.code)),
    )
