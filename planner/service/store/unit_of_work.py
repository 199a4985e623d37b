"""One transaction of the ingest loop over the SQLAlchemy store: :class:`SqlUnitOfWork`
implements the ``UnitOfWork`` port (``planner.service.store.port``); :class:`planner.service.
store.sql.SqlStore` opens it (``unit_of_work``), commits it or rolls it back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from planner.service.models import (
    CalibrationRow,
    JobRow,
    NodeSlownessRow,
    PredictionRow,
    SourceRow,
    StepSampleRow,
)


class SqlUnitOfWork:
    """The ``UnitOfWork`` port over one SQLAlchemy session (changes to rows it returned are
    written on commit)."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def source(self, name: str, *, scheduler: str) -> SourceRow:
        """The health row of source ``name``, created when new."""
        row = self._s.get(SourceRow, name)
        if row is None:
            row = SourceRow(name=name, scheduler=scheduler, cluster="", consecutive_failures=0)
            self._s.add(row)
        return row

    def jobs_of(self, scheduler: str, cluster: str) -> list[JobRow]:
        """Every stored job of one scheduler and cluster."""
        query = select(JobRow).where(JobRow.scheduler == scheduler, JobRow.cluster == cluster)
        return list(self._s.scalars(query))

    def new_job(self, *, scheduler: str, cluster: str, job_id: str, first_seen_s: float) -> JobRow:
        """A new job row, added to the session."""
        row = JobRow(
            scheduler=scheduler,
            cluster=cluster,
            job_id=job_id,
            first_seen_s=first_seen_s,
            described_by="none",
            description_detail="",
            description_key="",
        )
        self._s.add(row)
        return row

    def delete_ended_jobs(self, *, ended_before_s: float) -> None:
        """Remove inactive jobs that ended before ``ended_before_s`` (cascades to samples)."""
        self._s.execute(
            delete(JobRow).where(
                JobRow.active.is_(False),
                JobRow.ended_s.is_not(None),
                JobRow.ended_s < ended_before_s,
            )
        )

    def _pk(self, job: JobRow) -> int:
        if job.id is None:
            self._s.flush()
        return job.id

    def sample_iterations(self, job: JobRow) -> set[int]:
        """Iterations the job already has a step sample for."""
        pk = self._pk(job)
        return set(
            self._s.scalars(select(StepSampleRow.iteration).where(StepSampleRow.job_pk == pk))
        )

    def add_sample(
        self,
        job: JobRow,
        *,
        iteration: int,
        step_time_s: float | None,
        num_iterations: int,
        time_s: float,
        loss: float | None,
    ) -> None:
        """Store one step sample."""
        self._s.add(
            StepSampleRow(
                job_pk=self._pk(job),
                iteration=iteration,
                step_time_s=step_time_s,
                num_iterations=num_iterations,
                time_s=time_s,
                loss=loss,
            )
        )

    def timed_samples(self, job: JobRow, *, limit: int) -> list[StepSampleRow]:
        """The newest ``limit`` samples with a step time, oldest first."""
        pk = self._pk(job)
        self._s.flush()
        rows = self._s.scalars(
            select(StepSampleRow)
            .where(StepSampleRow.job_pk == pk, StepSampleRow.step_time_s.is_not(None))
            .order_by(StepSampleRow.iteration.desc())
            .limit(limit)
        )
        return list(reversed(list(rows)))

    def add_prediction(
        self, job: JobRow, *, kind: str, made_at_s: float, payload: dict[str, Any]
    ) -> None:
        """Store a prediction of ``kind`` in the job's history."""
        self._s.add(
            PredictionRow(job_pk=self._pk(job), made_at_s=made_at_s, kind=kind, payload=payload)
        )

    def prune_predictions(self, job: JobRow, *, kind: str, keep: int) -> None:
        """Keep only the newest ``keep`` predictions of ``kind``."""
        pk = self._pk(job)
        cutoff = self._s.scalar(
            select(PredictionRow.id)
            .where(PredictionRow.job_pk == pk, PredictionRow.kind == kind)
            .order_by(PredictionRow.id.desc())
            .offset(keep)
            .limit(1)
        )
        if cutoff is not None:
            self._s.execute(
                delete(PredictionRow).where(
                    PredictionRow.job_pk == pk,
                    PredictionRow.kind == kind,
                    PredictionRow.id <= cutoff,
                )
            )

    def calibration(self, name: str) -> CalibrationRow | None:
        """One stored calibration by name."""
        return self._s.get(CalibrationRow, name)

    def put_calibration(self, name: str, state: dict[str, Any], updated_s: float) -> None:
        """Create or replace a named calibration."""
        row = self._s.get(CalibrationRow, name)
        if row is None:
            self._s.add(CalibrationRow(name=name, state=state, updated_s=updated_s))
        else:
            row.state = state
            row.updated_s = updated_s

    # issue 14 (ETA)
    def job_predictions(self, job: JobRow, *, kind: str, limit: int) -> list[PredictionRow]:
        """The newest ``limit`` predictions of ``kind`` of the job, oldest first."""
        pk = self._pk(job)
        self._s.flush()
        rows = self._s.scalars(
            select(PredictionRow)
            .where(PredictionRow.job_pk == pk, PredictionRow.kind == kind)
            .order_by(PredictionRow.made_at_s.desc(), PredictionRow.id.desc())
            .limit(limit)
        )
        return list(reversed(list(rows)))

    # Node slowness history (issue 14: straggler impact for queued jobs).

    def slow_episodes(
        self, scheduler: str, cluster: str, *, since_s: float
    ) -> list[NodeSlownessRow]:
        """Slow-node episodes of one cluster last seen at or after ``since_s``, oldest first."""
        query = (
            select(NodeSlownessRow)
            .where(
                NodeSlownessRow.scheduler == scheduler,
                NodeSlownessRow.cluster == cluster,
                NodeSlownessRow.last_seen_s >= since_s,
            )
            .order_by(NodeSlownessRow.started_s, NodeSlownessRow.id)
        )
        return list(self._s.scalars(query))

    def add_slow_episode(
        self,
        *,
        scheduler: str,
        cluster: str,
        node: str,
        job_id: str,
        now_s: float,
        ranks: int,
        slowdown: float,
    ) -> NodeSlownessRow:
        """Start an episode of ``node`` being slow for ``job_id`` at ``now_s``."""
        row = NodeSlownessRow(
            scheduler=scheduler,
            cluster=cluster,
            node=node,
            job_id=job_id,
            started_s=now_s,
            last_seen_s=now_s,
            ranks=ranks,
            slowdown=slowdown,
        )
        self._s.add(row)
        return row

    def forget_nodes(self, scheduler: str, cluster: str, nodes: Sequence[str]) -> None:
        """Remove every episode of these nodes (drained: they leave the history)."""
        if nodes:
            self._s.execute(
                delete(NodeSlownessRow).where(
                    NodeSlownessRow.scheduler == scheduler,
                    NodeSlownessRow.cluster == cluster,
                    NodeSlownessRow.node.in_(list(nodes)),
                )
            )
