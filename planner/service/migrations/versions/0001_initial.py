"""Initial schema: jobs, step samples, prediction history, source health.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("scheduler", sa.String(32), nullable=False),
        sa.Column("cluster", sa.String(128), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("user", sa.String(128), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("first_seen_s", sa.Float(), nullable=False),
        sa.Column("last_seen_s", sa.Float(), nullable=False),
        sa.Column("ended_s", sa.Float(), nullable=True),
        sa.Column("described_by", sa.String(32), nullable=False),
        sa.Column("description_detail", sa.Text(), nullable=False),
        sa.Column("description_key", sa.Text(), nullable=False),
        sa.Column("scenario", sa.JSON(), nullable=True),
        sa.Column("prediction", sa.JSON(), nullable=True),
        sa.Column("train_iters", sa.Integer(), nullable=True),
        sa.Column("iteration", sa.Integer(), nullable=True),
        sa.Column("last_progress_s", sa.Float(), nullable=True),
        sa.Column("log_cursor", sa.JSON(), nullable=True),
        sa.Column("eta", sa.JSON(), nullable=True),
        sa.UniqueConstraint("scheduler", "cluster", "job_id", name="uq_jobs_key"),
    )
    op.create_index("ix_jobs_job_id", "jobs", ["job_id"])
    op.create_index("ix_jobs_status", "jobs", ["status"])
    op.create_index("ix_jobs_active", "jobs", ["active"])
    op.create_table(
        "step_samples",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "job_pk", sa.Integer(), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("iteration", sa.Integer(), nullable=False),
        sa.Column("step_time_s", sa.Float(), nullable=True),
        sa.Column("num_iterations", sa.Integer(), nullable=False),
        sa.Column("time_s", sa.Float(), nullable=False),
        sa.Column("loss", sa.Float(), nullable=True),
        sa.UniqueConstraint("job_pk", "iteration", name="uq_step_samples_job_iteration"),
    )
    op.create_index("ix_step_samples_job_pk", "step_samples", ["job_pk"])
    op.create_table(
        "predictions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "job_pk", sa.Integer(), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("made_at_s", sa.Float(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
    )
    op.create_index("ix_predictions_job_time", "predictions", ["job_pk", "made_at_s"])
    op.create_table(
        "sources",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("scheduler", sa.String(32), nullable=False),
        sa.Column("cluster", sa.String(128), nullable=False),
        sa.Column("last_attempt_s", sa.Float(), nullable=True),
        sa.Column("last_success_s", sa.Float(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False),
        sa.Column("nodes", sa.JSON(), nullable=True),
        sa.Column("warnings", sa.JSON(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("sources")
    op.drop_table("predictions")
    op.drop_table("step_samples")
    op.drop_table("jobs")
