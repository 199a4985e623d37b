"""``POST /v1/simulate``: if this job were submitted now, when would it start and finish?

The job joins the end of the live queue of one source (the service's active jobs, each running
job ending at a draw from its ETA band, each pending one running for its predicted runtime, as
the queue forecast of ``planner.service.loops.queue_forecast`` does) and the scheduler is
replayed on that source's fleet (the nodes of its last poll, one pool per partition and GPU
type, or the configured ``queue_forecast.fleet_file``): ``planner.capacity.simulate_submission``
answers its start and completion bands (p10/p50/p90). Its runtime comes from ``job.runtime_s``,
else the prediction of its ``scenario`` (the ``planner predict`` format, corrected by the
cluster's learnt calibration where the service applies one) with the band of that prediction's
log-space sd, else its time limit (what Slurm assumes).

``planner simulate JOB_FILE`` calls this route (``planner.simulate_cli``), so the command line
and the API give the same answer from the same queue. Role ``reader``; the request body is
bounded (``limits.json_body_bytes``, field limits below; 422 naming the field); the simulation
runs on the worker pool (429 with Retry-After when it is full). Pools count GPUs: CPU and memory
of the nodes are not simulated here even where ``queue_forecast.place_on_nodes`` is on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated

import numpy as np
from fastapi import APIRouter, Body, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from planner.capacity import Fleet, QueuedJob, SchedulerKind, fleet_from_nodes
from planner.capacity.pending import Band, simulate_submission
from planner.errors import SpecError
from planner.scenario.documents import PredictionCalibration, predict_results
from planner.service import stored_json
from planner.service.api.access import Access, open_access
from planner.service.api.errors import error_responses
from planner.service.api.models import ScenarioDocument, as_document
from planner.service.api.work import WorkerPool
from planner.service.auth import Role
from planner.service.loops.queue_forecast import SEED, runtime_band
from planner.service.models import JobRow, SourceRow
from planner.service.reviews import live_snapshot
from planner.service.runtime import ServiceState
from planner.specs.job import JobState, JobStatus, NodeState

__all__ = ["SimulateRequest", "SimulateResult", "make_router", "simulate"]

#: The id the simulated job has in the queue (never a real job's: ids have no spaces there).
SIMULATED_ID = "simulated job"
#: z of the 90th percentile of a normal distribution (the band of a log-normal runtime).
Z90 = 1.2815515655446004
_MAX_S = 10 * 365 * 86400.0


class RuntimeInput(BaseModel):
    """A runtime band, seconds (p10 and p90 default to p50)."""

    model_config = ConfigDict(extra="forbid")

    p10: float | None = Field(default=None, gt=0, le=_MAX_S)
    p50: float = Field(gt=0, le=_MAX_S)
    p90: float | None = Field(default=None, gt=0, le=_MAX_S)


class SimulatedJob(BaseModel):
    """The queue facts of the job to simulate (each optional when a scenario gives it)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="", max_length=128, description="Echoed back")
    num_gpus: int | None = Field(
        default=None, ge=1, le=1_000_000, description="GPUs; default the scenario's"
    )
    gpu_type: str | None = Field(
        default=None,
        max_length=64,
        description="GPU type (catalog key or the scheduler's name); default the scenario's",
    )
    partition: str | None = Field(
        default=None, max_length=128, description="Slurm partition or Kueue ClusterQueue"
    )
    queue_name: str | None = Field(default=None, max_length=128, description="Kueue LocalQueue")
    time_limit_s: float | None = Field(default=None, gt=0, le=_MAX_S, description="Time limit")
    runtime_s: RuntimeInput | None = Field(
        default=None, description="Its runtime, instead of the scenario's prediction"
    )


class SimulateRequest(BaseModel):
    """``POST /v1/simulate``: the job, what it trains (optional), which source's queue."""

    model_config = ConfigDict(extra="forbid")

    job: SimulatedJob = Field(default_factory=SimulatedJob)
    scenario: ScenarioDocument | None = Field(
        default=None, description="What the job trains (the planner predict format)"
    )
    source: str | None = Field(
        default=None,
        max_length=200,
        description="The queue: a source's name, scheduler or scheduler/cluster; default the "
        "only source with GPU nodes",
    )
    samples: int = Field(default=100, ge=1, le=2000, description="Monte Carlo samples")


class BandView(BaseModel):
    """A band: p10/p50/p90 (None: beyond the simulated future)."""

    p10: float | None
    p50: float | None
    p90: float | None


class SimulateResult(BaseModel):
    """When the job would start and finish (epoch seconds), how long it waits and runs
    (seconds), and what the answer rests on."""

    name: str
    source: str
    made_at_s: float
    start_s: BandView
    completion_s: BandView
    wait_s: BandView
    runtime_s: BandView
    runtime_from: str
    num_gpus: int
    gpu_type: str | None
    partition: str
    fleet: str
    jobs_running: int
    jobs_pending: int
    samples: int


