"""Capacity reviews: each job's queue forecast (a pending job's predicted start and
completion from the queue simulation) and the reviews the service runs on a schedule.

Revision ID: 0005_capacity_reviews
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_capacity_reviews"
down_revision = "0005_node_slowness"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("queue_forecast", sa.JSON(), nullable=True))
    op.create_table(
        "reviews",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("made_at_s", sa.Float(), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("fleet", sa.String(256), nullable=False),
        sa.Column("elapsed_s", sa.Float(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("summary", sa.JSON(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("html", sa.Text(), nullable=True),
        sa.Column("markdown", sa.Text(), nullable=True),
    )
    op.create_index("ix_reviews_made_at_s", "reviews", ["made_at_s"])


def downgrade() -> None:
    op.drop_index("ix_reviews_made_at_s", table_name="reviews")
    op.drop_table("reviews")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("queue_forecast")
