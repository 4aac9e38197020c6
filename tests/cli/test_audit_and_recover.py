"""`signoff audit export|verify` and `signoff recover` against a real SQLite database."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from signoff.cli import app
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.demo import MANIFESTS as DEMO_MANIFESTS
from signoff.store.factory import open_store
from tests.helpers import Recorder, approve, definition, proposal

runner = CliRunner()


def _populate(db: Path) -> list[str]:
    async def work() -> list[str]:
        store = await open_store(f"sqlite+aiosqlite:///{db}")
        try:
            runtime = Runtime(ActionRegistry([definition(Recorder())]), store)
            ids = [
                (await runtime.propose(proposal({"invoice_id": "INV-1", "amount": 10}))).run_id,
                (await runtime.propose(proposal({"invoice_id": "INV-1", "amount": 10}))).run_id,
                (
                    await runtime.propose(proposal({"invoice_id": "X", "amount": 1}, key="k2"))
                ).run_id,
            ]
            pending = await runtime.propose(
                proposal({"invoice_id": "INV-2", "amount": 5000}, key="k3")
            )
            await runtime.decide(pending.run_id, "acme", approve())
            return [*ids, pending.run_id]
        finally:
            await store.close()

    return asyncio.run(work())


def test_audit_export_writes_every_event_as_a_json_line(tmp_path: Path) -> None:
    db = tmp_path / "signoff.db"
    run_ids = _populate(db)
    result = runner.invoke(app, ["audit", "export", "--database", f"sqlite+aiosqlite:///{db}"])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert {e["run_id"] for e in events} == set(run_ids)
    assert all(e["tenant_id"] == "acme" for e in events)
    assert sum(e["kind"] == "proposed" for e in events) == len(run_ids)


def test_audit_verify_passes_on_a_trail_the_runtime_wrote(tmp_path: Path) -> None:
    db = tmp_path / "signoff.db"
    _populate(db)
    result = runner.invoke(app, ["audit", "verify", "--database", f"sqlite+aiosqlite:///{db}"])
    assert result.exit_code == 0, result.output
    assert "consistent for 4 runs" in result.stdout


def test_audit_verify_fails_with_its_code_when_a_run_was_changed_behind_its_back(
    tmp_path: Path,
) -> None:
    db = tmp_path / "signoff.db"
    run_ids = _populate(db)
    with sqlite3.connect(db) as raw:  # the kind of repair the contract forbids
        raw.execute("UPDATE signoff_runs SET status = 'CANCELLED' WHERE run_id = ?", (run_ids[0],))
        raw.execute(
            "UPDATE signoff_runs SET data = json_set(data, '$.status', 'CANCELLED') "
            "WHERE run_id = ?",
            (run_ids[0],),
        )
    result = runner.invoke(app, ["audit", "verify", "--database", f"sqlite+aiosqlite:///{db}"])
    assert result.exit_code == 1
    assert "[AUDIT_INCONSISTENT]" in result.stderr
    assert f"{run_ids[0]}: last event says SUCCEEDED but the run is CANCELLED" in result.stderr


def test_recover_on_a_clean_database_reports_nothing_to_do(tmp_path: Path) -> None:
    db = tmp_path / "signoff.db"
    _populate(db)
    manifests = DEMO_MANIFESTS
    result = runner.invoke(
        app,
        [
            "recover",
            "--database",
            f"sqlite+aiosqlite:///{db}",
            "--manifests",
            str(manifests),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "expired": 0,
        "orphaned": 0,
        "redispatched": [],
        "handed_over": [],
        "interrupted": [],
        "skipped_live": 0,
    }
