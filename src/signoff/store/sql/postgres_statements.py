"""PostgreSQL: the statements of the ledger's two hot units (``postgres_unit.py``).

**Settle** ("compare-and-set; if it won, complete, release and audit", ``SettlingUnit``) and
**create reserved** ("reserve the scope; if that won, create the run with its audit",
``ReservingUnit``), every governed call's two units, each in two forms:

- After a head assumed from this store's last commit (``postgres_heads.py``), ONE statement:
  ``FAST_SETTLE`` - the compare-and-set, and each only if it matched a row, the reservation's
  completion, the release of the run's limit reservations, the head's move and the chained
  rows; ``FAST_CREATE`` - the reservation (``ON CONFLICT DO NOTHING``), only if it inserted the
  run (``ON CONFLICT DO NOTHING``), only if that inserted the head's move and the rows. The
  head moves only if it is still exactly the assumed one (``WHERE chain_seq = :assumed AND
  head_hash = :assumed``, re-checked on the latest row after its lock), and the rows go in only
  if it moved; each answers what happened, so a moved head has appended nothing.
- Otherwise, two: ``SETTLE`` / ``RESERVE`` take the head's lock (``ON CONFLICT DO UPDATE`` of
  the head row, which returns it) only if the compare-and-set won or the reservation inserted;
  the rows follow (``audit.append_at_head``). ``LOCK_HEAD`` locks a head without moving it.

Lock order is the ordinary one in every form: the run row or the reservation first (the head's
statement refers to them, so it runs after them), the chain head last. Nothing is written when
the compare-and-set is lost or the scope is taken.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.selectable import Select

from signoff.core.chain import GENESIS
from signoff.core.ports import DuplicateState
from signoff.store.sql.audit import events_where
from signoff.store.sql.statements import run_compare_and_set
from signoff.store.sql.tables import audit_heads, duplicates, limit_reservations, runs


def _settle_writes() -> tuple[Any, Any, Any]:
    """The compare-and-set and, each only if it matched a row, completion and release."""
    run_id = sa.bindparam("b_run_id", type_=runs.c.run_id.type)
    cas = run_compare_and_set(run_id).returning(runs.c.tenant_id).cte("signoff_cas")
    won = sa.exists(sa.select(cas.c.tenant_id))
    completed = (
        sa.update(duplicates)
        .where(
            duplicates.c.scope_hash == sa.bindparam("b_scope_hash"),
            duplicates.c.owner_run_id == run_id,
            duplicates.c.state == DuplicateState.RUNNING.value,
            won,
        )
        .values(
            state=DuplicateState.COMPLETED.value,
            result=sa.bindparam("b_result"),
            completed_at=sa.bindparam("b_completed_at", type_=duplicates.c.completed_at.type),
        )
        .cte("signoff_completed")
    )
    released = (
        sa.delete(limit_reservations)
        .where(
            limit_reservations.c.run_id == run_id,
            sa.bindparam("b_release", type_=sa.Boolean()),
            won,
        )
        .cte("signoff_released")
    )
    return cas, completed, released


def _settle_statement() -> Select[Any]:
    cas, completed, released = _settle_writes()
    lock = postgresql.insert(audit_heads).from_select(
        ["tenant_id", "chain_seq", "head_hash"],
        sa.select(cas.c.tenant_id, sa.literal(0, sa.BigInteger()), sa.literal(GENESIS)),
    )
    head = (
        lock.on_conflict_do_update(
            index_elements=["tenant_id"], set_={"chain_seq": audit_heads.c.chain_seq}
        )
        .returning(audit_heads.c.chain_seq, audit_heads.c.head_hash)
        .cte("signoff_head")
    )
    return sa.select(head.c.chain_seq, head.c.head_hash).add_cte(completed, released)


SETTLE = _settle_statement()


def _reservation() -> Any:
    """The reservation's insert (``d_*`` parameters) if its scope is free, as a CTE."""
    return (
        postgresql.insert(duplicates)
        .values({c.name: sa.bindparam(f"d_{c.name}", type_=c.type) for c in duplicates.columns})
        .on_conflict_do_nothing(index_elements=["scope_hash"])
        .returning(duplicates.c.scope_hash)
        .cte("signoff_reserved")
    )


