"""Start-up recovery says in one structured line what it did."""

from __future__ import annotations

import logging

import pytest

from signoff.app import log_recovery
from signoff.core.recovery import RecoveryReport


def test_recovery_that_acted_warns_with_the_run_ids_it_touched(
    caplog: pytest.LogCaptureFixture,
) -> None:
    report = RecoveryReport(expired=2, orphaned=1, redispatched=["r-1"], interrupted=["r-2", "r-3"])
    with caplog.at_level(logging.INFO, logger="signoff"):
        log_recovery(report)
    (record,) = [r for r in caplog.records if r.getMessage().startswith("recovery:")]
    assert record.levelno == logging.WARNING
    assert record.getMessage() == "recovery: 1 re-dispatched, 2 interrupted, 2 expired, 1 orphaned"
    fields = record.__dict__
    assert (fields["redispatched"], fields["interrupted"]) == (["r-1"], ["r-2", "r-3"])
    assert (fields["expired"], fields["orphaned"], fields["skipped"]) == (2, 1, 0)


def test_recovery_with_nothing_to_do_says_so_at_info(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="signoff"):
        log_recovery(RecoveryReport())
    (record,) = [r for r in caplog.records if r.getMessage().startswith("recovery:")]
    assert record.levelno == logging.INFO