def _band(values: Band) -> BandView:
    return BandView(p10=values[0], p50=values[1], p90=values[2])


def _source(sources: Sequence[SourceRow], wanted: str | None) -> SourceRow:
    with_gpus = [s for s in sources if any((n or {}).get("num_gpus") for n in s.nodes or [])]
    if wanted:
        found = [
            s for s in sources if wanted in (s.name, s.scheduler, f"{s.scheduler}/{s.cluster}")
        ]
        if len(found) != 1:
            names = ", ".join(f"{s.scheduler}/{s.cluster}" for s in sources) or "none yet"
            how = "matches several" if found else "matches none"
            raise SpecError("source", f"{wanted!r} {how} of the sources ({names}); name one")
        return found[0]
    if len(with_gpus) != 1:
        names = ", ".join(f"{s.scheduler}/{s.cluster}" for s in with_gpus) or "none yet"
        raise SpecError(
            "source",
            f"{len(with_gpus)} sources have GPU nodes ({names}); name the queue with source "
            "(scheduler/cluster)",
        )
    return with_gpus[0]


def _nodes(row: SourceRow) -> list[NodeState]:
    """The source's nodes as its last good poll stored them (``dataclasses.asdict`` of each
    ``NodeState``); one without a name or state is left out, a value of another type (a node
    stored by another version) reads as the field's default."""
    out = []
    for doc in stored_json.rows(row.nodes):
        name, state = doc.get("name"), doc.get("state")
        if isinstance(name, str) and isinstance(state, str):
            out.append(_node(doc, name, state))
    return out


def _node(doc: Mapping[str, object], name: str, state: str) -> NodeState:
    def count(key: str) -> int:
        value = doc.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    def amount(key: str) -> float:
        value = doc.get(key)
        return value if isinstance(value, int | float) and not isinstance(value, bool) else 0.0

    gpu_type, partitions = doc.get("gpu_type"), doc.get("partitions")
    return NodeState(
        name=name,
        state=state,
        num_gpus=count("num_gpus"),
        num_gpus_allocated=count("num_gpus_allocated"),
        gpu_type=gpu_type if isinstance(gpu_type, str) else None,
        num_cpus=count("num_cpus"),
        memory_bytes=amount("memory_bytes"),
        partitions=tuple(p for p in partitions if isinstance(p, str))
        if isinstance(partitions, list)
        else (),
        num_cpus_allocated=count("num_cpus_allocated"),
        memory_allocated_bytes=amount("memory_allocated_bytes"),
    )


def _scenario_runtime(
    scenario: Mapping[str, object],
    calibration: PredictionCalibration | None,
    cluster: str,
    sd: float,
) -> tuple[dict[str, float], Mapping[str, object]]:
    """The scenario's predicted runtime band (p50 its time to train, p10/p90 from the
    prediction's log-space sd) and its hardware section; 422 naming the scenario's field."""
    (result,) = predict_results([scenario], calibration=calibration, cluster=cluster)
    if "error" in result:
        raise SpecError("scenario", str(result["error"]))
    p50 = result.get("calibrated_time_to_train_s") or result.get("time_to_train_s")
    if not isinstance(p50, int | float) or not math.isfinite(p50) or p50 <= 0:
        raise SpecError(
            "scenario.training",
            "gives no time to train (set training.total_tokens or train_iters), or give "
            "job.runtime_s",
        )
    log_sd = (result.get("calibration") or {}).get("log_sd")
    log_sd = float(log_sd) if isinstance(log_sd, int | float) and log_sd > 0 else sd
    band = {
        "p10": float(p50) * math.exp(-Z90 * log_sd),
        "p50": float(p50),
        "p90": float(p50) * math.exp(Z90 * log_sd),
    }
    hardware = scenario.get("hardware")
    return band, hardware if isinstance(hardware, Mapping) else {}


