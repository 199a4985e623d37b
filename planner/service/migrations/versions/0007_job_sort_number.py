"""A job's place in a listing as a column, indexed with its key (also after ``active`` and after
``status``, the listing's filters): a page of 10,000 jobs is an index range
(``GET /v1/jobs?limit=N`` reads only its rows).

``sort_number`` is the leading number of the job id (``123`` of ``123_4``; 2^62 for ids without
one), the first part of ``planner.service.models.job_sort_key``; existing jobs are filled in.

Revision ID: 0007_job_sort_number
Revises: 0006_eta_history
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_job_sort_number"
down_revision = "0006_eta_history"
branch_labels = None
depends_on = None

_NO_NUMBER = 1 << 62
#: The listing's indexes: all jobs, active ones (``?active=true``), by status (``?status=``).
LISTINGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ix_jobs_listing", ()),
    ("ix_jobs_listing_active", ("active",)),
    ("ix_jobs_listing_status", ("status",)),
)


def _number(job_id: str) -> int:
    head = job_id.split("_", 1)[0]
    return int(head) if head.isdigit() else _NO_NUMBER


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("sort_number", sa.BigInteger(), nullable=False, server_default="0")
        )
    jobs = sa.table("jobs", sa.column("id", sa.Integer), sa.column("job_id", sa.String))
    numbers = sa.table("jobs", sa.column("id", sa.Integer), sa.column("sort_number", sa.BigInteger))
    bind = op.get_bind()
    rows = bind.execute(sa.select(jobs.c.id, jobs.c.job_id)).all()
    if rows:
        bind.execute(
            numbers.update().where(numbers.c.id == sa.bindparam("pk")),
            [{"pk": pk, "sort_number": _number(job_id)} for pk, job_id in rows],
        )
    for name, first in LISTINGS:
        op.create_index(name, "jobs", [*first, "scheduler", "cluster", "sort_number", "job_id"])


def downgrade() -> None:
    for name, _ in LISTINGS:
        op.drop_index(name, table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("sort_number")
