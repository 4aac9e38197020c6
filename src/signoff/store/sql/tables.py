"""The three tables, as SQLAlchemy Core metadata (the queries' view of the schema).

The schema itself is created and changed only by the Alembic migrations next to this module;
``tests/store/test_migrations.py`` checks that the migrations and these tables agree.

- ``signoff_runs``: one row per ``ActionRun``. A few columns are copied out of the run for
  queries; ``data`` holds the whole run as JSON so every field round-trips. ``version`` is the
  compare-and-set column.
- ``signoff_duplicates``: one row per duplicate scope. The primary key is a SHA-256 of the scope
  (tenant, action, key, visibility), so the database itself decides who reserves first. A hash
  rather than a four-column key because a resource identity has no length limit and MySQL cannot
  index four long ``utf8mb4`` columns; the four parts are stored beside it for people and queries.
- ``signoff_audit_events``: append-only, ordered by an auto-increment ``seq``; each event is a
  link of its tenant's hash chain (``chain_seq``, ``prev_hash``, ``hash``; unique per tenant).
- ``signoff_audit_heads``: one row per tenant, the chain's last link. Appending updates it in the
  same unit of work, and the row lock (SQLite: the database write lock) is what keeps concurrent
  writers from forking a chain.
- ``signoff_audit_checkpoints``: signed statements of chain heads (``signoff audit checkpoint``);
  ``round`` names the checkpoint round it was signed in (NULL: signed before rounds, v1).
- ``signoff_audit_rounds``: one row per checkpoint round, numbered 1, 2, 3 ... store-wide: the
  signed listing of every tenant's latest checkpointed head, chained to the round before. Its
  primary key is what decides between two instances checkpointing at once (migration 0008).
- ``signoff_audit_meta``: ``pre_chain_through_seq``, the last event written before the chain.
- ``signoff_limit_counters``: one row per cumulative-limit subject, upserted to take its row lock
  (SQLite: the write lock) before the subject's usage is read (``core/limits.reserve``).
- ``signoff_limit_reservations``: one row per (subject, run) holding a limit; usage in a window
  is counted and summed from these rows; a run that ends without executing deletes its rows.
- ``signoff_workers``: each runtime incarnation's last heartbeat, host, pid, process start time
  and liveness lock name, for crash recovery, and the definition revisions it holds (a fleet
  mid-upgrade hands an approval to an instance holding the revision it was approved under).
- ``signoff_approval_links``: one-time decision links, by the SHA-256 of their token.

MySQL/MariaDB tables use ``utf8mb4`` with the binary collation, so ids and tenants compare
exactly (case-sensitively) as they do everywhere else.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Dialect

RUNS = "signoff_runs"
DUPLICATES = "signoff_duplicates"
AUDIT = "signoff_audit_events"
WORKERS = "signoff_workers"
AUDIT_HEADS = "signoff_audit_heads"
AUDIT_CHECKPOINTS = "signoff_audit_checkpoints"
AUDIT_ROUNDS = "signoff_audit_rounds"
AUDIT_META = "signoff_audit_meta"
APPROVAL_LINKS = "signoff_approval_links"
LIMIT_COUNTERS = "signoff_limit_counters"
LIMIT_RESERVATIONS = "signoff_limit_reservations"
VERSION_TABLE = "signoff_alembic_version"

MYSQL_TABLE_ARGS: dict[str, Any] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}


class UTCDateTime(sa.TypeDecorator[datetime]):
    """Stored as naive UTC (microseconds everywhere), read back as an aware UTC ``datetime``."""

    impl = sa.DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name in ("mysql", "mariadb"):
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(sa.DateTime())

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are ambiguous; pass an aware datetime")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return value.replace(tzinfo=UTC) if value is not None else None


# TEXT is 64 KiB on MySQL; a run's JSON (input + output) may be larger.
LongText = sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")
# SQLite only auto-increments an INTEGER PRIMARY KEY.
BigSerial = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

metadata = sa.MetaData()

runs = sa.Table(
    RUNS,
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("tenant_id", sa.String(255), nullable=False),
    sa.Column("action_id", sa.String(255), nullable=False),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("version", sa.Integer(), nullable=False),
    sa.Column("principal_id", sa.String(255), nullable=False),
    # Text: a refused proposal is recorded with the (invalid, possibly long) key it carried.
    sa.Column("idempotency_key", sa.Text(), nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    sa.Column("data", LongText, nullable=False),
    sa.Index("ix_signoff_runs_tenant", "tenant_id", "run_id"),
    sa.Index("ix_signoff_runs_status", "status", "run_id"),
    # The pending list and status-filtered listings of one tenant (migration 0006).
    sa.Index("ix_signoff_runs_tenant_status", "tenant_id", "status", "run_id"),
    **MYSQL_TABLE_ARGS,
)

duplicates = sa.Table(
    DUPLICATES,
    metadata,
    sa.Column("scope_hash", sa.String(64), primary_key=True),
    sa.Column("tenant_id", sa.String(255), nullable=False),
    sa.Column("action_id", sa.String(255), nullable=False),
    sa.Column("idempotency_key", sa.String(255), nullable=False),
    sa.Column("visibility", sa.Text(), nullable=False),
    sa.Column("owner_run_id", sa.String(64), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("input_hash", sa.String(128), nullable=False),
    sa.Column("result", LongText, nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("completed_at", UTCDateTime(), nullable=True),
    sa.Index("ix_signoff_duplicates_purge", "state", "completed_at"),
    **MYSQL_TABLE_ARGS,
)

audit_events = sa.Table(
    AUDIT,
    metadata,
    sa.Column("seq", BigSerial, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(64), nullable=False),
    sa.Column("tenant_id", sa.String(255), nullable=False),
    sa.Column("kind", sa.String(64), nullable=False),
    sa.Column("at", UTCDateTime(), nullable=False),
    sa.Column("actor", sa.String(255), nullable=True),
    sa.Column("status", sa.String(32), nullable=True),
    sa.Column("code", sa.String(128), nullable=True),
    sa.Column("data", LongText, nullable=True),
    # The tenant's hash chain (core/chain.py); NULL for pre-chain events (migration 0003).
    sa.Column("chain_seq", sa.BigInteger(), nullable=True),
    sa.Column("prev_hash", sa.String(64), nullable=True),
    sa.Column("hash", sa.String(64), nullable=True),
    sa.Index("ix_signoff_audit_events_run", "run_id", "seq"),
    sa.Index("ux_signoff_audit_events_chain", "tenant_id", "chain_seq", unique=True),
    **MYSQL_TABLE_ARGS,
)

audit_heads = sa.Table(
    AUDIT_HEADS,
    metadata,
    sa.Column("tenant_id", sa.String(255), primary_key=True),
    sa.Column("chain_seq", sa.BigInteger(), nullable=False),
    sa.Column("head_hash", sa.String(64), nullable=False),
    **MYSQL_TABLE_ARGS,
)

audit_checkpoints = sa.Table(
    AUDIT_CHECKPOINTS,
    metadata,
    sa.Column("id", BigSerial, primary_key=True, autoincrement=True),
    sa.Column("tenant_id", sa.String(255), nullable=False),
    sa.Column("chain_seq", sa.BigInteger(), nullable=False),
    sa.Column("head_hash", sa.String(64), nullable=False),
    sa.Column("at", UTCDateTime(), nullable=False),
    sa.Column("key_id", sa.String(255), nullable=False),
    sa.Column("algorithm", sa.String(32), nullable=False),
    sa.Column("signature", sa.Text(), nullable=False),
    sa.Column("round", sa.BigInteger(), nullable=True),
    sa.Index("ix_signoff_audit_checkpoints_tenant", "tenant_id", "id"),
    **MYSQL_TABLE_ARGS,
)

audit_rounds = sa.Table(
    AUDIT_ROUNDS,
    metadata,
    sa.Column("round", sa.BigInteger(), primary_key=True, autoincrement=False),
    sa.Column("prev_hash", sa.String(64), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
    # {tenant: {"chain_seq", "head_hash"}}: what the signature covers as "heads".
    sa.Column("heads", LongText, nullable=False),
    sa.Column("at", UTCDateTime(), nullable=False),
    sa.Column("key_id", sa.String(255), nullable=False),
    sa.Column("algorithm", sa.String(32), nullable=False),
    sa.Column("signature", sa.Text(), nullable=False),
    **MYSQL_TABLE_ARGS,
)

audit_meta = sa.Table(
    AUDIT_META,
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.BigInteger(), nullable=False),
    **MYSQL_TABLE_ARGS,
)
PRE_CHAIN_THROUGH = "pre_chain_through_seq"

workers = sa.Table(
    WORKERS,
    metadata,
    sa.Column("worker_id", sa.String(255), primary_key=True),
    sa.Column("last_seen", UTCDateTime(), nullable=False),
    sa.Column("host", sa.String(255), nullable=True),
    sa.Column("pid", sa.Integer(), nullable=True),
    sa.Column("started", sa.Double(), nullable=True),
    sa.Column("lock_name", sa.String(64), nullable=True),
    # The definition revisions this incarnation holds, as JSON {action id: revision} (0009).
    sa.Column("revisions", LongText, nullable=True),
    **MYSQL_TABLE_ARGS,
)

approval_links = sa.Table(
    APPROVAL_LINKS,
    metadata,
    sa.Column("token_hash", sa.String(64), primary_key=True),
    sa.Column("run_id", sa.String(64), nullable=False),
    sa.Column("run_version", sa.Integer(), nullable=False),
    sa.Column("tenant_id", sa.String(255), nullable=False),
    sa.Column("approver_id", sa.String(255), nullable=False),
    sa.Column("approver_roles", sa.Text(), nullable=False),
    sa.Column("issued_at", UTCDateTime(), nullable=False),
    sa.Column("expires_at", UTCDateTime(), nullable=False),
    sa.Column("used_at", UTCDateTime(), nullable=True),
    sa.Index("ix_signoff_approval_links_expiry", "expires_at"),
    **MYSQL_TABLE_ARGS,
)

limit_counters = sa.Table(
    LIMIT_COUNTERS,
    metadata,
    sa.Column("limit_key", sa.String(64), primary_key=True),
    sa.Column("touches", sa.BigInteger(), nullable=False),
    **MYSQL_TABLE_ARGS,
)

limit_reservations = sa.Table(
    LIMIT_RESERVATIONS,
    metadata,
    sa.Column("limit_key", sa.String(64), primary_key=True),
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("tenant_id", sa.String(255), nullable=False),
    sa.Column("amount", sa.Double(), nullable=False),
    sa.Column("reserved_at", UTCDateTime(), nullable=False),
    sa.Index("ix_signoff_limit_reservations_window", "limit_key", "reserved_at"),
    sa.Index("ix_signoff_limit_reservations_run", "run_id"),
    **MYSQL_TABLE_ARGS,
)
