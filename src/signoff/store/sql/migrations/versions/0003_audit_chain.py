"""The audit hash chain: chain columns, chain heads, signed checkpoints.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

History is not rewritten: events that exist when this runs keep NULL chain columns and are
"pre-chain"; ``pre_chain_through_seq`` records the last of them, and every tenant's chain starts
with its first event after it. Never edit a migration that has shipped; add a new one.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

_MYSQL: dict[str, Any] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}


def upgrade() -> None:
    with op.batch_alter_table("signoff_audit_events") as batch:
        batch.add_column(sa.Column("chain_seq", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("prev_hash", sa.String(64), nullable=True))
        batch.add_column(sa.Column("hash", sa.String(64), nullable=True))
    op.create_index(
        "ux_signoff_audit_events_chain",
        "signoff_audit_events",
        ["tenant_id", "chain_seq"],
        unique=True,
    )
    op.create_table(
        "signoff_audit_heads",
        sa.Column("tenant_id", sa.String(255), primary_key=True),
        sa.Column("chain_seq", sa.BigInteger(), nullable=False),
        sa.Column("head_hash", sa.String(64), nullable=False),
        **_MYSQL,
    )
    op.create_table(
        "signoff_audit_checkpoints",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("tenant_id", sa.String(255), nullable=False),
        sa.Column("chain_seq", sa.BigInteger(), nullable=False),
        sa.Column("head_hash", sa.String(64), nullable=False),
        sa.Column(
            "at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb"),
            nullable=False,
        ),
        sa.Column("key_id", sa.String(255), nullable=False),
        sa.Column("algorithm", sa.String(32), nullable=False),
        sa.Column("signature", sa.Text(), nullable=False),
        **_MYSQL,
    )
    op.create_index(
        "ix_signoff_audit_checkpoints_tenant", "signoff_audit_checkpoints", ["tenant_id", "id"]
    )
    op.create_table(
        "signoff_audit_meta",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.BigInteger(), nullable=False),
        **_MYSQL,
    )
    op.execute(
        "INSERT INTO signoff_audit_meta (name, value) "
        "SELECT 'pre_chain_through_seq', COALESCE(MAX(seq), 0) FROM signoff_audit_events"
    )


def downgrade() -> None:
    op.drop_table("signoff_audit_meta")
    op.drop_index("ix_signoff_audit_checkpoints_tenant", "signoff_audit_checkpoints")
    op.drop_table("signoff_audit_checkpoints")
    op.drop_table("signoff_audit_heads")
    op.drop_index("ux_signoff_audit_events_chain", "signoff_audit_events")
    with op.batch_alter_table("signoff_audit_events") as batch:
        batch.drop_column("hash")
        batch.drop_column("prev_hash")
        batch.drop_column("chain_seq")
