"""Every pending job's predicted start and completion, from the running jobs' predicted runtimes.

Once per ingest cycle and source, after the ETAs: the source's active jobs become the review
simulator's queue (``planner.capacity.forecast_pending``): running jobs end at draws from
their ETA band (``eta.remaining_s``), pending jobs start as the scheduler would start them on
the fleet (Slurm: priority order with EASY backfill, which reserves on the jobs' time limits;
other schedulers: Kueue-style admission, GPUs only) and run for their predicted runtime.

- **Fleet**: the configured fleet file's pools; else, with ``place_on_nodes`` and when the
  source reports what each job asks of and holds on each node (Slurm), the source's nodes
  themselves: a pending job starts
  when enough nodes each have its CPUs, memory and GPUs free (whole nodes when exclusive), and
  running jobs, CPU-only ones included, free what they hold when they end
  (``planner.capacity.placement``); else one pool per (first partition, GPU type) of the
  source's nodes that are up (``planner.capacity.fleet_from_nodes``).
- **Order**: the scheduler's queue position, else submit time, else job id (Slurm's
  ``priority/basic``; a job's Slurm priority is not read).
- **Runtime** of a job without an ETA: its time limit (what Slurm assumes), and beyond the
  horizon without one; its completion is then not predicted (``runtime_from``).

The result is stored per pending job in ``queue_forecast`` (kept once it starts: the last
forecast made) as ``start_s`` and ``completion_s`` bands (p10/p50/p90, epoch seconds; None:
not within the horizon, or no predicted runtime), beside the scheduler's own estimate under its
own name (``scheduler_start_s``: Slurm's ``StartTime``, which assumes every running job runs to
its limit; a year away when one has none). The pending job's ETA takes the forecast's
completion and start (``completion_from: "queue_forecast"``): the scheduler's estimate is
never passed through as the planner's. A queue forecast is redone when a job arrives, starts,
ends or changes size, a node changes, or ``interval_s`` has passed. A queue of
``worker_min_jobs`` active jobs or more (default 1,000; a tenth of that when jobs are placed on
nodes, ``PLACEMENT_COST``) is forecast in a worker process off the
ingest cycle (``planner.service.loops.forecast_worker``): its records land a cycle or more
after their inputs were taken (``made_at_s``), and the next one starts no sooner than the last
one took.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.capacity import (
    Fleet,
    PendingForecast,
    QueuedJob,
    QueueSnapshot,
    RuntimeBand,
    SchedulerKind,
    fleet_from_nodes,
    forecast_pending,
)
from planner.capacity.fleet import DEFAULT_HORIZON_S
from planner.capacity.pending import Band, PublishedForecast
from planner.capacity.placement import PlacedJob, forecast_on_nodes
from planner.capacity.runtime import Z90
from planner.errors import PlannerError
from planner.forecast.history import RunOrigin
from planner.service.loops.context import IngestDeps
from planner.service.loops.incremental import eta_remaining_now
from planner.service.models import JobRow
from planner.service.store import UnitOfWork
from planner.service.stored_json import number
from planner.specs.job import ClusterSnapshot, JobResources, JobState, JobStatus, NodeState

__all__ = [
    "SLURM_BF_INTERVAL_S",
    "ForecastRequest",
    "backfill_interval",
    "draw_group",
    "forecast_queue",
    "make_forecast",
    "published_forecast",
    "queue_order",
    "runtime_band",
]

log = logging.getLogger(__name__)

#: The forecast's random draws are the same every cycle (a steady forecast of a steady queue).
SEED = 0
#: The fleet's name in the records when jobs are placed on the source's nodes.
NODES_FLEET = "nodes (CPUs, memory and GPUs of each node)"
#: How many pool-model jobs one job placed on nodes counts as for ``worker_min_jobs``: the
#: node simulation cost 7.0 times the pool one on the same queue
#: (benchmarks/results/pending_replay.md; 5.7 and 7.9 in earlier runs), so a queue placed on nodes
#: goes to the worker process from a tenth of the jobs.
PLACEMENT_COST = 10
#: Slurm's ``bf_interval`` when neither the settings nor the source say one, seconds
#: (slurm.conf(5), ``SchedulerParameters``: "Default: 30").
SLURM_BF_INTERVAL_S = 30.0
_QUANTILES = ("p10", "p50", "p90")
#: How long before a running job's start its progress history may begin and the run still be
#: its first (the scheduler's start time is whole seconds; a log's first line is stamped by
#: another clock).
RESTART_TOLERANCE_S = 60.0


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def queue_order(jobs: Sequence[JobState]) -> list[JobState]:
    """Running jobs first, then pending ones by queue position, submit time and job id."""

    def key(job: JobState) -> tuple[int, float, float, int, str]:
        position = job.queue_position if job.queue_position is not None else math.inf
        submitted = job.submit_time_s if job.submit_time_s is not None else math.inf
        number = int(job.job_id) if job.job_id.isdigit() else -1
        return (int(job.status == JobStatus.PENDING), position, submitted, number, job.job_id)

    return sorted(jobs, key=key)


def runtime_band(
    eta: Mapping[str, object] | None, job: JobState, *, now_s: float, horizon_s: float
) -> tuple[RuntimeBand, str]:
    """The job's runtime band for the simulation (a running job's remaining wall time, a
    pending job's whole run) and where it comes from: ``eta`` (its ETA's ``remaining_s``, a
    running job's taken at ``now_s`` from its completion; a missing p90 becomes the time left
    to its limit, else 3 x p50), ``time_limit`` (no ETA: the limit, what Slurm assumes),
    ``none`` (neither: it holds its GPUs past the horizon)."""
    limit = job.time_limit_s
    if limit is not None and job.status != JobStatus.PENDING:
        limit = limit - (now_s - (job.start_time_s if job.start_time_s is not None else now_s))
    limit_left = None if limit is None or not math.isfinite(limit) else max(limit, 1.0)
    remaining = (eta or {}).get("remaining_s") if not (eta or {}).get("finished") else None
    if eta and remaining is not None and job.status != JobStatus.PENDING:
        remaining = eta_remaining_now(eta, now_s) or remaining  # from now (``incremental``)
    p50 = _num(remaining.get("p50")) if isinstance(remaining, dict) else None
    if isinstance(remaining, dict) and p50 is not None:
        p50 = max(p50, 1.0)
        p10 = min(max(_num(remaining.get("p10")) or p50, 1.0), p50)
        p90 = _num(remaining.get("p90"))
        if p90 is None:
            p90 = limit_left if limit_left is not None else 3.0 * p50
        return RuntimeBand(p10_s=p10, p50_s=p50, p90_s=max(p90, p50)), "eta"
    if limit_left is not None:
        return RuntimeBand(p10_s=limit_left, p50_s=limit_left, p90_s=limit_left), "time_limit"
    beyond = 2.0 * horizon_s
    return RuntimeBand(p10_s=beyond, p50_s=beyond, p90_s=beyond), "none"


def draw_group(scenario: Mapping[str, object] | None, job: JobState) -> str:
    """The job's draw group in the forecast's samples (``planner.capacity.runtime.share_draws``):
    a digest of its described scenario (model, parallelism, training) with the GPU type, GPUs
    and nodes it holds or asks for, so that jobs running one program on the same hardware land
    at one quantile of their runtime bands; "" (its own draw) for a job not described."""
    if not scenario:
        return ""
    text = json.dumps(
        [scenario, job.gpu_type, job.num_gpus, job.num_nodes], sort_keys=True, default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _queue_key(jobs: Sequence[JobState], nodes: Sequence[NodeState]) -> str:
    """What a forecast depends on besides the runtimes: who waits and runs where, and nodes."""
    parts = [f"{j.job_id}:{j.status}:{j.num_gpus}:{j.partition}" for j in jobs]
    parts += [
        f"{n.name}:{n.state}:{n.num_gpus}:{n.num_gpus_allocated}:{n.num_cpus_allocated}:"
        f"{n.memory_allocated_bytes:.0f}"
        for n in nodes
    ]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _due(
    rows: Sequence[JobRow],
    records: Mapping[str, dict[str, object]],
    key: str,
    now_s: float,
    interval_s: float,
) -> bool:
    for row in rows:
        made = records.get(row.job_id) or row.queue_forecast or {}
        if made.get("queue_key") != key:
            return True
        if now_s - (number(made.get("made_at_s")) or -math.inf) >= interval_s:
            return True
    return False


def _band(values: tuple[float | None, float | None, float | None]) -> dict[str, float | None]:
    return dict(zip(_QUANTILES, values, strict=True))


def _fleet_of(deps: IngestDeps, snapshot: ClusterSnapshot) -> tuple[Fleet, str]:
    configured = deps.settings.queue_forecast.fleet
    if configured is not None:
        return configured, f"fleet file {configured.name}".strip()
    kind = SchedulerKind.SLURM if snapshot.scheduler == "slurm" else SchedulerKind.KUEUE
    return fleet_from_nodes(snapshot.nodes, kind), "nodes"


def _record(
    job: JobState,
    forecast: PendingForecast | None,
    runtime_from: str,
    *,
    key: str,
    now_s: float,
    fleet: str,
    samples: int,
) -> dict[str, object]:
    record: dict[str, object] = {
        "made_at_s": now_s,
        "start_s": None,
        "completion_s": None,
        "scheduler_start_s": job.expected_start_time_s,
        "runtime_from": runtime_from,
        "fleet": fleet,
        "samples": samples,
        "queue_key": key,
    }
    if forecast is None:
        record["reason"] = (
            f"no pool of the fleet ({fleet}) takes partition {job.partition!r} / GPU type "
            f"{job.gpu_type!r} with {job.num_gpus} GPUs"
        )
        return record
    record["start_s"] = _band(forecast.start_s)
    if runtime_from == "eta":
        record["completion_s"] = _band(forecast.completion_s)
    return record


def _applied_to_eta(
    eta: dict[str, object] | None, made: Mapping[str, object] | None
) -> dict[str, object] | None:
    """The pending job's ETA with the forecast's start and completion (never the scheduler's
    start estimate plus the runtime); None when it has none or they are in it already."""
    if eta is None or made is None:
        return None
    completion, start = made.get("completion_s"), made.get("start_s")
    if (
        eta.get("completion_from") == "queue_forecast"
        and "completion_time_s" in eta
        and "start_time_s" in eta
        and eta["completion_time_s"] == completion
        and eta["start_time_s"] == start
    ):
        return None
    return {
        **eta,
        "completion_time_s": completion,
        "start_time_s": start,
        "completion_from": "queue_forecast",
    }


@dataclass(frozen=True, slots=True)
class ForecastRequest:
    """What one forecast of a source's queue reads (plain values: it may run in the worker
    process of ``planner.service.loops.forecast_worker``): the queue key, when its inputs were
    taken, the fleet (None: no GPU node is up) and its name, the jobs with their runtime bands
    in queue order, where each band comes from, and the Monte Carlo samples. When ``placed``
    is not empty the jobs are placed on ``nodes`` instead of the fleet's pools: ``placed``
    holds every active job the source reported resources for (CPU-only ones too), in queue
    order, and ``jobs`` the GPU jobs the records are made for. ``backfill_interval_s``: Slurm's
    ``bf_interval`` for the simulation (``forecast_pending``, ``forecast_on_nodes``)."""

    key: str
    made_at_s: float
    fleet: Fleet | None
    fleet_name: str
    jobs: tuple[QueuedJob, ...]
    runtime_from: dict[str, str]
    samples: int
    nodes: tuple[NodeState, ...] = ()
    placed: tuple[PlacedJob, ...] = ()
    backfill_interval_s: float = 0.0


def make_forecast(request: ForecastRequest) -> dict[str, dict[str, object]]:
    """The queue forecast records of the request's pending jobs, by job id; raises
    ``PlannerError`` or ``ValueError`` when the simulation fails."""
    forecasts: dict[str, PendingForecast] = {}
    if request.placed:
        forecasts = forecast_on_nodes(
            request.nodes,
            request.placed,
            taken_at_s=request.made_at_s,
            rng=np.random.default_rng(SEED),
            samples=request.samples,
            backfill_interval_s=request.backfill_interval_s,
        )
    elif request.fleet is not None:
        forecasts = forecast_pending(
            request.fleet,
            QueueSnapshot(taken_at_s=request.made_at_s, jobs=request.jobs),
            rng=np.random.default_rng(SEED),
            samples=request.samples,
            backfill_interval_s=request.backfill_interval_s,
        )
    return {
        q.state.job_id: _record(
            q.state,
            forecasts.get(q.state.job_id),
            request.runtime_from[q.state.job_id],
            key=request.key,
            now_s=request.made_at_s,
            fleet=request.fleet_name,
            samples=request.samples,
        )
        for q in request.jobs
        if q.state.status == JobStatus.PENDING
    }


def _group_bands(
    jobs: Sequence[JobState],
    bands: Mapping[str, RuntimeBand],
    groups: Mapping[str, str],
    basis: Mapping[str, str],
    *,
    now_s: float,
    resumed: frozenset[str] = frozenset(),
) -> dict[str, RuntimeBand]:
    """The runtime band of each job of a draw group, by job id, from the group's one whole
    run. The jobs run one program of one length on the same hardware, so they have one whole
    runtime; their ETA bands differ only by what the planner knew when each was made (a
    pending job's prediction keeps the online calibration of when it was described, and a
    running job's ETA starts from that prediction until its own steps outweigh it). Each job
    takes the narrowest whole-run band of the group (the least log-space spread
    ``RuntimeBand.sigma``; on a tie the first in queue order): a pending job's whole-run band
    is its ETA's, a running job's is the time it has run (``now_s`` less its start) plus its
    remaining band. A pending job takes that band as it is, a running one less the time it
    has run. Two bands for one runtime would open a gap between the ends of two copies started
    together in every sample, which the scheduler never sees (a backfilled job slips into it).

    Left with their own bands and teaching none: jobs whose band is not their ETA's
    (``basis``), running jobs without a start time, jobs in ``resumed`` (a run that restarted
    from a checkpoint has less than the whole program left) and a running job that has run
    longer than the group's band's p10 (its remaining time is not that band shifted)."""
    ran: dict[str, float] = {}  # seconds each member has run (0: pending)
    spread: dict[str, float] = {}  # the log-space spread of each member's whole-run band
    for job in jobs:
        job_id = job.job_id
        if not groups[job_id] or basis[job_id] != "eta" or job_id in resumed:
            continue
        band = bands[job_id]
        if job.status == JobStatus.PENDING:
            ran[job_id], spread[job_id] = 0.0, band.sigma
        elif job.status == JobStatus.RUNNING and job.start_time_s is not None:
            ran[job_id] = elapsed = max(now_s - job.start_time_s, 0.0)
            spread[job_id] = math.log((band.p90_s + elapsed) / (band.p10_s + elapsed)) / (2 * Z90)
    best: dict[str, str] = {}
    for job_id, sigma in spread.items():
        group = groups[job_id]
        if group not in best or sigma < spread[best[group]]:
            best[group] = job_id
    out: dict[str, RuntimeBand] = {}
    for job_id, elapsed in ran.items():
        chosen = best[groups[job_id]]
        if chosen == job_id:
            continue  # its own band
        band, offset = bands[chosen], ran[chosen] - elapsed  # its whole run, less this one's
        if elapsed == 0.0 and offset == 0.0:
            out[job_id] = band
        elif elapsed < band.p10_s + ran[chosen]:
            out[job_id] = _shifted(band, offset)
    return out


def _shifted(band: RuntimeBand, seconds: float) -> RuntimeBand:
    """``band`` with ``seconds`` added to every quantile (each at least 1 s)."""
    return RuntimeBand(
        p10_s=max(band.p10_s + seconds, 1.0),
        p50_s=max(band.p50_s + seconds, 1.0),
        p90_s=max(band.p90_s + seconds, 1.0),
    )


def _resumed(row: JobRow, job: JobState) -> bool:
    """Whether the job has less than its whole program ahead of its start: a pending job that
    has run before (requeued, or resuming another job's run: its history has a first point), a
    running one whose history holds a restart, continues another job's run, or began before
    this start (requeued, its restart not yet in its log)
    (``planner.forecast.history.ProgressHistory``)."""
    # A history that does not read is an empty one, as everywhere else: a pending job's ETA
    # (``eta._estimate``) is then a whole run from the prior, not the rest of a resumed run,
    # so its band is a whole run's and it shares its draw group's; the next log read of a
    # running job stores a fresh history over it (``progress.store_records``).
    origin = RunOrigin.from_json(row.progress_history)
    if job.status == JobStatus.PENDING:
        return origin.first_iteration is not None
    first = origin.first_time_s
    began_before = (
        first is not None
        and job.start_time_s is not None
        and first < job.start_time_s - RESTART_TOLERANCE_S
    )
    return bool(origin.restarts or origin.continues or began_before)


def backfill_interval(configured: float | None, snapshot: ClusterSnapshot) -> float:
    """The seconds between two backfill cycles the forecast simulates: ``configured``
    (``queue_forecast.backfill_interval_s``) when set, else what the source read from the
    scheduler (``ClusterSnapshot.backfill_interval_s``), else Slurm's default. A scheduler
    that does not backfill at all is simulated as backfilling in Slurm's default cycles."""
    if configured is not None:
        return configured
    if snapshot.backfill_interval_s is not None:
        return snapshot.backfill_interval_s
    return SLURM_BF_INTERVAL_S


def _request(
    deps: IngestDeps,
    snapshot: ClusterSnapshot,
    jobs: Sequence[JobState],
    rows: Mapping[str, JobRow],
    *,
    key: str,
    now_s: float,
    resources: Mapping[str, JobResources] | None = None,
) -> ForecastRequest:
    """The request for ``jobs`` (in queue order); with ``resources`` (by job id) every job that
    has them is placed on the snapshot's nodes, the others (GPU jobs the source gave no
    resources for) are left out of the simulation."""
    fleet: Fleet | None = None
    if resources:
        fleet_name = NODES_FLEET
    else:
        try:
            fleet, fleet_name = _fleet_of(deps, snapshot)
        except PlannerError as exc:  # no GPU node is up: nothing can start
            fleet, fleet_name = None, f"nodes ({exc})"
    queued, placed, basis, bands, groups = [], [], {}, {}, {}
    for job in jobs:
        bands[job.job_id], basis[job.job_id] = runtime_band(
            rows[job.job_id].eta,
            job,
            now_s=now_s,
            horizon_s=fleet.horizon_s if fleet else DEFAULT_HORIZON_S,
        )
        groups[job.job_id] = draw_group(rows[job.job_id].scenario, job)
    resumed = frozenset(
        job.job_id for job in jobs if groups[job.job_id] and _resumed(rows[job.job_id], job)
    )
    bands.update(_group_bands(jobs, bands, groups, basis, now_s=now_s, resumed=resumed))
    for job in jobs:
        band, group = bands[job.job_id], groups[job.job_id]
        if job.num_gpus > 0:
            queued.append(QueuedJob(state=job, runtime=band, draw_group=group))
        if resources and job.job_id in resources:
            placed.append(
                PlacedJob(
                    state=job, runtime=band, resources=resources[job.job_id], draw_group=group
                )
            )
    return ForecastRequest(
        key=key,
        made_at_s=now_s,
        fleet=fleet,
        fleet_name=fleet_name,
        jobs=tuple(queued),
        runtime_from=basis,
        samples=deps.settings.queue_forecast.samples,
        nodes=tuple(snapshot.nodes) if resources else (),
        placed=tuple(placed),
        backfill_interval_s=backfill_interval(
            deps.settings.queue_forecast.backfill_interval_s, snapshot
        ),
    )


def forecast_queue(
    deps: IngestDeps, uow: UnitOfWork, snapshot: ClusterSnapshot, *, now_s: float
) -> None:
    """Forecast the pending jobs of ``snapshot``'s source (module docstring) and store it on
    their rows; call it once per cycle after the ETAs. Logs and skips a forecast that fails.
    A queue of ``worker_min_jobs`` active jobs or more is forecast in the worker process
    (``planner.service.loops.forecast_worker``): this stores the one that finished since."""
    config = deps.settings.queue_forecast
    if not config.enabled:
        return
    source = f"{snapshot.scheduler}/{snapshot.cluster}"
    rows = {r.job_id: r for r in uow.jobs_of(snapshot.scheduler, snapshot.cluster) if r.active}
    # the records made since the last cycle, by job id: written with the ETAs at the end
    records = {
        job_id: record
        for job_id, record in (deps.forecaster.collect(source) or {}).items()
        if job_id in rows
    }
    pending = _forecast(deps, snapshot, rows, records, source=source, now_s=now_s)
    _write(uow, rows, pending, records)


def _forecast(
    deps: IngestDeps,
    snapshot: ClusterSnapshot,
    rows: Mapping[str, JobRow],
    records: dict[str, dict[str, object]],
    *,
    source: str,
    now_s: float,
) -> list[JobRow]:
    """Hand the queue to the worker, or forecast it here and add its records to ``records``,
    when a forecast is due; returns the pending GPU jobs' rows, whose ETAs take their
    forecasts (none when a forecast made here failed: they stay as they were)."""
    config = deps.settings.queue_forecast
    # Jobs are placed on the nodes when asked to, the source says what each asks of and holds
    # on them, and no fleet file is configured: CPU-only jobs then take part too, as they hold CPUs
    # and memory a GPU job may need.
    resources = (
        {r.job_id: r for r in snapshot.resources}
        if config.place_on_nodes and config.fleet is None and snapshot.resources
        else {}
    )
    jobs = queue_order(
        [
            j
            for j in snapshot.jobs
            if j.status.is_active and j.job_id in rows and (j.num_gpus > 0 or j.job_id in resources)
        ]
    )
    pending = [rows[j.job_id] for j in jobs if j.status == JobStatus.PENDING and j.num_gpus > 0]
    if not pending:
        return []
    key = _queue_key(jobs, snapshot.nodes)
    if _due(pending, records, key, now_s, config.interval_s) and deps.forecaster.ready(source):
        request = _request(deps, snapshot, jobs, rows, key=key, now_s=now_s, resources=resources)
        weight = PLACEMENT_COST if request.placed else 1
        if 0 < config.worker_min_jobs <= len(jobs) * weight:
            deps.forecaster.submit(source, make_forecast, request)
        else:
            try:
                records.update(make_forecast(request))
            except (PlannerError, ValueError) as exc:
                log.warning("queue forecast of %s failed: %s", source, exc)
                return []
    return pending


def _write(
    uow: UnitOfWork,
    rows: Mapping[str, JobRow],
    pending: Sequence[JobRow],
    records: Mapping[str, dict[str, object]],
) -> None:
    """Store the new ``records`` on their rows, and on the ``pending`` jobs' ETAs their last
    forecast's start and completion: in bulk, only what changed (``UnitOfWork.write_jobs``:
    most cycles change no ETA, and one that collects a forecast of 10,000 jobs writes 6,900
    records)."""
    changes: dict[str, dict[str, object]] = {
        job_id: {"queue_forecast": record} for job_id, record in records.items()
    }
    for row in pending:
        made = records.get(row.job_id, row.queue_forecast)
        eta = _applied_to_eta(row.eta, made)
        if eta is not None:
            changes.setdefault(row.job_id, {})["eta"] = eta
    uow.write_jobs([(rows[job_id], values) for job_id, values in changes.items()])


def _band_of(doc: Any) -> Band | None:
    if not isinstance(doc, dict):
        return None
    band = (_num(doc.get("p10")), _num(doc.get("p50")), _num(doc.get("p90")))
    return None if band[1] is None else band


def published_forecast(row: JobRow) -> PublishedForecast | None:
    """What the schedulers are told of an active job (``planner.capacity.PublishedForecast``):
    a pending job's predicted start from its last queue forecast, a running job's completion
    band from its ETA, its progress (iterations done of ``train_iters``, else the ratio the job
    itself reported to the scheduler) and the p90 of its whole run's wall time (a running
    job's p90 completion less its start; a pending job's p90 runtime). None for a job that is
    not active."""
    try:
        status = JobStatus(row.status)
    except ValueError:
        return None
    if not row.active or not status.is_active:
        return None
    pending = status == JobStatus.PENDING
    eta = row.eta or {}
    made = row.queue_forecast or {}
    completion = _band_of(eta.get("completion_time_s"))
    state = row.state or {}
    ratio = None
    if row.iteration is not None and row.train_iters:
        ratio = min(max(row.iteration / row.train_iters, 0.0), 1.0)
    elif _num(state.get("progress_ratio")) is not None:
        ratio = _num(state.get("progress_ratio"))
    runtime = None
    if pending:
        whole = _band_of(eta.get("remaining_s"))
        runtime = whole[2] if whole is not None else None
    else:
        start = _num(state.get("start_time_s"))
        if completion is not None and completion[2] is not None and start is not None:
            runtime = completion[2] - start
    return PublishedForecast(
        job_id=row.job_id,
        pending=pending,
        start_s=_band_of(made.get("start_s")) if pending else None,
        made_at_s=_num(made.get("made_at_s")) if pending else None,
        completion_s=completion,
        progress_ratio=None if pending else ratio,
        expected_runtime_s=runtime if runtime is not None and runtime > 0 else None,
    )
