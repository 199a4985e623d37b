"""Where each value of a job's launch description came from: ``provenance`` (dotted field ->
source), the fields assumed from documented defaults, those left unknown, the launch facts
outside the scenario format and the reader's notes. Jobs described before keep none until
their launch changes.

Revision ID: 0009_description_facts
Revises: 0008_sample_logged_time
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_description_facts"
down_revision = "0008_sample_logged_time"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("description_facts", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("description_facts")
