"""Every statement the stores run, built once per dialect so SQLAlchemy compiles each once.

Insert-or-nothing is what decides a race, so it must never abort the surrounding transaction:
PostgreSQL and SQLite use ``INSERT ... ON CONFLICT DO NOTHING`` and read the row count. MySQL has
no such clause that keeps a usable row count (``ON DUPLICATE KEY UPDATE`` reports 1 for a no-op
under the FOUND_ROWS flag SQLAlchemy sets, and ``INSERT IGNORE`` also silences truncation), so
there a plain ``INSERT`` is used: MySQL rolls back only the failed statement on a duplicate key,
never the transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.sql.dml import Delete, Insert, Update
from sqlalchemy.sql.selectable import Select

from signoff.core.chain import GENESIS
from signoff.core.ports import DuplicateState
from signoff.core.run import TERMINAL_STATUSES
from signoff.store.sql.tables import (
    PRE_CHAIN_THROUGH,
    audit_checkpoints,
    audit_events,
    audit_heads,
    audit_meta,
    audit_rounds,
    duplicates,
    limit_counters,
    limit_reservations,
    runs,
)

_TERMINAL = sorted(str(status) for status in TERMINAL_STATUSES)
# Literals, not an expanding IN: a statement's text stays the same for every call.
TERMINAL_LITERALS: list[sa.ColumnElement[Any]] = [sa.literal_column(f"'{s}'") for s in _TERMINAL]
_RUNNING = DuplicateState.RUNNING.value
_COMPLETED = DuplicateState.COMPLETED.value


@dataclass(frozen=True, slots=True)
class Statements:
    dialect: str
    # True: ``insert_*`` ignore a conflict and report it as row count 0 (PostgreSQL, SQLite).
    # False: they raise a duplicate-key error that leaves the transaction usable (MySQL).
    conflict_free_inserts: bool
    insert_run: Insert
    get_run: Select[Any]
    run_version: Select[Any]
    compare_and_set: Update
    insert_duplicate: Insert
    get_duplicate: Select[Any]
    complete_duplicate: Update
    release_duplicate: Delete
    purge_duplicates: Delete
    insert_audit: Insert
    audit_for_run: Select[Any]
    # Chain heads: ``bump_head`` inserts a tenant's head or advances it by ``b_count`` and takes
    # its row lock (SQLite: the write lock) until commit; with ``bump_returns`` it also returns
    # (chain_seq after the bump, hash before it), otherwise ``read_head`` reads them.
    bump_head: Insert
    bump_returns: bool
    read_head: Select[Any]
    set_head_hash: Update
    all_heads: Select[Any]
    pre_chain_through: Select[Any]
    insert_checkpoint: Insert
    # A round's row; like the other insert_* it ignores (SQLite, PostgreSQL) or raises on (MySQL)
    # a round number that is taken: the primary key decides between two instances.
    insert_round: Insert
    # Cumulative limits: ``lock_limit`` upserts the subject's counter row (its row lock, or
    # SQLite's write lock, is held until commit) before ``limit_usage`` reads the window.
    lock_limit: Insert
    limit_usage: Select[Any]
    limit_totals: Select[Any]
    hold_limit: Insert
    """Hold a run's reservation of a subject, or replace its amount and time (an amendment, the
    dispatch after approval): a reservation counts from the last time its limits were checked."""
    release_limits: Delete
    purge_limits: Delete


def _bump_head(dialect: str) -> Insert:
    row = {
        "tenant_id": sa.bindparam("b_tenant", type_=audit_heads.c.tenant_id.type),
        "chain_seq": sa.bindparam("b_count", type_=audit_heads.c.chain_seq.type),
        "head_hash": sa.literal(GENESIS),
    }
    if dialect in ("postgresql", "sqlite"):
        upsert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(audit_heads)
        upsert = upsert.values(row)
        return upsert.on_conflict_do_update(
            index_elements=["tenant_id"],
            set_={"chain_seq": audit_heads.c.chain_seq + upsert.excluded.chain_seq},
        ).returning(audit_heads.c.chain_seq, audit_heads.c.head_hash)
    mysql_upsert = mysql.insert(audit_heads).values(row)
    return mysql_upsert.on_duplicate_key_update(
        chain_seq=audit_heads.c.chain_seq + mysql_upsert.inserted.chain_seq
    )


def _lock_limit(dialect: str) -> Insert:
    row = {
        "limit_key": sa.bindparam("b_key", type_=limit_counters.c.limit_key.type),
        "touches": sa.literal(1, type_=sa.BigInteger()),
    }
    if dialect in ("postgresql", "sqlite"):
        upsert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(limit_counters)
        upsert = upsert.values(row)
        return upsert.on_conflict_do_update(
            index_elements=["limit_key"], set_={"touches": limit_counters.c.touches + 1}
        )
    return (
        mysql.insert(limit_counters)
        .values(row)
        .on_duplicate_key_update(touches=limit_counters.c.touches + 1)
    )


def run_compare_and_set(run_id: Any) -> Update:
    """``UPDATE runs ... WHERE run_id = :run_id AND version = :b_expected AND status NOT IN
    (terminal)``: a run's one compare-and-set (``b_status``, ``b_updated_at``, ``b_data``)."""
    expected = sa.bindparam("b_expected", type_=sa.Integer())
    return (
        sa.update(runs)
        .where(
            runs.c.run_id == run_id,
            runs.c.version == expected,
            runs.c.status.not_in(TERMINAL_LITERALS),
        )
        .values(
            status=sa.bindparam("b_status"),
            version=expected + 1,
            updated_at=sa.bindparam("b_updated_at", type_=runs.c.updated_at.type),
            data=sa.bindparam("b_data"),
        )
    )


