"""Migration 0003 adds the chain without rewriting history: older events become pre-chain."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command

from signoff.audit.checkpoints import all_checkpoints, checkpoint_heads, signature_valid
from signoff.audit.keys import HMAC_SHA256 as HMAC
from signoff.audit.keys import KeyRing
from signoff.audit.verify import verify_trail
from signoff.core.chain import GENESIS, checkpoint_message, link
from signoff.core.ports import AuditEvent, ChainHead
from signoff.store.sql import create_engine, open_sql_store, upgrade_database
from signoff.store.sql.migrate import alembic_config

OLD = datetime(2026, 1, 1, tzinfo=UTC).replace(tzinfo=None)
KEYS = KeyRing.parse(
    {
        "signing_key": "k",
        "keys": [{"id": "k", "algorithm": HMAC, "secret": base64.b64encode(b"k" * 32).decode()}],
    },
    base=Path("."),
)


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


async def test_checkpoints_signed_before_migration_0008_keep_verifying_and_round_1_lists_them(
    empty_url: str,
) -> None:
    await _upgrade_to(empty_url, "0007")
    at = datetime(2026, 6, 1, tzinfo=UTC)
    [event] = link(
        ChainHead("acme", 0, GENESIS),
        [AuditEvent(run_id="old", tenant_id="acme", kind="proposed", at=at, status="REQUESTED")],
    )
    await _raw(
        empty_url,
        "INSERT INTO signoff_audit_events (run_id, tenant_id, kind, at, status, chain_seq, "
        "prev_hash, hash) VALUES ('old', 'acme', 'proposed', :at, 'REQUESTED', 1, :prev, :hash)",
        at=at.replace(tzinfo=None),
        prev=GENESIS,
        hash=event.hash,
    )
    await _raw(
        empty_url,
        "INSERT INTO signoff_audit_heads (tenant_id, chain_seq, head_hash) VALUES ('acme', 1, :h)",
        h=event.hash,
    )
    signature = KEYS.signer.sign(checkpoint_message("acme", 1, event.hash or "", at, "k", HMAC))
    await _raw(
        empty_url,
        "INSERT INTO signoff_audit_checkpoints (tenant_id, chain_seq, head_hash, at, key_id, "
        "algorithm, signature) VALUES ('acme', 1, :h, :at, 'k', :alg, :sig)",
        h=event.hash,
        at=at.replace(tzinfo=None),
        alg=HMAC,
        sig=signature,
    )
    await upgrade_database(empty_url)
    store = await open_sql_store(empty_url, upgrade=False)
    try:
        [old] = await all_checkpoints(store)
        assert (old.round, signature_valid(old, KEYS)) == (None, True)
        outcome = await checkpoint_heads(store, KEYS, datetime.now(UTC))
        assert (outcome.round, outcome.checkpoints) == (1, [])  # acme's head did not move
        async with store.unit() as unit:
            [first] = await unit.audit.rounds()
        assert first.heads == (ChainHead("acme", 1, event.hash or ""),)
        report = await verify_trail(store, KEYS)
        assert [p for p in report.problems if not p.where.startswith("run ")] == []
        assert (report.checkpoints, report.rounds) == (1, 1)
    finally:
        await store.close()
