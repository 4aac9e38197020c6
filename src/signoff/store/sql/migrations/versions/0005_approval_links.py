"""One-time decision links (stored by the SHA-256 of their token).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

Never edit a migration that has shipped; add a new one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None

_TIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "signoff_approval_links",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("run_version", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.String(255), nullable=False),
        sa.Column("approver_id", sa.String(255), nullable=False),
        sa.Column("approver_roles", sa.Text(), nullable=False),
        sa.Column("issued_at", _TIME, nullable=False),
        sa.Column("expires_at", _TIME, nullable=False),
        sa.Column("used_at", _TIME, nullable=True),
        mysql_engine="InnoDB",
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )
    op.create_index("ix_signoff_approval_links_expiry", "signoff_approval_links", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_signoff_approval_links_expiry", table_name="signoff_approval_links")
    op.drop_table("signoff_approval_links")
