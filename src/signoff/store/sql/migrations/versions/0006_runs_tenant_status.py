"""An index for the approver's pending list and status-filtered run listings.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

``WHERE tenant_id = :t AND status = :s [AND run_id < :before] ORDER BY run_id DESC LIMIT :n``
walks ``(tenant_id, status, run_id)`` backwards and stops after ``n`` rows; before, it walked
``ix_signoff_runs_status`` and filtered tenants row by row. Never edit a migration that has
shipped; add a new one.
"""

from __future__ import annotations

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_index(
        "ix_signoff_runs_tenant_status", "signoff_runs", ["tenant_id", "status", "run_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_signoff_runs_tenant_status", table_name="signoff_runs")
