"""The last progress record read per job (the step-time rule's memory between reads) and the
job's latest GPU telemetry (dcgm-exporter through Prometheus).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("progress_mark", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("gpus", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("gpus")
        batch.drop_column("progress_mark")
