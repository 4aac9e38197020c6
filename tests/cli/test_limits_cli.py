"""`signoff limits usage`: each limit's usage for a subject, from the database."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from signoff.cli import app
from signoff.core.limits import LimitCheck, reserve
from signoff.manifest import load_manifests
from signoff.store.factory import open_store
from tests.manifest.support import write
from tests.manifest.test_limits import with_limits

runner = CliRunner()


def test_usage_shows_calls_and_sum_of_each_limit_for_the_subject(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    write(manifests, "a.yaml", with_limits())
    [action] = load_manifests(manifests, environ={}).actions
    specs = action.compiled.definition.limits
    db = tmp_path / "signoff.db"

    async def spend() -> None:
        store = await open_store(f"sqlite+aiosqlite:///{db}")
        try:
            for n, amount in enumerate((100.0, 250.0)):
                checks = [
                    LimitCheck(specs[0], "demo.act", "acme", "agent-1", amount),
                    LimitCheck(specs[1], "demo.act", "acme", "acme", amount),
                ]
                async with store.unit() as unit:
                    await reserve(unit.limits, checks, f"run-{n}", datetime.now(UTC))
        finally:
            await store.close()

    asyncio.run(spend())
    base = ["limits", "usage", "--database", f"sqlite+aiosqlite:///{db}"]
    base += ["--manifests", str(manifests), "--action", "demo.act", "--tenant", "acme"]
    result = runner.invoke(app, [*base, "--principal", "agent-1", "--json"])
    assert result.exit_code == 0, result.output
    records = {r["limit"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert (records["daily-refunds"]["count"], records["daily-refunds"]["sum"]) == (2, 350.0)
    assert records["daily-refunds"]["sum_max"] == 1000.0
    assert (records["tenant-hourly"]["count"], records["tenant-hourly"]["count_max"]) == (2, 50)
    other = runner.invoke(app, [*base, "--principal", "agent-2", "--json"])
    assert json.loads(other.stdout.splitlines()[0])["count"] == 0
    table = runner.invoke(app, [*base, "--principal", "agent-1"], env={"COLUMNS": "200"})
    assert "350 of 1000" in table.stdout


def test_usage_of_an_unknown_action_is_refused_with_its_code(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    write(manifests, "a.yaml", with_limits())
    result = runner.invoke(
        app,
        ["limits", "usage", "--manifests", str(manifests), "--action", "nope", "--tenant", "t"],
    )
    assert result.exit_code == 1
    assert "[ACTION_NOT_REGISTERED]" in result.stderr