def statements_for(dialect: str) -> Statements:
    insert_run: Insert
    insert_duplicate: Insert
    hold_limit: Insert
    insert_round: Insert
    if dialect == "postgresql":
        insert_round = postgresql.insert(audit_rounds).on_conflict_do_nothing(
            index_elements=["round"]
        )
        pg_hold = postgresql.insert(limit_reservations)
        hold_limit = pg_hold.on_conflict_do_update(
            index_elements=["limit_key", "run_id"],
            set_={"amount": pg_hold.excluded.amount, "reserved_at": pg_hold.excluded.reserved_at},
        )
        insert_run = postgresql.insert(runs).on_conflict_do_nothing(index_elements=["run_id"])
        insert_duplicate = postgresql.insert(duplicates).on_conflict_do_nothing(
            index_elements=["scope_hash"]
        )
    elif dialect == "sqlite":
        insert_round = sqlite.insert(audit_rounds).on_conflict_do_nothing(index_elements=["round"])
        lite_hold = sqlite.insert(limit_reservations)
        hold_limit = lite_hold.on_conflict_do_update(
            index_elements=["limit_key", "run_id"],
            set_={
                "amount": lite_hold.excluded.amount,
                "reserved_at": lite_hold.excluded.reserved_at,
            },
        )
        insert_run = sqlite.insert(runs).on_conflict_do_nothing(index_elements=["run_id"])
        insert_duplicate = sqlite.insert(duplicates).on_conflict_do_nothing(
            index_elements=["scope_hash"]
        )
    else:
        insert_round = sa.insert(audit_rounds)
        my_hold = mysql.insert(limit_reservations)
        hold_limit = my_hold.on_duplicate_key_update(
            amount=my_hold.inserted.amount, reserved_at=my_hold.inserted.reserved_at
        )
        insert_run = sa.insert(runs)
        insert_duplicate = sa.insert(duplicates)

    compare_and_set = run_compare_and_set(sa.bindparam("b_run_id"))
    owned_running = sa.and_(
        duplicates.c.scope_hash == sa.bindparam("b_scope_hash"),
        duplicates.c.owner_run_id == sa.bindparam("b_owner"),
        duplicates.c.state == _RUNNING,
    )
    return Statements(
        dialect=dialect,
        conflict_free_inserts=dialect in ("postgresql", "sqlite"),
        insert_run=insert_run,
        get_run=sa.select(runs.c.data).where(runs.c.run_id == sa.bindparam("b_run_id")),
        run_version=sa.select(runs.c.version).where(runs.c.run_id == sa.bindparam("b_run_id")),
        compare_and_set=compare_and_set,
        insert_duplicate=insert_duplicate,
        get_duplicate=sa.select(duplicates).where(
            duplicates.c.scope_hash == sa.bindparam("b_scope_hash")
        ),
        complete_duplicate=sa.update(duplicates)
        .where(owned_running)
        .values(
            state=_COMPLETED,
            result=sa.bindparam("b_result"),
            completed_at=sa.bindparam("b_completed_at", type_=duplicates.c.completed_at.type),
        ),
        release_duplicate=sa.delete(duplicates).where(owned_running),
        purge_duplicates=sa.delete(duplicates).where(
            duplicates.c.state == _COMPLETED,
            duplicates.c.completed_at
            < sa.bindparam("b_older_than", type_=duplicates.c.completed_at.type),
        ),
        insert_audit=sa.insert(audit_events),
        audit_for_run=sa.select(audit_events)
        .where(audit_events.c.run_id == sa.bindparam("b_run_id"))
        .order_by(audit_events.c.seq),
        bump_head=_bump_head(dialect),
        bump_returns=dialect in ("postgresql", "sqlite"),
        read_head=sa.select(audit_heads.c.chain_seq, audit_heads.c.head_hash).where(
            audit_heads.c.tenant_id == sa.bindparam("b_tenant")
        ),
        set_head_hash=sa.update(audit_heads)
        .where(audit_heads.c.tenant_id == sa.bindparam("b_tenant"))
        .values(head_hash=sa.bindparam("b_hash")),
        all_heads=sa.select(audit_heads).order_by(audit_heads.c.tenant_id),
        pre_chain_through=sa.select(audit_meta.c.value).where(
            audit_meta.c.name == PRE_CHAIN_THROUGH
        ),
        insert_checkpoint=sa.insert(audit_checkpoints),
        insert_round=insert_round,
        lock_limit=_lock_limit(dialect),
        limit_usage=sa.select(
            limit_reservations.c.run_id,
            limit_reservations.c.reserved_at,
            limit_reservations.c.amount,
        ).where(
            limit_reservations.c.limit_key == sa.bindparam("b_key"),
            limit_reservations.c.reserved_at
            > sa.bindparam("b_since", type_=limit_reservations.c.reserved_at.type),
        ),
        limit_totals=sa.select(
            sa.func.count(), sa.func.coalesce(sa.func.sum(limit_reservations.c.amount), 0.0)
        ).where(
            limit_reservations.c.limit_key == sa.bindparam("b_key"),
            limit_reservations.c.reserved_at
            > sa.bindparam("b_since", type_=limit_reservations.c.reserved_at.type),
            limit_reservations.c.run_id != sa.bindparam("b_run_id"),
        ),
        hold_limit=hold_limit,
        release_limits=sa.delete(limit_reservations).where(
            limit_reservations.c.run_id == sa.bindparam("b_run_id")
        ),
        purge_limits=sa.delete(limit_reservations).where(
            limit_reservations.c.reserved_at
            < sa.bindparam("b_older_than", type_=limit_reservations.c.reserved_at.type)
        ),
    )
