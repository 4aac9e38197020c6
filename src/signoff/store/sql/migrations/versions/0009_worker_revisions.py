"""Workers record the definition revisions they hold (a fleet mid-upgrade hands approvals over).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02

Never edit a migration that has shipped; add a new one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("signoff_workers") as batch:
        batch.add_column(
            sa.Column(
                "revisions",
                sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb"),
                nullable=True,
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("signoff_workers") as batch:
        batch.drop_column("revisions")
