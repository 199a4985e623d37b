"""Per-node history of slowness (ranks flagged on a node, their what-if slowdown, how long),
the basis of the expected straggler slowdown of queued jobs.

Revision ID: 0005_node_slowness
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_node_slowness"
down_revision = "0005_security_audit"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "node_slowness",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("scheduler", sa.String(32), nullable=False),
        sa.Column("cluster", sa.String(128), nullable=False),
        sa.Column("node", sa.String(256), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("started_s", sa.Float(), nullable=False),
        sa.Column("last_seen_s", sa.Float(), nullable=False),
        sa.Column("ranks", sa.Integer(), nullable=False),
        sa.Column("slowdown", sa.Float(), nullable=False),
    )
    op.create_index("ix_node_slowness_node", "node_slowness", ["scheduler", "cluster", "node"])
    op.create_index("ix_node_slowness_last_seen_s", "node_slowness", ["last_seen_s"])


def downgrade() -> None:
    op.drop_index("ix_node_slowness_last_seen_s", table_name="node_slowness")
    op.drop_index("ix_node_slowness_node", table_name="node_slowness")
    op.drop_table("node_slowness")
