"""The one table of run-status transitions: everything it does not list is refused."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import product

import pytest

from signoff.core.run import (
    TERMINAL_STATUSES,
    TRANSITIONS,
    ActionRun,
    IllegalTransition,
    RunStatus,
)
from tests.helpers import bare_run

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _run(status: RunStatus) -> ActionRun:
    return bare_run(status=status)


@pytest.mark.parametrize(("current", "target"), list(product(RunStatus, RunStatus)))
def test_a_transition_is_allowed_exactly_when_the_table_lists_it(
    current: RunStatus, target: RunStatus
) -> None:
    run = _run(current)
    if target in TRANSITIONS[current]:
        assert run.advance(target, NOW).status is target
    else:
        with pytest.raises(IllegalTransition):
            run.advance(target, NOW)


def test_terminal_statuses_have_no_way_out() -> None:
    assert all(TRANSITIONS[status] == frozenset() for status in TERMINAL_STATUSES)
    assert {s for s in RunStatus if s.is_terminal} == TERMINAL_STATUSES


def test_advance_leaves_the_version_to_the_store() -> None:
    assert _run(RunStatus.REQUESTED).advance(RunStatus.VALIDATING, NOW).version == 1
