"""Runs, duplicate reservations and audit events.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Never edit a migration that has shipped; add a new one. The types are spelled out here rather
than imported from ``tables.py`` so that later changes there cannot rewrite history.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

_MYSQL: dict[str, Any] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}


def _datetime() -> sa.types.TypeEngine[Any]:
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def _long_text() -> sa.types.TypeEngine[Any]:
    return sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "signoff_runs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("tenant_id", sa.String(255), nullable=False),
        sa.Column("action_id", sa.String(255), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("principal_id", sa.String(255), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=True),
        sa.Column("created_at", _datetime(), nullable=False),
        sa.Column("updated_at", _datetime(), nullable=False),
        sa.Column("data", _long_text(), nullable=False),
        **_MYSQL,
    )
    op.create_index("ix_signoff_runs_tenant", "signoff_runs", ["tenant_id", "run_id"])
    op.create_index("ix_signoff_runs_status", "signoff_runs", ["status", "run_id"])

    op.create_table(
        "signoff_duplicates",
        sa.Column("scope_hash", sa.String(64), primary_key=True),
        sa.Column("tenant_id", sa.String(255), nullable=False),
        sa.Column("action_id", sa.String(255), nullable=False),
        sa.Column("idempotency_key", sa.String(255), nullable=False),
        sa.Column("visibility", sa.Text(), nullable=False),
        sa.Column("owner_run_id", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("input_hash", sa.String(128), nullable=False),
        sa.Column("result", _long_text(), nullable=True),
        sa.Column("created_at", _datetime(), nullable=False),
        sa.Column("completed_at", _datetime(), nullable=True),
        **_MYSQL,
    )
    op.create_index("ix_signoff_duplicates_purge", "signoff_duplicates", ["state", "completed_at"])

    op.create_table(
        "signoff_audit_events",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("tenant_id", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("at", _datetime(), nullable=False),
        sa.Column("actor", sa.String(255), nullable=True),
        sa.Column("status", sa.String(32), nullable=True),
        sa.Column("code", sa.String(128), nullable=True),
        sa.Column("data", _long_text(), nullable=True),
        **_MYSQL,
    )
    op.create_index("ix_signoff_audit_events_run", "signoff_audit_events", ["run_id", "seq"])


def downgrade() -> None:
    op.drop_table("signoff_audit_events")
    op.drop_table("signoff_duplicates")
    op.drop_table("signoff_runs")
