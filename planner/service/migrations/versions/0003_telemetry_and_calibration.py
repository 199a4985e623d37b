"""Where metrics-based progress reading stopped per job; online calibration state.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("telemetry_since_s", sa.Float(), nullable=True))
    op.create_table(
        "calibrations",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("updated_s", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("calibrations")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("telemetry_since_s")
