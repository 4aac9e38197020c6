"""Where each runtime incarnation runs and which liveness lock it holds (instant crash recovery).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

Never edit a migration that has shipped; add a new one. Rows written before this revision have
no host, pid or lock: their liveness is decided by the heartbeat age, as before.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("signoff_workers") as batch:
        batch.add_column(sa.Column("host", sa.String(255), nullable=True))
        batch.add_column(sa.Column("pid", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("started", sa.Double(), nullable=True))
        batch.add_column(sa.Column("lock_name", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("signoff_workers") as batch:
        batch.drop_column("lock_name")
        batch.drop_column("started")
        batch.drop_column("pid")
        batch.drop_column("host")
