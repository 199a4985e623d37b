"""What a job's progress showed (pauses, restarts, recent pace), the evaluation and checkpoint
intervals its arguments state, and, once it ended, the outcome of its ETAs.

Revision ID: 0006_eta_history
Revises: 0005_capacity_reviews
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_eta_history"
down_revision = "0005_capacity_reviews"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("progress_history", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("schedule", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("outcome", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("outcome")
        batch.drop_column("schedule")
        batch.drop_column("progress_history")
