"""What the leader writes back to the schedulers after each ingest cycle (all opt-in).

* Kubernetes: the Kueue AdmissionCheck reconcile (the decision is
  ``planner.recommend.admission``, from the stored predictions) and ``planner.llm/*`` hint
  annotations, written only when they change;
* Slurm: ``planner:hint=`` tokens in job comments (and, enforcing, lower time limits: the
  policy is ``planner.recommend.time_limit``), and the hints file for ``job_submit.lua``.

The scheduler I/O comes in as Protocols and callables built by the composition root
(``planner.service.main``); nothing here imports an adapter.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from planner.errors import PlannerError
from planner.ports import SchedulerSource
from planner.recommend.admission import (
    AdvisoryHints,
    CheckDecision,
    admission_decision,
    advisory_hints,
)
from planner.recommend.outlook import JobOutlook
from planner.recommend.time_limit import RuntimeHint, runtime_hint
from planner.service.audit import AuditLog
from planner.service.loops.incremental import eta_remaining_now
from planner.service.models import AuditEntry, JobRow, listing_key
from planner.service.store import Store
from planner.specs.job import JobStatus

log = logging.getLogger(__name__)

KUBERNETES = "kubernetes"
SLURM = "slurm"


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _quantile(doc: Mapping[str, object] | None, key: str, quantile: str) -> float | None:
    value = (doc or {}).get(key)
    return _num(value.get(quantile)) if isinstance(value, dict) else None


def outlook_of(row: JobRow, now_s: float | None = None) -> JobOutlook:
    """The policies' view of a stored job (its prediction and ETA; a running job's remaining
    time at ``now_s`` from its completion, when given: ``planner.service.loops.incremental``)."""
    pred = row.prediction or {}
    gpus = (row.state or {}).get("num_gpus")
    start = (row.state or {}).get("start_time_s")
    fits = pred.get("fits_in_memory")
    try:
        status = JobStatus(row.status)
    except ValueError:
        status = JobStatus.UNKNOWN
    eta = row.eta
    if eta and now_s is not None and status != JobStatus.PENDING:
        eta = {**eta, "remaining_s": eta_remaining_now(eta, now_s) or eta.get("remaining_s")}
    return JobOutlook(
        job_id=row.job_id,
        status=status,
        num_gpus=gpus if isinstance(gpus, int) and not isinstance(gpus, bool) else None,
        train_iters=row.train_iters,
        start_time_s=_num(start),
        has_prediction=row.prediction is not None,
        description=row.description_detail,
        step_time_s=_num(pred.get("iteration_time_s")),
        mfu_ratio=_num(pred.get("mfu")),
        memory_per_gpu_bytes=_num(pred.get("memory_per_gpu_bytes")),
        fits_in_memory=fits if isinstance(fits, bool) else None,
        remaining_p50_s=_quantile(eta, "remaining_s", "p50"),
        remaining_p90_s=_quantile(eta, "remaining_s", "p90"),
        completion_p50_s=_quantile(row.eta, "completion_time_s", "p50"),
        completion_p90_s=_quantile(row.eta, "completion_time_s", "p90"),
        iteration=row.iteration,
        **_straggler_term(row),
    )


class _StragglerFields(TypedDict, total=False):
    """The straggler fields of ``JobOutlook``."""

    straggler_factor: float | None
    straggler_probability: float | None
    straggler_slowdown: float | None
    eta_straggler_factor: float


def _straggler_term(row: JobRow) -> _StragglerFields:
    """The expected straggler term of a queued job (``planner.service.loops.node_history``) as
    ``JobOutlook`` fields; empty without one."""
    term = (row.prediction or {}).get("expected_straggler")
    if not isinstance(term, dict) or _num(term.get("factor")) is None:
        return {}
    return {
        "straggler_factor": _num(term.get("factor")),
        "straggler_probability": _num(term.get("probability")),
        "straggler_slowdown": _num(term.get("slowdown_when_slow")),
        "eta_straggler_factor": _num((row.eta or {}).get("straggler_factor")) or 1.0,
    }


# ---------------------------------------------------------------------------- Kubernetes


def admission_decider(
    store: Store, *, is_fresh: Callable[[], bool]
) -> Callable[[str], CheckDecision]:
    """``decide(job_id)`` over the stored predictions of Kubernetes jobs (``""``: the workload's
    owner is unknown); the rule is ``planner.recommend.admission.admission_decision``."""

    def decide(job_id: str) -> CheckDecision:
        if not job_id:
            return admission_decision(None, owner_known=False, fresh=True)
        if not is_fresh():
            return admission_decision(None, owner_known=True, fresh=False)
        rows = store.find_jobs(job_id, scheduler=KUBERNETES)
        return admission_decision(
            outlook_of(rows[0]) if rows else None, owner_known=True, fresh=True
        )

    return decide


class Elector(Protocol):
    """Leader election (a coordination.k8s.io Lease)."""

    @property
    def is_leader(self) -> bool:
        """Whether this replica holds the lease."""
        ...

    def start(self) -> None:
        """Start campaigning."""
        ...

    def stop(self) -> None:
        """Stop, releasing the lease."""
        ...


class WatchedSource(SchedulerSource, Protocol):
    """A scheduler source with watch caches to start and stop (the Kubernetes informers)."""

    def start(self) -> None:
        """Start the watches."""
        ...

    def stop(self) -> None:
        """Stop the watches."""
        ...

    def stats(self) -> Mapping[str, Any]:
        """Counters per watched resource (for ``/metrics``)."""
        ...


@dataclass(kw_only=True)
class KubernetesRuntime:
    """The Kubernetes pieces of one service process.

    ``source``: the informer-backed source (registered with the ingest loop); ``elector``:
    leader election (None: always the leader); ``reconcile_admission``: one reconcile pass of
    the AdmissionCheck controller (None: off); ``write_hints``: annotate a job ``namespace/kind/
    name`` with hint values (None: off); ``publish_predictions``: write the predicted admission,
    progress and runtime onto the watched objects (None: off; ``adapters.kubernetes.publish``).
    """

    source: WatchedSource
    elector: Elector | None = None
    reconcile_admission: Callable[[], None] | None = None
    write_hints: Callable[[str, AdvisoryHints], None] | None = None
    publish_predictions: Callable[[Store], None] | None = None
    audit: AuditLog | None = None
    _written_hints: dict[str, AdvisoryHints] = field(default_factory=dict)

    @property
    def is_leader(self) -> bool:
        """True without leader election, else whether this replica holds the Lease."""
        return self.elector is None or self.elector.is_leader

    def start(self) -> None:
        """Start the informers and the elector."""
        self.source.start()
        if self.elector is not None:
            self.elector.start()

    def stop(self) -> None:
        """Stop the elector (releasing the Lease) and the informers."""
        if self.elector is not None:
            self.elector.stop()
        self.source.stop()

    def after_cycle(self, store: Store) -> None:
        """Leader only: reconcile the AdmissionCheck, write changed hint annotations and the
        published predictions."""
        if not self.is_leader:
            return
        if self.reconcile_admission is not None:
            self.reconcile_admission()
        if self.write_hints is not None:
            publish_kubernetes_hints(store, self.write_hints, self._written_hints, self.audit)
        if self.publish_predictions is not None:
            self.publish_predictions(store)


def publish_kubernetes_hints(
    store: Store,
    write: Callable[[str, AdvisoryHints], None],
    written: dict[str, AdvisoryHints],
    audit: AuditLog | None = None,
) -> None:
    """Annotate each active Kubernetes job that has a prediction with its hint values, when
    they differ from what was written (``written`` is updated); failures are logged; every
    write is audited (``audit``)."""
    entries: list[AuditEntry] = []
    for row in store.list_jobs(active_only=True):
        if row.scheduler != KUBERNETES or row.prediction is None:
            continue
        hints = advisory_hints(outlook_of(row))
        if written.get(row.job_id) == hints:
            continue
        values = {
            "predicted_runtime_s": hints.predicted_runtime_s,
            "eta_s": hints.eta_s,
            "recommended_gpus": hints.recommended_gpus,
        }
        try:
            write(row.job_id, hints)
        except (PlannerError, ValueError) as exc:
            log.warning("hints for %s not written: %s", row.job_id, exc)
            outcome, reason = "error", str(exc)
        else:
            written[row.job_id] = hints
            outcome, reason = "ok", "the model's runtime and the ETA changed"
        if audit is not None:
            entries.append(
                audit.entry(
                    action="annotations",
                    outcome=outcome,
                    scheduler=KUBERNETES,
                    cluster=row.cluster,
                    target=row.job_id,
                    reason=reason,
                    detail=values,
                )
            )
    if audit is not None:
        audit.record(entries)


# ---------------------------------------------------------------------------- Slurm


class HintResult(Protocol):
    """What writing one job's hint did (``error`` None: written or nothing to change)."""

    @property
    def error(self) -> Exception | None:
        """Why this job's hint was not written."""
        ...

    @property
    def comment(self) -> str:
        """The job's comment now."""
        ...

    @property
    def comment_changed(self) -> bool:
        """Whether the comment was updated."""
        ...

    @property
    def time_limit_min(self) -> int | None:
        """The time limit set (None: left alone)."""
        ...


