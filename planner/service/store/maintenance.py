"""The store's retention and audit SQL, used by ``SqlStore``.

Retention bounds what grows per job and cycle: ETA estimates (one per job per cycle) keep the
newest ``eta_rows`` per job and nothing older than ``eta_max_age_s``; step samples keep the
newest ``samples_per_job`` per job; audit records are kept ``audit_max_age_s``. Per-job limits
use ``ROW_NUMBER() OVER (PARTITION BY job)`` (SQLite >= 3.25, PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, CursorResult, Delete, Select, delete, func, select
from sqlalchemy.orm import Session

from planner.service.models import (
    AuditEntry,
    AuditRow,
    PredictionRow,
    RetentionPolicy,
    StepSampleRow,
)
from planner.service.store.tables import (
    AUDIT,
    PREDICTION,
    STEP_SAMPLE,
    Attributes,
)


def audit_rows(entries: Sequence[AuditEntry]) -> list[AuditRow]:
    """Mapped rows of ``entries`` (strings cut to their column sizes)."""
    return [
        AuditRow(
            at_s=e.at_s,
            actor=e.actor[:128],
            action=e.action[:32],
            scheduler=e.scheduler[:32],
            cluster=e.cluster[:128],
            target=e.target[:512],
            outcome=e.outcome[:16],
            reason=e.reason[:4000],
            detail=e.detail,
        )
        for e in entries
    ]


def _beyond_newest(model: Attributes, keep: int, *where: ColumnElement[bool]) -> Select[tuple[int]]:
    """ids of ``model`` rows past the newest ``keep`` of their job."""
    ranked = (
        select(
            model.id.label("id"),
            func.row_number().over(partition_by=model.job_pk, order_by=model.id.desc()).label("rn"),
        )
        .where(*where)
        .subquery()
    )
    return select(ranked.c.id).where(ranked.c.rn > keep)


def _deleted(session: Session, statement: Delete) -> int:
    """Rows ``statement`` deleted: a DELETE answers with a ``CursorResult``, which counts them
    (``Session.execute`` is typed as returning any ``Result``)."""
    result = session.execute(statement)
    return int(result.rowcount or 0) if isinstance(result, CursorResult) else 0


def prune(session: Session, policy: RetentionPolicy, *, now_s: float) -> dict[str, int]:
    """Delete what ``policy`` does not keep; rows deleted per kind."""
    eta = PREDICTION.kind == "eta"
    old = _deleted(
        session,
        delete(PredictionRow).where(eta, PREDICTION.made_at_s < now_s - policy.eta_max_age_s),
    )
    many = _deleted(
        session,
        delete(PredictionRow).where(
            PREDICTION.id.in_(_beyond_newest(PREDICTION, policy.eta_rows, eta))
        ),
    )
    samples = _deleted(
        session,
        delete(StepSampleRow).where(
            STEP_SAMPLE.id.in_(_beyond_newest(STEP_SAMPLE, policy.samples_per_job))
        ),
    )
    audit = _deleted(session, delete(AuditRow).where(AUDIT.at_s < now_s - policy.audit_max_age_s))
    return {"eta_history": old + many, "step_samples": samples, "audit": audit}