def _reserve_statement() -> Select[Any]:
    reserved = _reservation()
    lock = postgresql.insert(audit_heads).from_select(
        ["tenant_id", "chain_seq", "head_hash"],
        sa.select(
            sa.bindparam("b_tenant", type_=audit_heads.c.tenant_id.type),
            sa.literal(0, sa.BigInteger()),
            sa.literal(GENESIS),
        ).select_from(reserved),
    )
    head = (
        lock.on_conflict_do_update(
            index_elements=["tenant_id"], set_={"chain_seq": audit_heads.c.chain_seq}
        )
        .returning(audit_heads.c.chain_seq, audit_heads.c.head_hash)
        .cte("signoff_head")
    )
    return sa.select(head.c.chain_seq, head.c.head_hash)


RESERVE = _reserve_statement()


def _move_head(condition: sa.ColumnElement[bool]) -> Any:
    """The tenant's head moved to ``b_seq``/``b_hash`` if ``condition`` holds and it is still
    exactly ``b_old_seq``/``b_old_hash`` (re-checked on the latest row after its lock)."""
    return (
        sa.update(audit_heads)
        .where(
            audit_heads.c.tenant_id == sa.bindparam("b_tenant", type_=audit_heads.c.tenant_id.type),
            audit_heads.c.chain_seq
            == sa.bindparam("b_old_seq", type_=audit_heads.c.chain_seq.type),
            audit_heads.c.head_hash
            == sa.bindparam("b_old_hash", type_=audit_heads.c.head_hash.type),
            condition,
        )
        .values(
            chain_seq=sa.bindparam("b_seq", type_=audit_heads.c.chain_seq.type),
            head_hash=sa.bindparam("b_hash", type_=audit_heads.c.head_hash.type),
        )
        .returning(audit_heads.c.tenant_id)
        .cte("signoff_head")
    )


def _count(cte: Any, name: str) -> Any:
    return sa.select(sa.func.count()).select_from(cte).scalar_subquery().label(name)


def _fast_settle_statement() -> Select[Any]:
    """Settle after an assumed head: CAS, and if it won, completion, release, head, rows."""
    cas, completed, released = _settle_writes()
    head = _move_head(sa.exists(sa.select(cas.c.tenant_id)))
    rows = events_where(sa.exists(sa.select(head.c.tenant_id)))
    return sa.select(_count(cas, "won"), _count(head, "linked")).add_cte(completed, released, rows)


def _fast_create_statement() -> Select[Any]:
    """Create reserved after an assumed head: the reservation, and if it was free the run, and
    if that id was free the head and the rows."""
    reserved = _reservation()
    new_run = (
        postgresql.insert(runs)
        .from_select(
            [c.name for c in runs.columns],
            sa.select(
                *(sa.bindparam(f"r_{c.name}", type_=c.type) for c in runs.columns)
            ).select_from(reserved),
        )
        .on_conflict_do_nothing(index_elements=["run_id"])
        .returning(runs.c.run_id)
        .cte("signoff_new_run")
    )
    head = _move_head(sa.exists(sa.select(new_run.c.run_id)))
    rows = events_where(sa.exists(sa.select(head.c.tenant_id)))
    return sa.select(
        _count(reserved, "reserved"), _count(new_run, "created"), _count(head, "linked")
    ).add_cte(rows)


def _lock_head_statement() -> Any:
    """Lock the tenant's head (created at the genesis if it has none) without moving it."""
    lock = postgresql.insert(audit_heads).values(
        tenant_id=sa.bindparam("b_tenant", type_=audit_heads.c.tenant_id.type),
        chain_seq=sa.literal(0, sa.BigInteger()),
        head_hash=sa.literal(GENESIS),
    )
    return lock.on_conflict_do_update(
        index_elements=["tenant_id"], set_={"chain_seq": audit_heads.c.chain_seq}
    ).returning(audit_heads.c.chain_seq, audit_heads.c.head_hash)


FAST_SETTLE = _fast_settle_statement()
FAST_CREATE = _fast_create_statement()
LOCK_HEAD = _lock_head_statement()
