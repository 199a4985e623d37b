"""The compute time a log printed for a step sample's iterations:
the ETA finds a slower phase on those times when the log's whole-second times blur it, and the
service must read back what the replay of the same log reads. Existing samples keep none (their
jobs' ETAs use the wall clock alone, as before).

Revision ID: 0008_sample_logged_time
Revises: 0007_job_sort_number
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_sample_logged_time"
down_revision = "0007_job_sort_number"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("step_samples") as batch:
        batch.add_column(sa.Column("logged_step_time_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("step_samples") as batch:
        batch.drop_column("logged_step_time_s")