def simulate(
    body: SimulateRequest,
    *,
    rows: Sequence[JobRow],
    sources: Sequence[SourceRow],
    fleet: Fleet | None,
    now_s: float,
    calibration: PredictionCalibration | None = None,
    model_log_sd: float = 0.3,
) -> SimulateResult:
    """The ``SimulateResult`` of ``body``, over the store's active ``rows`` and
    ``sources`` at ``now_s`` (module docstring); ``fleet``: the configured fleet file's (None:
    the source's nodes). Raises ``SpecError`` naming the field of the request."""
    source = _source(sources, body.source)
    job = body.job
    remaining: dict[str, float] | None = None
    hardware: Mapping[str, object] = {}
    runtime_from = "time_limit"
    if job.runtime_s is not None:
        r = job.runtime_s
        p10, p90 = r.p10 if r.p10 is not None else r.p50, r.p90 if r.p90 is not None else r.p50
        if not p10 <= r.p50 <= p90:
            raise SpecError("job.runtime_s", "must be ordered p10 <= p50 <= p90")
        remaining, runtime_from = {"p10": p10, "p50": r.p50, "p90": p90}, "runtime_s"
    if body.scenario is not None:
        band, hardware = _scenario_runtime(
            as_document(body.scenario), calibration, source.cluster, model_log_sd
        )
        if remaining is None:
            remaining, runtime_from = band, "scenario"
    if remaining is None and job.time_limit_s is None:
        raise SpecError(
            "job.runtime_s",
            "the job's runtime is unknown: give job.runtime_s, a scenario or job.time_limit_s",
        )
    num_gpus = job.num_gpus if job.num_gpus is not None else hardware.get("num_gpus")
    if not isinstance(num_gpus, int) or isinstance(num_gpus, bool) or num_gpus < 1:
        raise SpecError("job.num_gpus", "give the job's GPU count (or a scenario that has it)")
    gpu = job.gpu_type if job.gpu_type is not None else hardware.get("gpu")
    state = JobState(
        job_id=SIMULATED_ID,
        scheduler=source.scheduler,
        cluster=source.cluster,
        name=job.name,
        status=JobStatus.PENDING,
        num_gpus=num_gpus,
        gpu_type=gpu if isinstance(gpu, str) and gpu else None,
        partition=job.partition or "",
        queue_name=job.queue_name or "",
        submit_time_s=now_s,
        time_limit_s=job.time_limit_s,
    )
    if fleet is None:
        kind = SchedulerKind.SLURM if source.scheduler == "slurm" else SchedulerKind.KUEUE
        try:
            fleet = fleet_from_nodes(_nodes(source), kind)
        except SpecError as exc:
            raise SpecError("source", f"{source.name}: no GPU node is up ({exc})") from None
    eta = {"remaining_s": remaining} if remaining is not None else None
    runtime, _ = runtime_band(eta, state, now_s=now_s, horizon_s=fleet.horizon_s)
    queue = live_snapshot(
        [r for r in rows if (r.scheduler, r.cluster) == (source.scheduler, source.cluster)],
        now_s,
    )
    found = simulate_submission(
        fleet,
        queue,
        QueuedJob(state=state, runtime=runtime, team=job.name or "simulate"),
        rng=np.random.default_rng(SEED),
        samples=body.samples,
    )
    waits = [None if s is None else max(0.0, s - now_s) for s in found.start_s]
    wait: Band = (waits[0], waits[1], waits[2])
    running = sum(1 for q in queue.jobs if q.running)
    return SimulateResult(
        name=job.name,
        source=f"{source.scheduler}/{source.cluster}",
        made_at_s=now_s,
        start_s=_band(found.start_s),
        completion_s=_band(found.completion_s),
        wait_s=_band(wait),
        runtime_s=_band((runtime.p10_s, runtime.p50_s, runtime.p90_s)),
        runtime_from=runtime_from,
        num_gpus=num_gpus,
        gpu_type=state.gpu_type,
        partition=state.partition,
        fleet=fleet.name if fleet.name != "live" else f"nodes of {source.name}",
        jobs_running=running,
        jobs_pending=len(queue.jobs) - running,
        samples=body.samples,
    )


def make_router(
    state: ServiceState,
    access: Access | None = None,
    pool: WorkerPool | None = None,
    calibration: Callable[[], PredictionCalibration | None] | None = None,
) -> APIRouter:
    """The simulate route over ``state``'s store for the callers ``access`` admits (default:
    all; role ``reader``), run on ``pool``; ``calibration``: the learnt calibration to apply to
    a scenario's prediction (None: none)."""
    access = access or open_access()
    pool = pool or WorkerPool.default()
    router = APIRouter(tags=["simulate"], dependencies=[Depends(access.require(Role.READER))])
    config = state.ingestor.deps.settings.queue_forecast

    def run(body: SimulateRequest, observed: PredictionCalibration | None) -> SimulateResult:
        return simulate(
            body,
            rows=state.store.list_jobs(active_only=True),
            sources=state.store.sources(nodes=True),
            fleet=config.fleet,
            now_s=state.clock(),
            calibration=observed,
            model_log_sd=state.settings.model_prior_log_sd,
        )

    @router.post(
        "/v1/simulate",
        operation_id="simulate",
        summary="If this job were submitted now: when it starts and finishes (p10/p50/p90)",
        response_model=SimulateResult,
        responses=error_responses(400, 401, 403, 413, 415, 422, 429, 500, 503),
    )
    async def simulate_route(
        request: Request,
        body: Annotated[SimulateRequest, Body(description="The job and what it trains")],
    ) -> SimulateResult:
        observed = calibration() if calibration is not None else None
        return await pool.run(request, run, body, observed)

    return router
