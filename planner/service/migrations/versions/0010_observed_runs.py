"""Finished jobs kept as measured runs for the observed-runs calibration the service learns
(``planner.service.learning``): one row per job, with its scenario, measured step time and,
when it cannot be learnt from, the reason. A plain new table: the same DDL on SQLite and
PostgreSQL (JSON is TEXT on SQLite and ``json`` on PostgreSQL; ``Float`` is REAL / double
precision), nothing of the existing tables changes, so no batch mode is needed.

Revision ID: 0010_observed_runs
Revises: 0009_description_facts
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_observed_runs"
down_revision = "0009_description_facts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "observed_runs",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("scheduler", sa.String(32), nullable=False),
        sa.Column("cluster", sa.String(128), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("recorded_s", sa.Float(), nullable=False),
        sa.Column("ended_s", sa.Float(), nullable=True),
        sa.Column("gpu", sa.String(64), nullable=False),
        sa.Column("scenario", sa.JSON(), nullable=False),
        sa.Column("iteration_time_s", sa.Float(), nullable=True),
        sa.Column("num_iterations", sa.Integer(), nullable=False),
        sa.Column("memory_per_gpu_bytes", sa.Float(), nullable=True),
        sa.Column("skip_reason", sa.Text(), nullable=True),
        sa.UniqueConstraint("scheduler", "cluster", "job_id", name="uq_observed_runs_job"),
    )
    op.create_index("ix_observed_runs_cluster", "observed_runs", ["scheduler", "cluster", "id"])


def downgrade() -> None:
    op.drop_index("ix_observed_runs_cluster", table_name="observed_runs")
    op.drop_table("observed_runs")
