"""`signoff policy replay` on a SQLite history recorded by the real runtime: the report, its
exit statuses, masking, and that the database is exactly as it was afterwards."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
import sqlalchemy.exc
from typer.testing import CliRunner, Result

from signoff.cli import app
from signoff.core.short_ids import short_id
from signoff.store.sql import open_sql_store
from signoff.store.sql.history import read_only_engine
from tests.replay import history as recorded

runner = CliRunner()


@pytest.fixture
def database(tmp_path: Path) -> tuple[str, recorded.History]:
    path = tmp_path / "signoff.db"
    url = f"sqlite+aiosqlite:///{path}"

    async def record() -> recorded.History:
        store = await open_sql_store(url)
        try:
            registry = recorded.registry(recorded.manifests(tmp_path / "ran-under"))
            return await recorded.build(store, registry)
        finally:
            await store.close()

    return url, asyncio.run(record())


def replay(url: str, directory: Path, *more: str) -> Result:
    args = ["policy", "replay", "--manifests", str(directory), "--database", url, *more]
    return runner.invoke(app, args, env={"COLUMNS": "200"})


def test_the_same_manifests_report_no_change_and_pass_fail_on_change(
    database: tuple[str, recorded.History], tmp_path: Path
) -> None:
    url, _ = database
    same = recorded.manifests(tmp_path / "same")
    result = replay(url, same, "--json", "--fail-on-change")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["totals"]["changed"] == 0
    assert record["totals"]["replayed"] == 15
    assert record["manifests"] == str(same)


def test_a_change_exits_3_with_fail_on_change_and_lists_each_run_with_its_rule(
    database: tuple[str, recorded.History], tmp_path: Path
) -> None:
    url, history = database
    stricter = recorded.manifests(tmp_path / "stricter", recorded.STRICTER_DENY)
    result = replay(url, stricter, "--fail-on-change")
    assert result.exit_code == 3, result.output
    text = result.stdout
    assert "Replayed 15 runs" in text and "11 unchanged, 4 would change" in text
    assert "allowed → denied at proposal (2 runs)" in text
    assert "policy.deny[0] (AMOUNT_TOO_HIGH): input.amount > 7000.0" in text
    assert short_id(history["amended"]) in text and short_id(history["small"]) not in text
    assert recorded.SECRET not in text and "••••••" in text
    assert replay(url, stricter).exit_code == 0  # without --fail-on-change: a report only


def test_the_json_report_masks_sensitive_fields(
    database: tuple[str, recorded.History], tmp_path: Path
) -> None:
    url, _ = database
    result = replay(url, recorded.manifests(tmp_path / "d", recorded.STRICTER_DENY), "--json")
    assert result.exit_code == 0, result.output
    assert recorded.SECRET not in result.stdout
    record = json.loads(result.stdout)
    assert record["totals"]["by_kind"] == {"allowed_to_denied": 2, "deny_code_changed": 2}


def test_runs_limits_the_runs_listed_and_counts_the_rest(
    database: tuple[str, recorded.History], tmp_path: Path
) -> None:
    url, _ = database
    raised = recorded.manifests(tmp_path / "raised", recorded.APPROVAL_RAISED)
    record = json.loads(replay(url, raised, "--json", "--runs", "2").stdout)
    [change] = record["actions"][0]["changes"]
    assert (change["count"], len(change["runs"]), change["more"]) == (7, 2, 5)


def test_an_action_filter_and_a_time_range(
    database: tuple[str, recorded.History], tmp_path: Path
) -> None:
    url, _ = database
    tightened = recorded.manifests(tmp_path / "t", recorded.SPEND_TIGHTENED)
    start = recorded.START.replace(minute=35).isoformat()
    more = ["--json", "--action", "invoice.pay", "--from", start]
    record = json.loads(replay(url, tightened, *more).stdout)
    assert record["totals"]["replayed"] == 2 and record["totals"]["changed"] == 1
    other = json.loads(replay(url, tightened, "--json", "--action", "invoice.nope").stdout)
    assert other["totals"]["replayed"] == 0


@pytest.mark.parametrize(
    ("more", "code", "status"),
    [
        (["--since", "7d", "--from", "2026-01-01T00:00:00Z"], "INVALID_ARGUMENT", 2),
        (["--since", "soon"], "INVALID_ARGUMENT", 2),
        (["--to", "yesterday"], "INVALID_ARGUMENT", 2),
    ],
)
def test_bad_arguments_are_refused_with_a_code(
    database: tuple[str, recorded.History],
    tmp_path: Path,
    more: list[str],
    code: str,
    status: int,
) -> None:
    url, _ = database
    result = replay(url, recorded.manifests(tmp_path / "m"), *more)
    assert result.exit_code == status
    assert result.stderr.strip().endswith(f"[{code}]")


def test_a_missing_database_is_refused_and_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    result = replay(f"sqlite+aiosqlite:///{missing}", recorded.manifests(tmp_path / "m"))
    assert result.exit_code == 1
    assert result.stderr.strip().endswith("[DATABASE_NOT_FOUND]")
    assert not missing.exists()


def _snapshot(path: Path) -> tuple[dict[str, list[tuple[object, ...]]], dict[str, str]]:
    """Every row of every table, and the bytes of the database and its WAL."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [
            row[0]
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        rows = {
            name: sorted(connection.execute(f'SELECT * FROM "{name}"').fetchall(), key=repr)
            for name in names
        }
    finally:
        connection.close()
    files = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (path, path.with_name(path.name + "-wal"))
        if p.exists()
    }
    return rows, files


def test_a_replay_writes_nothing(database: tuple[str, recorded.History], tmp_path: Path) -> None:
    url, _ = database
    path = tmp_path / "signoff.db"
    before = _snapshot(path)
    assert sum(len(rows) for rows in before[0].values()) > 50
    for text in (recorded.BASE, recorded.SPEND_TIGHTENED, recorded.RENAMED):
        directory = recorded.manifests(tmp_path / f"m{hash(text)}", text)
        assert replay(url, directory, "--json").exit_code == 0
    assert _snapshot(path) == before


def test_the_replays_connections_cannot_write(database: tuple[str, recorded.History]) -> None:
    """The view is read-only at the database: a write through its engine fails."""
    url, _ = database

    async def attempt() -> None:
        engine = read_only_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.execute(sa.text("DELETE FROM signoff_runs"))
        finally:
            await engine.dispose()

    with pytest.raises(sqlalchemy.exc.OperationalError) as refused:
        asyncio.run(attempt())
    assert getattr(refused.value.orig, "sqlite_errorcode", None) == sqlite3.SQLITE_READONLY


def test_manifests_that_do_not_load_are_refused_with_their_code(
    database: tuple[str, recorded.History], tmp_path: Path
) -> None:
    url, _ = database
    broken = recorded.manifests(tmp_path / "broken", recorded.BASE.replace("risk: high", "risk: 9"))
    result = replay(url, broken, "--json")
    assert result.exit_code == 1
    assert result.stderr.strip().endswith("[MANIFEST_INVALID]")
    assert result.stdout == ""