class HintWriter(Protocol):
    """Writes hints into the scheduler's jobs (``adapters.slurm.SlurmHintWriter``)."""

    def write_many(self, hints: Mapping[str, RuntimeHint]) -> Mapping[str, HintResult]:
        """Write each job's hint; raises ``SourceError`` when the queue cannot be read."""
        ...


@dataclass(kw_only=True)
class HintsFile:
    """The hints file for ``job_submit.lua``: ``write(hints by key)`` writes it atomically;
    ``scenario_key(user, path)`` and ``job_key(user, name)`` are its keys, both per user so
    one user's hints never reach another user's jobs (raise ``SpecError``)."""

    path: str
    write: Callable[[Mapping[str, RuntimeHint]], None]
    scenario_key: Callable[[str, str], str]
    job_key: Callable[[str, str], str]


def slurm_jobs(store: Store) -> list[JobRow]:
    """Every stored Slurm job in ``list_jobs``' order, read as the ingest loop reads them
    (``UnitOfWork.jobs_of``: the rows its last cycle committed, without reading and decoding
    them again while the table holds what it wrote; ``list_jobs`` of 10,000 jobs
    after each cycle took 1.2 s, this 0.3 s). Read only: nothing is changed."""
    with store.unit_of_work() as uow:
        rows = [row for c in store.job_clusters(SLURM) for row in uow.jobs_of(SLURM, c)]
    return sorted(rows, key=listing_key)


