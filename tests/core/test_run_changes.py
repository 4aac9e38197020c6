"""A run's changes are typed: a misspelt or mistyped field is an error, never silently dropped."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mypy import api as mypy_api

from signoff.core.definition import ExecutorMode
from signoff.core.run import ActionRun, RunStatus
from tests.helpers import bare_run

ROOT = Path(__file__).resolve().parents[2]
AT = datetime(2026, 1, 2, tzinfo=UTC)

MISTAKES = """
from datetime import datetime
from signoff.core.run import ActionRun, RunStatus

def mistakes(run: ActionRun, at: datetime) -> None:
    run.advance(RunStatus.VALIDATING, at, executor_mod="sync")
    run.advance(RunStatus.VALIDATING, at, attempt="three")
    run.advance(RunStatus.VALIDATING, "2026-01-01", attempt=3)
"""


def test_the_type_checker_refuses_a_misspelt_or_mistyped_change(tmp_path: Path) -> None:
    sample = tmp_path / "mistakes.py"
    sample.write_text(MISTAKES)
    out, _err, status = mypy_api.run(
        ["--config-file", str(ROOT / "pyproject.toml"), "--no-error-summary", str(sample)]
    )
    assert status == 1
    lines = [line for line in out.splitlines() if "error:" in line]
    assert any('"executor_mod"' in line for line in lines), out
    assert any('"attempt"' in line and '"str"' in line for line in lines), out
    assert any('"at"' in line or "datetime" in line for line in lines), out
    assert len(lines) == 3, out


def test_an_unknown_change_is_refused_at_run_time_too() -> None:
    run = bare_run()
    changes: dict[str, Any] = {"executor_mod": "sync"}
    with pytest.raises(TypeError, match="executor_mod"):
        run.advance(RunStatus.VALIDATING, AT, **changes)


def test_the_executor_mode_is_an_enum_stored_as_before() -> None:
    run = bare_run().advance(RunStatus.VALIDATING, AT, executor_mode=ExecutorMode.ASYNC)
    assert run.executor_mode is ExecutorMode.ASYNC
    assert '"executor_mode":"async"' in run.model_dump_json()
    stored = run.model_dump_json()
    assert ActionRun.model_validate_json(stored).executor_mode is ExecutorMode.ASYNC
