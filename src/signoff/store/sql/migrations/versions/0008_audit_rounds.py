"""Checkpoint rounds: a round number on each checkpoint, and one signed listing per round.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

Checkpoints stored before this keep ``round`` NULL (they are ``signoff.checkpoint.v1`` and keep
verifying); the first round after it lists their heads. ``signoff_audit_rounds.round`` is the
primary key, so two instances checkpointing at once cannot both write one round number.
Never edit a migration that has shipped; add a new one.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None

_MYSQL: dict[str, Any] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}


def upgrade() -> None:
    with op.batch_alter_table("signoff_audit_checkpoints") as batch:
        batch.add_column(sa.Column("round", sa.BigInteger(), nullable=True))
    op.create_table(
        "signoff_audit_rounds",
        sa.Column("round", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column(
            "heads", sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb"), nullable=False
        ),
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


def downgrade() -> None:
    op.drop_table("signoff_audit_rounds")
    with op.batch_alter_table("signoff_audit_checkpoints") as batch:
        batch.drop_column("round")
