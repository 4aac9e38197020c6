"""`signoff db ...` and `signoff runs list|show` against a real SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from signoff.cli import app
from signoff.core.clock import ManualClock
from signoff.core.registry import ActionRegistry
from signoff.core.results import ActionOutcome
from signoff.core.runtime import Runtime
from signoff.store.sql import head_revision, open_sql_store
from tests.helpers import NO_APPROVAL, Recorder, definition, proposal
from tests.store.conftest import run_isolated

runner = CliRunner()


@pytest.fixture
def database(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"


def seed(database: str, tenant: str, count: int) -> list[ActionOutcome]:
    async def work() -> list[ActionOutcome]:
        store = await open_sql_store(database)
        runtime = Runtime(
            ActionRegistry([definition(Recorder(), approval=NO_APPROVAL)]),
            store,
            clock=ManualClock(),
        )
        try:
            return [
                await runtime.propose(
                    proposal({"invoice_id": f"INV-{i}", "amount": i}, key=f"k{i}", tenant=tenant)
                )
                for i in range(count)
            ]
        finally:
            await store.close()

    return run_isolated(work)


def test_db_upgrade_creates_the_schema_and_is_idempotent(database: str) -> None:
    first = runner.invoke(app, ["db", "upgrade", "--database", database])
    assert first.exit_code == 0, first.output
    assert head_revision() in first.output
    second = runner.invoke(app, ["db", "upgrade", "--database", database])
    assert second.exit_code == 0
    assert "already" in second.output
    status = runner.invoke(app, ["db", "status", "--database", database])
    assert status.exit_code == 0


def test_db_status_fails_on_an_empty_database(database: str) -> None:
    result = runner.invoke(app, ["db", "status", "--database", database])
    assert result.exit_code == 1
    assert "[DATABASE_SCHEMA_OUT_OF_DATE]" in result.output


def test_the_database_url_comes_from_the_environment(database: str) -> None:
    result = runner.invoke(app, ["db", "upgrade"], env={"SIGNOFF_DATABASE_URL": database})
    assert result.exit_code == 0, result.output
    assert Path(database.removeprefix("sqlite+aiosqlite:///")).exists()


def test_runs_list_shows_runs_newest_first_and_filters_by_tenant(database: str) -> None:
    mine = seed(database, "acme", 3)
    seed(database, "other", 1)
    result = runner.invoke(
        app, ["runs", "list", "--database", database, "--tenant", "acme", "--json"]
    )
    assert result.exit_code == 0, result.output
    listed = json.loads(result.output)
    assert [r["run_id"] for r in listed] == [o.run_id for o in reversed(mine)]
    table = runner.invoke(app, ["runs", "list", "--database", database, "--status", "succeeded"])
    assert table.exit_code == 0
    assert "4 runs" in table.output


def test_runs_show_prints_the_run_and_its_audit_trail(database: str) -> None:
    (outcome,) = seed(database, "acme", 1)
    result = runner.invoke(app, ["runs", "show", outcome.run_id, "--database", database, "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["run"]["status"] == "SUCCEEDED"
    assert shown["audit"][0]["kind"] == "proposed"
    assert shown["audit"][-1]["code"] == "SUCCEEDED"
    table = runner.invoke(app, ["runs", "show", outcome.run_id, "--database", database])
    assert table.exit_code == 0
    assert outcome.run_id in table.output


def test_runs_show_answers_a_missing_or_foreign_run_with_not_found(database: str) -> None:
    (outcome,) = seed(database, "acme", 1)
    for args in (["no-such-run"], [outcome.run_id, "--tenant", "other"]):
        result = runner.invoke(app, ["runs", "show", *args, "--database", database])
        assert result.exit_code == 1
        assert "[ACTION_RUN_NOT_FOUND]" in result.output


def test_reading_a_database_that_does_not_exist_fails_without_creating_it(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "missing.db"
    result = runner.invoke(app, ["runs", "list", "--database", f"sqlite+aiosqlite:///{missing}"])
    assert result.exit_code == 1
    assert "[DATABASE_NOT_FOUND]" in result.output
    assert not missing.exists()


def test_an_unreachable_server_is_one_line_and_exit_one() -> None:
    url = "postgresql+asyncpg://nobody@127.0.0.1:1/none"
    result = runner.invoke(app, ["db", "upgrade", "--database", url])
    assert result.exit_code == 1
    assert result.output.strip().endswith("[DATABASE_UNAVAILABLE]")
    assert len(result.output.strip().splitlines()) == 1


def test_db_purge_forgets_only_old_completed_entries(database: str) -> None:
    seed(database, "acme", 2)  # completed at the manual clock's 2026-01-01
    result = runner.invoke(app, ["db", "purge", "--database", database, "--older-than", "1h"])
    assert result.exit_code == 0, result.output
    assert "purged 2" in result.output
    bad = runner.invoke(app, ["db", "purge", "--database", database, "--older-than", "soon"])
    assert bad.exit_code == 1
    assert "[INVALID_ARGUMENT]" in bad.output
