"""Each thing ``check_trail`` finds wrong with a run's trail carries a stable code."""

from __future__ import annotations

import dataclasses

from signoff.audit_check import AuditProblemCode, check_trail
from signoff.core.audit_events import AuditKind
from signoff.core.ports import AuditEvent
from signoff.core.run import ActionRun, RunStatus
from tests.helpers import NO_APPROVAL, SMALL, Recorder, definition, memory_runtime, proposal


async def _executed() -> tuple[ActionRun, list[AuditEvent]]:
    runtime = memory_runtime(definition(Recorder(), approval=NO_APPROVAL))
    outcome = await runtime.propose(proposal(SMALL))
    run = await runtime.get_run(outcome.run_id, "acme")
    assert run is not None and run.status is RunStatus.SUCCEEDED
    return run, await runtime.audit_trail(run.run_id, "acme")


def _codes(run: ActionRun, events: list[AuditEvent]) -> set[AuditProblemCode]:
    return {problem.code for problem in check_trail(run, events)}


async def test_a_governed_trail_has_no_problems_and_speaks_the_kind_vocabulary() -> None:
    run, events = await _executed()
    assert check_trail(run, events) == []
    assert {e.kind for e in events} <= set(AuditKind)


async def test_every_problem_of_a_damaged_trail_is_named_by_its_code() -> None:
    run, events = await _executed()
    first, *rest = events
    assert _codes(run, []) == {AuditProblemCode.NO_EVENTS}
    assert _codes(run, rest) >= {AuditProblemCode.NOT_OPENED_BY_PROPOSAL}
    assert _codes(run, [first, *reversed(rest)]) >= {AuditProblemCode.OUT_OF_ORDER}
    foreign = dataclasses.replace(rest[0], tenant_id="globex")
    assert _codes(run, [first, foreign, *rest[1:]]) == {AuditProblemCode.FOREIGN_EVENT}
    garbled = dataclasses.replace(rest[0], status="NOPE")
    assert AuditProblemCode.UNKNOWN_STATUS in _codes(run, [first, garbled, *rest[1:]])
    back = dataclasses.replace(events[-1], status=str(RunStatus.REQUESTED), seq=None)
    assert AuditProblemCode.FORBIDDEN_MOVE in _codes(run, [*events, back])
    assert AuditProblemCode.STATUS_MISMATCH in _codes(run, events[:-1])
    again = dataclasses.replace(events[-1], seq=None)
    assert AuditProblemCode.ENDED_TWICE in _codes(run, [*events, again])
