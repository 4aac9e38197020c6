"""Policy replay over a history recorded by the real runtime, on memory, SQLite and PostgreSQL:
the same manifests change nothing; each edit changes exactly the runs it should, with the
rule that decided."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
import sqlalchemy as sa
import sqlalchemy.exc
from sqlalchemy.ext.asyncio import create_async_engine

from signoff.core.replay import ReplayReport, ReplayScope
from signoff.core.visibility import MASK
from signoff.store.sql.history import read_only_engine
from tests.replay import history as recorded
from tests.replay.conftest import Recorded

READ_ONLY_SQL_TRANSACTION = "25006"
ALL = 15  # the runs ``build`` replays (the screened one is not stored as it was sent)


def runs_of(report: ReplayReport, kind: str, stage: str = "proposal") -> dict[str, Any]:
    """Run id -> its line, over every group of ``kind`` at ``stage``."""
    found: dict[str, Any] = {}
    for action in report.record()["actions"]:
        for change in action["changes"]:
            if change["kind"] == kind and change["stage"] == stage:
                assert change["more"] == 0
                found.update({line["run_id"]: line for line in change["runs"]})
    return found


def rules_of(report: ReplayReport, kind: str) -> set[str]:
    return {
        change["rule"]
        for action in report.record()["actions"]
        for change in action["changes"]
        if change["kind"] == kind
    }


async def test_the_manifests_it_ran_under_change_nothing(stored: Recorded) -> None:
    report = await stored.replay()
    record = report.record()
    assert (report.replayed, report.unchanged, report.changed) == (ALL, ALL, 0), record
    assert record["totals"]["not_replayed"] == {"input_not_stored": 1}
    assert record["actions"][0]["changes"] == []


async def test_a_stricter_deny_rule_denies_what_it_matches_and_changes_codes(
    stored: Recorded,
) -> None:
    report = await stored.replay(recorded.STRICTER_DENY, runs_per_change=50)
    h = stored.history
    denied = runs_of(report, "allowed_to_denied")
    assert h.names(set(denied)) == {"amended", "rejected"}
    assert {line["now"]["code"] for line in denied.values()} == {"AMOUNT_TOO_HIGH"}
    assert h.names(set(runs_of(report, "deny_code_changed"))) == {"huge", "overspend"}
    assert rules_of(report, "allowed_to_denied") == {
        "policy.deny[0] (AMOUNT_TOO_HIGH): input.amount > 7000.0"
    }
    assert report.changed == 4 and report.unchanged == ALL - 4


async def test_a_lowered_approval_threshold_newly_requires_approval(stored: Recorded) -> None:
    report = await stored.replay(recorded.APPROVAL_LOWERED, runs_per_change=50)
    newly = runs_of(report, "approval_newly_required")
    assert stored.history.names(set(newly)) == {"small", "fifth", "sixth"}
    assert rules_of(report, "approval_newly_required") == {"approval.when: input.amount > 50.0"}
    assert report.changed == 3


async def test_a_raised_approval_threshold_no_longer_requires_it(stored: Recorded) -> None:
    report = await stored.replay(recorded.APPROVAL_RAISED, runs_per_change=50)
    gone = runs_of(report, "approval_no_longer_required")
    names = {"large", "amended", "rejected", "o1", "o2", "o3", "o4"}
    assert stored.history.names(set(gone)) == names
    assert {line["now"]["outcome"] for line in gone.values()} == {"dispatch"}
    assert report.changed == len(names)


async def test_a_tightened_limit_is_measured_on_usage_rebuilt_in_time_order(
    stored: Recorded,
) -> None:
    """o2 is denied and then holds nothing, so o3 fits; o1 counts from its approval (50m), not
    its proposal (20m), so o4 does not."""
    report = await stored.replay(recorded.SPEND_TIGHTENED, runs_per_change=50)
    h = stored.history
    denied = runs_of(report, "allowed_to_denied")
    assert h.names(set(denied)) == {"o2", "o4", "rejected"}
    assert {tuple(line["now"]["limits"]) for line in denied.values()} == {("spend",)}
    assert h.names(set(runs_of(report, "limit_hit_appeared"))) == {"o2", "o4", "rejected"}
    assert rules_of(report, "allowed_to_denied") == {"limits.spend"}
    assert report.changed == 3


async def test_runs_of_an_action_no_longer_defined_are_reported_as_such(
    stored: Recorded,
) -> None:
    report = await stored.replay(recorded.OTHER_ACTION, runs_per_change=50)
    [action] = report.record()["actions"]
    assert (action["action"], action["defined"], action["changed"]) == ("invoice.pay", False, ALL)
    removed = runs_of(report, "action_removed")
    assert len(removed) == ALL
    assert {json.dumps(line["input"]) for line in removed.values()} == {"null"}


async def test_a_renamed_field_reports_the_stored_inputs_that_no_longer_validate(
    stored: Recorded,
) -> None:
    report = await stored.replay(recorded.RENAMED, runs_per_change=50)
    invalid = runs_of(report, "input_no_longer_valid")
    assert stored.history.names(set(invalid)) == set(stored.history.ids) - {"bad", "screened"}
    assert {line["now"]["code"] for line in invalid.values()} == {"INPUT_VALIDATION_FAILED"}
    assert report.unchanged == 1  # "bad" was refused by the schema already


async def test_sensitive_fields_stay_masked_in_the_report(stored: Recorded) -> None:
    report = await stored.replay(recorded.STRICTER_DENY, runs_per_change=50)
    text = json.dumps(report.record())
    assert recorded.SECRET not in text
    amended = runs_of(report, "allowed_to_denied")[stored.history["amended"]]
    assert amended["input"]["note"] == MASK
    assert amended["input"]["amount"] == 8000


async def test_a_range_reports_only_runs_proposed_in_it_with_usage_from_before(
    stored: Recorded,
) -> None:
    """From 35m on: o2 (30m) is not reported, but the usage it leaves still decides o3/o4."""
    since = recorded.START.replace(minute=35)
    scope = ReplayScope(since=since, tenant_id=stored.history.tenant)
    report = await stored.replay(recorded.SPEND_TIGHTENED, scope, runs_per_change=50)
    assert stored.history.names(set(runs_of(report, "allowed_to_denied"))) == {"o4"}
    assert report.replayed == 2  # o3 and o4


async def _rows(url: str) -> dict[str, list[str]]:
    """Every row of every signoff table, as text, read past the replay."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            names = await conn.run_sync(lambda c: sa.inspect(c).get_table_names())
            found = {}
            for name in sorted(n for n in names if n.startswith("signoff_")):
                rows = (await conn.execute(sa.text(f"SELECT * FROM {name}"))).all()
                found[name] = sorted(repr(tuple(row)) for row in rows)
            return found
    finally:
        await engine.dispose()


