"""Cumulative limits: a counter row per limit subject, a reservation row per (subject, run).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

Never edit a migration that has shipped; add a new one.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None

_MYSQL: dict[str, Any] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}


def upgrade() -> None:
    op.create_table(
        "signoff_limit_counters",
        sa.Column("limit_key", sa.String(64), primary_key=True),
        sa.Column("touches", sa.BigInteger(), nullable=False),
        **_MYSQL,
    )
    op.create_table(
        "signoff_limit_reservations",
        sa.Column("limit_key", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("tenant_id", sa.String(255), nullable=False),
        sa.Column("amount", sa.Double(), nullable=False),
        sa.Column(
            "reserved_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb"),
            nullable=False,
        ),
        **_MYSQL,
    )
    op.create_index(
        "ix_signoff_limit_reservations_window",
        "signoff_limit_reservations",
        ["limit_key", "reserved_at"],
    )
    op.create_index("ix_signoff_limit_reservations_run", "signoff_limit_reservations", ["run_id"])


def downgrade() -> None:
    op.drop_table("signoff_limit_reservations")
    op.drop_table("signoff_limit_counters")
