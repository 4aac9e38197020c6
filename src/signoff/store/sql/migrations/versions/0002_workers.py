"""Worker heartbeats for crash recovery.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

Never edit a migration that has shipped; add a new one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "signoff_workers",
        sa.Column("worker_id", sa.String(255), primary_key=True),
        sa.Column(
            "last_seen",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb"),
            nullable=False,
        ),
        mysql_engine="InnoDB",
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )


def downgrade() -> None:
    op.drop_table("signoff_workers")