async def test_a_replay_leaves_every_table_as_it_was(stored_sql: Recorded) -> None:
    stored = stored_sql
    assert stored.url is not None
    before = await _rows(stored.url)
    assert len(before["signoff_audit_events"]) > 50
    for text in (recorded.BASE, recorded.SPEND_TIGHTENED, recorded.STRICTER_DENY):
        await stored.replay(text)
    assert await _rows(stored.url) == before


async def test_the_history_view_cannot_write_at_the_database(stored_sql: Recorded) -> None:
    assert stored_sql.url is not None
    engine = read_only_engine(stored_sql.url)
    try:
        with pytest.raises(sqlalchemy.exc.DBAPIError) as refused:
            async with engine.begin() as conn:
                await conn.execute(sa.text("DELETE FROM signoff_limit_reservations"))
    finally:
        await engine.dispose()
    orig = refused.value.orig
    readonly = getattr(orig, "sqlite_errorcode", None) == sqlite3.SQLITE_READONLY
    assert readonly or getattr(orig, "sqlstate", None) == READ_ONLY_SQL_TRANSACTION


class _Counting:
    """A ``History`` that records the size of every read it is asked for and answers."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.pages: list[tuple[int, int]] = []
        self.batches: list[int] = []

    async def events(self, after_seq: int, limit: int, tenant_id: str | None = None) -> Any:
        found = await self.inner.events(after_seq, limit, tenant_id)
        self.pages.append((limit, len(found)))
        return found

    async def runs(self, run_ids: Any) -> Any:
        self.batches.append(len(run_ids))
        return await self.inner.runs(run_ids)

    async def last_seq(self) -> int:
        return int(await self.inner.last_seq())

    async def close(self) -> None:
        await self.inner.close()


async def test_the_history_is_read_in_bounded_pages(stored_sql: Recorded) -> None:
    """On SQLite and PostgreSQL: every read asks for at most one page of events and at most
    one page's runs, and the report is the one an unpaged read gives."""
    from signoff.core.replay import replay

    page = 7
    reader = _Counting(await stored_sql.reader())
    registry = recorded.registry(recorded.manifests(stored_sql.tmp_path / "p", recorded.BASE))
    scope = ReplayScope(tenant_id=stored_sql.history.tenant)
    try:
        paged = await replay(reader, registry, scope, ReplayReport(), page=page)
    finally:
        await reader.close()
    assert len(reader.pages) > 5
    assert all(limit == page and got <= page for limit, got in reader.pages)
    assert reader.batches and max(reader.batches) <= page
    whole = await stored_sql.replay(recorded.BASE)
    assert paged.record() == whole.record()