@dataclass(kw_only=True)
class SlurmHintsRuntime:
    """Writes Slurm hints after each ingest cycle (see the module docstring); every write is
    audited (``audit``)."""

    writer: HintWriter | None = None
    hints_file: HintsFile | None = None
    audit: AuditLog | None = None
    _last_file: dict[str, RuntimeHint] | None = None

    def after_cycle(self, store: Store, now_s: float | None = None) -> None:
        """Write the hints of active Slurm jobs and refresh the hints file; logs failures
        (``now_s``: the time the running jobs' remaining times are taken at)."""
        active: dict[str, RuntimeHint] = {}
        rows: dict[str, JobRow] = {}
        by_key: dict[str, RuntimeHint] = {}
        for row in slurm_jobs(store):
            try:
                hint = runtime_hint(outlook_of(row, now_s))
            except PlannerError as exc:
                log.warning("job %s: no Slurm hint: %s", row.job_id, exc)
                continue
            if hint is None:
                continue
            if row.active:
                active[row.job_id] = hint
                rows[row.job_id] = row
            if self.hints_file is not None:
                by_key.update(_file_keys(self.hints_file, row, hint))
        entries: list[AuditEntry] = []
        if self.writer is not None and active:
            try:
                results = self.writer.write_many(active)
            except PlannerError as exc:
                log.warning("Slurm hints not written: %s", exc)
            else:
                for job_id, result in results.items():
                    if result.error:
                        log.warning("Slurm hint for job %s: %s", job_id, result.error)
                    entries += self._audit_job(rows.get(job_id), job_id, active[job_id], result)
        if self.hints_file is not None and by_key and by_key != self._last_file:
            try:
                self.hints_file.write(by_key)
            except (OSError, PlannerError) as exc:
                log.warning("hints file %s not written: %s", self.hints_file.path, exc)
                outcome, reason = "error", str(exc)
            else:
                self._last_file = dict(by_key)
                outcome, reason = "ok", "the hints of the jobs' users changed"
            if self.audit is not None:
                entries.append(
                    self.audit.entry(
                        action="hints_file",
                        outcome=outcome,
                        scheduler=SLURM,
                        target=self.hints_file.path,
                        reason=reason,
                        detail={"keys": len(by_key)},
                    )
                )
        if self.audit is not None:
            self.audit.record(entries)

    def _audit_job(
        self, row: JobRow | None, job_id: str, hint: RuntimeHint, result: HintResult
    ) -> list[AuditEntry]:
        if self.audit is None:
            return []
        cluster = row.cluster if row is not None else ""

        def entry(
            action: str, outcome: str, reason: str, detail: Mapping[str, object] | None
        ) -> AuditEntry:
            assert self.audit is not None
            return self.audit.entry(
                action=action,
                outcome=outcome,
                scheduler=SLURM,
                cluster=cluster,
                target=job_id,
                reason=reason,
                detail=detail,
            )

        if result.error:
            return [entry("hint", "error", str(result.error), None)]
        out: list[AuditEntry] = []
        if result.comment_changed:
            out.append(entry("comment", "ok", hint.basis, {"comment": result.comment[-300:]}))
        if result.time_limit_min is not None:
            detail = {
                "time_limit_min": result.time_limit_min,
                "runtime_p50_s": hint.predicted_runtime_s,
                "runtime_p90_s": hint.runtime_p90_s,
            }
            out.append(entry("time_limit", "ok", hint.basis, detail))
        return out


def _file_keys(hints_file: HintsFile, row: JobRow, hint: RuntimeHint) -> dict[str, RuntimeHint]:
    """The hints-file entries of one job, both keyed by its user: by scenario path and by job
    name."""
    keys: dict[str, RuntimeHint] = {}
    try:
        if (
            row.user
            and row.described_by == "scenario_file"
            and row.description_detail.startswith("/")
        ):
            keys[hints_file.scenario_key(row.user, row.description_detail)] = hint
        if row.user and row.name:
            keys[hints_file.job_key(row.user, row.name)] = hint
    except PlannerError as exc:
        log.warning("job %s: not in the hints file: %s", row.job_id, exc)
    return keys
