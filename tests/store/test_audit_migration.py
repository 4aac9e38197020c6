"""Migration 0003 adds the chain without rewriting history: older events become pre-chain."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import command

from signoff.audit.verify import verify_trail
from signoff.core.ports import AuditEvent
from signoff.store.sql import create_engine, open_sql_store, upgrade_database
from signoff.store.sql.migrate import alembic_config

OLD = datetime(2026, 1, 1, tzinfo=UTC).replace(tzinfo=None)


async def _upgrade_to(url: str, revision: str) -> None:
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:

            def upgrade(sync_conn: Any) -> None:
                config = alembic_config()
                config.attributes["connection"] = sync_conn
                command.upgrade(config, revision)

            await conn.run_sync(upgrade)
    finally:
        await engine.dispose()


async def _raw(url: str, statement: str, **params: Any) -> None:
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(sa.text(statement), params)
    finally:
        await engine.dispose()


async def test_events_from_before_the_chain_are_kept_as_pre_chain_and_the_chain_starts_after(
    empty_url: str,
) -> None:
    await _upgrade_to(empty_url, "0002")
    for kind in ("proposed", "refused"):
        await _raw(
            empty_url,
            "INSERT INTO signoff_audit_events (run_id, tenant_id, kind, at, status) "
            "VALUES ('old-run', 'acme', :kind, :at, 'DENIED')",
            kind=kind,
            at=OLD,
        )
    await upgrade_database(empty_url)
    store = await open_sql_store(empty_url, upgrade=False)
    try:
        async with store.unit() as unit:
            assert await unit.audit.pre_chain_through() == 2
            await unit.audit.append(
                [AuditEvent(run_id="new", tenant_id="acme", kind="proposed", at=datetime.now(UTC))]
            )
        async with store.unit() as unit:
            events = await unit.audit.scan()
        assert [(e.kind, e.chain_seq, e.hash is None) for e in events] == [
            ("proposed", None, True),
            ("refused", None, True),
            ("proposed", 1, False),
        ]
        report = await verify_trail(store)
        assert report.pre_chain == 2
        assert report.events == 3
        chain_problems = [p for p in report.problems if p.where.startswith("event")]
        assert chain_problems == []
        # An unchained event written after the cut-off is an insertion, not history.
        await _raw(
            empty_url,
            "INSERT INTO signoff_audit_events (run_id, tenant_id, kind, at, status) "
            "VALUES ('new', 'acme', 'approval_recorded', :at, 'DENIED')",
            at=OLD,
        )
        report = await verify_trail(store)
        chain_problems = [p for p in report.problems if p.where.startswith("event")]
        assert [(p.seq, p.problem) for p in chain_problems] == [
            (4, "has no chain link: inserted outside the chain")
        ]
    finally:
        await store.close()
