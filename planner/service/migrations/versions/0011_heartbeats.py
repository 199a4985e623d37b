"""What each process of the service last reported about itself (``planner.service.processes``):
the ingest process writes its status record (cycles, sources, last error, leadership, its
metrics' values) here and the API process reads it. A plain new table: the same DDL on SQLite
and PostgreSQL, nothing of the existing tables changes, so no batch mode is needed.

Revision ID: 0011_heartbeats
Revises: 0010_observed_runs
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_heartbeats"
down_revision = "0010_observed_runs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "heartbeats",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("updated_s", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("heartbeats")
