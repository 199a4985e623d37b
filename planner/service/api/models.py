"""Request and response models of the HTTP API (pydantic; they make ``/openapi.json``).

Units are in the field names (``_s`` seconds, ``_bytes``, ``_ratio``); times ending in ``_s``
that are points in time are Unix epoch seconds. Documents that belong to the planner's public
formats (scenario, explore, recommend; ``planner.scenario``) are modelled by their top-level
fields and accept further fields (``extra="allow"``): the format's own parser validates them and
answers ``{"name", "error"}`` per document, as the CLI does.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from fastapi import Response
from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, WrapValidator

from planner.forecast.pauses import PauseForecast
from planner.scenario.schema import (
    HardwareSection,
    ModelSection,
    ParallelismSection,
    TrainingSection,
)
from planner.service.models import AuditColumns, JobColumns, SourceColumns


class Open(BaseModel):
    """A model that keeps fields it does not declare (documents of the planner's formats)."""

    model_config = ConfigDict(extra="allow")


def as_document(model: BaseModel) -> dict[str, Any]:
    """The document a client sent, as it sent it (declared fields it left out stay out)."""
    return model.model_dump(exclude_unset=True)


def json_lines_content(description: str) -> dict[str, object]:
    """The OpenAPI ``content`` of a 200 answer in JSON lines (``application/x-ndjson``):
    ``description`` says what each line is."""
    return {"application/x-ndjson": {"schema": {"type": "string", "description": description}}}


def answer(view: BaseModel) -> Response:
    """``view`` as the JSON body of a 200 answer: the fields set when it was built (as the
    routes' ``response_model_exclude_unset`` says), serialised by pydantic's JSON encoder.
    Validated when it was built, it is not validated again: older FastAPI releases of the
    supported range dump a returned model to a dict and validate that against the response
    model (about twice the CPU of a page of jobs); the body is the same either way."""
    return Response(view.model_dump_json(exclude_unset=True), media_type="application/json")


class ErrorResponse(BaseModel):
    """Every error of the API: ``error`` says what is wrong and how to fix it (``field: ...``);
    ``detail`` repeats it for clients of FastAPI's usual error body."""

    error: str
    detail: str


# ---------------------------------------------------------------------------- health


class Health(BaseModel):
    """Liveness."""

    status: str = Field(examples=["ok"])


class Readiness(BaseModel):
    """Readiness: a first ingest cycle succeeded (or there is no source, or this replica is
    not the leader)."""

    ready: bool
    sources: list[str] = Field(description="Names of the polled sources")
    cycles_ok: int = Field(description="Ingest cycles in which every source answered")
    leader: bool = Field(description="Whether this replica runs the ingest loop")
    store: str = Field(
        default="ok",
        description="ok, or why the store cannot be used (database unreachable, SQLite file "
        "deleted or replaced)",
    )
    ingest: str = Field(
        default="ok",
        description="ok, or why the ingest part is unhealthy (first cycle not done, the "
        "ingest process exited or stopped reporting; planner.service.processes)",
    )
    processes: str = Field(
        default="single",
        description="single: the loop runs in this process; split: in the ingest process "
        "this one supervises; api: in an ingest process elsewhere (not needed for ready)",
    )


# ---------------------------------------------------------------------------- predictions


class Prediction(Open):
    """One scenario's prediction (``planner predict --json``), or ``{"name", "error"}`` when it
    is invalid. A job's stored prediction adds the online calibration's fields."""

    name: str | None = None
    iteration_time_s: float | None = None
    tokens_per_s: float | None = None
    tokens_per_s_per_gpu: float | None = None
    model_flops_per_iteration: float | None = None
    model_tflops_per_gpu: float | None = None
    mfu: float | None = Field(default=None, description="Model FLOPs utilisation, ratio")
    hfu: float | None = Field(default=None, description="Hardware FLOPs utilisation, ratio")
    memory_per_gpu_bytes: float | None = None
    fits_in_memory: bool | None = None
    breakdown_s: dict[str, float] | None = None
    moe_routed_compute_s: float | None = Field(
        default=None,
        description="Seconds of compute and pp_bubble the MoE layers' routed experts take",
    )
    memory_breakdown_bytes: dict[str, float] | None = None
    time_to_train_s: float | None = None
    error: str | None = Field(default=None, description="Why the scenario is invalid")


def _keep(value: Any, _handler: Any) -> Any:
    """Validation that keeps the value as sent (the format's parser checks it)."""
    return value


def _unchanged(value: Any) -> Any:
    """Serialization of a value kept as sent: the value itself."""
    return value


_T = TypeVar("_T")
AsSent = Annotated[_T, WrapValidator(_keep), PlainSerializer(_unchanged)]
"""A field whose JSON schema is ``_T``'s while its value is kept as the client sent it: the
format's parser checks it, so that a bad document gets the parser's ``{"name", "error"}`` (the
field and the fix) in its place in a list, as the CLI gives it, not a request-wide 422."""


class ScenarioDocument(Open):
    """A scenario in the scenario format: its sections are the format's schema
    (``planner.scenario.schema``, the field tables of ``docs/scenario-format.md``); the
    planner's parser checks the document and names the field and the fix."""

    name: AsSent[str | int | float | None] = Field(
        default=None, description="Free text, echoed back in the output"
    )
    model: AsSent[ModelSection | None] = None
    hardware: AsSent[HardwareSection | None] = None
    parallelism: AsSent[ParallelismSection | None] = None
    training: AsSent[TrainingSection | None] = None


# ---------------------------------------------------------------------------- jobs


class NodeView(Open):
    """One node of a source's last successful poll."""

    name: str
    state: str
    num_gpus: int = 0
    num_gpus_allocated: int = 0
    gpu_type: str | None = None
    num_cpus: int = 0
    memory_bytes: float = 0.0
    partitions: list[str] = Field(default_factory=list)
    num_cpus_allocated: int = Field(default=0, description="CPUs jobs hold")
    memory_allocated_bytes: float = Field(default=0.0, description="Memory jobs hold")


class SourceView(BaseModel, SourceColumns):
    """Health of one source (a scheduler on one cluster)."""

    age_s: float | None = Field(description="Seconds since the last success")
    stale: bool
    consecutive_failures: int
    last_error: str | None
    warnings: list[str]
    nodes: list[NodeView] | None = Field(
        default=None,
        description="The source's nodes; left out of a page of GET /v1/jobs?limit= (2,000 "
        "nodes would outweigh the page's jobs): list without limit to have them",
    )


class Progress(BaseModel):
    """Iterations done, of how many, and when progress was last seen."""

    iteration: int | None
    train_iters: int | None
    progress_ratio: float | None
    last_progress_s: float | None


class Band(BaseModel):
    """10th, 50th and 90th percentile (None where not finite)."""

    p10: float | None
    p50: float | None
    p90: float | None


class Eta(Open):
    """An ETA (``planner.forecast.eta.EtaEstimate``, each of its fields): step time, remaining
    time and completion time with 10-90 % bands, and what they were made from; the service adds
    ``made_at_s`` when it was made, ``finished`` once the job ended and, for a queued job,
    ``straggler_factor``. A field an estimate stored by another version lacks is null."""

    method: str
    step_time_s: Band
    remaining_s: Band
    completion_time_s: Band | None
    progress_ratio: float | None
    iteration: int | None
    train_iters: int | None
    num_observations: int
    prior_step_time_s: float | None = None
    prior_log_sd: float | None = Field(default=None, description="Log-sd of the model's step time")
    observed_step_time_s: float | None = None
    step_time_log_sd: float | None = None
    pace_log_sd: float | None = Field(
        default=None, description="Long-run log-sd of the pace per iteration"
    )
    prior_weight: float | None = Field(
        default=None, description="The model's share of the pace, 0..1 (null without a model)"
    )
    conflict_z: float | None = None
    pauses_s: float | None = Field(default=None, description="Mean pause time still ahead, s")
    pauses: PauseForecast | None = Field(
        default=None, description="How the pauses still ahead were projected"
    )
    shutdown_s: float | None = Field(
        default=None, description="Shutdown time added, s (taught by the cluster's ended jobs)"
    )
    shutdown_sd_s: float | None = Field(default=None, description="Its standard deviation, s")
    phase_start_iteration: int | None = Field(
        default=None, description="Where the current pace began (null: no change of pace)"
    )
    phase_ratio: float | None = Field(
        default=None, description="The current pace over the pace before it"
    )
    phase_z: float | None = Field(
        default=None, description="That change in long-run standard deviations"
    )
    model_remaining_s: Band | None = Field(
        default=None, description="The model's band of the remaining time before calibration"
    )
    band_calibrated: bool | None = Field(
        default=None, description="Whether the cluster's ended jobs calibrated the bands"
    )
    made_at_s: float | None = None
    finished: bool | None = None
    seen_running: bool | None = Field(
        default=None,
        description="An ended job's: false when the planner first saw it ended (its step time "
        "is learnt from, not fed to the online calibration)",
    )
    straggler_factor: float | None = Field(
        default=None,
        description="A queued job: the expected straggler slowdown its step time includes "
        "(planner.stragglers.exposure)",
    )


class SchedulerReported(BaseModel):
    """Progress the job reports through its scheduler (e.g. a TrainJob's trainerStatus)."""

    progress_ratio: float | None
    remaining_s: float | None
    updated_s: float | None


class GpuUsage(BaseModel):
    """The job's GPU telemetry (``planner.ports.JobGpuUsage``; DCGM through Prometheus)."""

    num_gpus: int = Field(description="GPUs that reported in the window")
    at_s: float
    window_s: float
    gpu_util_ratio: float | None = Field(description="Mean DCGM_FI_DEV_GPU_UTIL, 0..1")
    tensor_active_ratio: float | None = Field(
        description="Mean DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, 0..1"
    )
    sm_active_ratio: float | None = Field(description="Mean DCGM_FI_PROF_SM_ACTIVE, 0..1")
    memory_used_bytes: float | None = Field(description="Most memory used on one GPU")
    least_active_gpu: str | None = Field(description="host/gpu of the least active GPU")
    least_active_ratio: float | None


class LogReading(BaseModel):
    """How far the job's log (its stdout path) was read, and why it is not read when a rule
    refused it or it could not be read (the job-file rule: ``adapters.files``)."""

    path: str
    offset_bytes: int = Field(description="Bytes of the log read so far")
    not_read: str | None = Field(
        default=None,
        description="Why the log is not read (None: it is read at every ingest cycle); "
        "retried every cycle",
    )
    fix: str | None = Field(default=None, description="What makes the log readable")


class QueueForecast(BaseModel):
    """A pending job's predicted start and completion from the queue simulation (the running
    jobs end at their predicted runtimes; ``planner.service.loops.queue_forecast``), beside the
    scheduler's own start estimate, which assumes every running job runs to its time limit.
    Kept once the job starts (the last forecast made while it waited)."""

    made_at_s: float
    start_s: Band | None = Field(description="Predicted start; null: fits no pool")
    completion_s: Band | None = Field(
        description="Predicted completion; null without a predicted runtime"
    )
    scheduler_start_s: float | None = Field(
        description="The scheduler's own start estimate (Slurm's StartTime), not the planner's"
    )
    runtime_from: str = Field(
        description="Where the job's runtime came from: eta, time_limit or none"
    )
    fleet: str = Field(description="The pools simulated: nodes, or the fleet file")
    samples: int
    reason: str | None = Field(default=None, description="Why there is no forecast")


class JobSummary(BaseModel, JobColumns):
    """One job: scheduler state, description, progress, prediction and ETA."""

    partition: str | None
    num_gpus: int | None
    gpus_allocated: bool | None
    gpu_type: str | None
    num_nodes: int | None
    node_list: list[str] | None
    submit_time_s: float | None
    start_time_s: float | None
    end_time_s: float | None
    time_limit_s: float | None
    stdout_path: str | None
    described_by: str = Field(
        description="scenario_file, the launch reader that recognised the job's launch "
        "(torchtitan, nemo2, megatron, hf_trainer, ...; `planner describe`) or none"
    )
    description: str = Field(description="The scenario path, or why there is none")
    progress: Progress
    prediction: Prediction | None
    eta: Eta | None
    scheduler_reported: SchedulerReported | None
    first_seen_s: float
    last_seen_s: float
    ended_s: float | None
    data_age_s: float | None = Field(description="Age of the source's last success, s")
    stale: bool
    # ETA: how an ended job's ETAs did
    outcome: dict[str, Any] | None = Field(
        default=None,
        description="Once the job ended: its real end and duration, the p50 error of its ETAs at "
        "10/30/50/90 % progress (ratio of its duration), the share of its bands that held the "
        "end, its shutdown",
    )
    queue_forecast: QueueForecast | None = None


class StepSample(BaseModel):
    """One progress observation: mean step time over ``num_iterations`` ending at
    ``iteration``, observed at ``time_s``."""

    iteration: int
    step_time_s: float | None
    num_iterations: int
    time_s: float
    loss: float | None


class LaunchFacts(BaseModel):
    """Where the values of a launch description came from (``planner describe --json``)."""

    provenance: dict[str, str] = Field(
        description="Dotted scenario field -> its source: file:line, override, default of a "
        "framework, catalog:<name>, derived, launch"
    )
    assumed: list[str] = Field(description="Fields filled by documented defaults")
    unknown: list[str] = Field(description="Fields no source determined")
    launch: dict[str, Any] = Field(
        description="Launch facts outside the scenario format (num_nodes, fsdp_shard, ...)"
    )
    notes: list[str]


class JobEvent(Open):
    """Something that happened in the job's run besides its steps
    (``planner.service.job_events``): ``kind`` ``phase`` (a sustained change of pace, with its
    ``ratio`` to the pace before), ``evaluation``, ``checkpoint``, ``pause`` (with its
    ``duration_s``) or ``restart``, from ``iteration``, seen at ``time_s``. The fields of one
    kind only are absent from the others."""

    kind: str
    iteration: int
    time_s: float
    description: str
    duration_s: float | None = None
    ratio: float | None = None
    seen_iteration: int | None = Field(
        default=None, description="A phase: the iteration at which the change was seen"
    )
    explained_by: str | None = Field(
        default=None, description="A phase: the flagged straggler rank that explains it"
    )
    until_iteration: int | None = Field(
        default=None, description="A pause: the iteration that ended the interval holding it"
    )
    from_iteration: int | None = Field(
        default=None, description="A restart: the iteration it went back from"
    )


class JobDetail(JobSummary):
    """One job in detail: its scenario, scheduler snapshot, step samples, ETA history, events
    (phases, pauses, restarts) and GPU telemetry."""

    scenario: dict[str, Any] | None
    launch_description: LaunchFacts | None = None
    state: dict[str, Any]
    samples: list[StepSample]
    eta_history: list[Eta]
    events: list[JobEvent] = Field(
        default_factory=list,
        description="Phases (sustained changes of pace), evaluation and checkpoint pauses and "
        "restarts, oldest first",
    )
    gpus: GpuUsage | None
    log: LogReading | None = Field(
        default=None, description="The job's log as read (None: no log read yet)"
    )


class JobList(BaseModel):
    """Jobs and the health of their sources."""

    generated_at_s: float
    stale: bool = Field(description="True when any source is stale")
    sources: list[SourceView]
    jobs: list[JobSummary]
    next_cursor: str | None = Field(
        default=None, description="With ?limit=: pass as ?cursor= for the next page (None: last)"
    )


class Stragglers(Open):
    """Straggler analysis of a job: live (per-rank timings) or from the trace it names.

    ``available`` False comes with ``reason``. A live analysis adds the tracker's report
    (``slowdown``, ``stragglers``, ``slow_nodes``, ``hours_lost``, ``action``, ``advice``, ...);
    a trace analysis adds the what-if report (``planner stragglers --json``) and its
    ``impact``."""

    scheduler: str
    cluster: str
    job_id: str
    status: str
    available: bool
    source: str | None = Field(default=None, description="live or trace")
    reason: str | None = None
    slowdown: float | None = None
    stragglers: list[dict[str, Any]] | None = None
    diagnosis: str | None = None
    predicted_completion_without_stragglers_s: float | None = None
    slow_nodes: list[dict[str, Any]] | None = Field(
        default=None,
        description="Live: nodes whose ranks are all slower than the other nodes' (node, ranks, "
        "kind, slowdown, since_iteration), reported instead of their ranks",
    )


class TraceReport(Open):
    """What-if straggler analysis of a trace (``planner stragglers --json``; Lin et al., OSDI
    '25): slowdown, ideal and actual step time, attribution and diagnosis."""

    slowdown: float
    ideal_step_time_s: float
    actual_step_time_s: float
    by_worker: list[dict[str, Any]]
    by_stage: dict[str, float]
    stragglers: list[dict[str, Any]]
    diagnosis: str
    explanation: str


# ---------------------------------------------------------------------------- plans


class ExploreResult(Open):
    """One explore document's answer (``planner explore --json``): the top-k layouts, the
    Pareto front and counts per rejection reason, or ``{"name", "error"}``."""

    name: str | None = None
    objective: str | None = None
    top: list[dict[str, Any]] | None = None
    pareto: list[dict[str, Any]] | None = None
    counts: dict[str, Any] | None = None
    error: str | None = None


class ExplorePage(BaseModel):
    """A page of a list of explore documents."""

    results: list[ExploreResult]
    total: int
    offset: int
    limit: int
    next_offset: int | None


class RecommendResult(Open):
    """A recommend document's answer (``planner recommend --json``): scaling curve, knee,
    smallest allocation meeting the deadline, restart advice, or ``error``."""

    name: str | None = None
    scaling: list[dict[str, Any]] | None = None
    knee: list[dict[str, Any]] | None = None
    recommendation: dict[str, Any] | None = None
    smallest_meeting_deadline: dict[str, Any] | None = None
    running: dict[str, Any] | None = None
    error: str | None = None


# ---------------------------------------------------------------------------- calibrations


class CalibrationGroup(BaseModel):
    """One group of the online correction (cluster, GPU, model level)."""

    level: str
    group: list[Any]
    factor: float = Field(description="Observed over predicted step time")
    log_sd: float
    num_jobs: int
    latest_time_s: float
    component: str = Field(
        default="step",
        description="What the factor multiplies: the whole step (step), or the compute or "
        "network terms of the model's breakdown",
    )


class OnlineCalibrationView(BaseModel):
    """The online correction learnt from running jobs, with the model's error per cluster."""

    num_samples: int
    groups: list[CalibrationGroup]
    model_error: list[dict[str, Any]]
    updated_s: float | None = None


class OperatorCalibrationView(BaseModel):
    """Operator and collective models fitted from uploaded samples."""

    name: str
    updated_s: float
    device: dict[str, Any] | None = Field(
        description="The sampled device: device, device_name, torch_version, hostname, ..."
    )
    summary: list[str]


class EtaBandBucket(BaseModel):
    """The band calibration of one progress bucket: log offsets of the p10 and p90 edges."""

    progress: str = Field(examples=["10-25%"])
    lower_log_offset: float
    upper_log_offset: float
    num_jobs: int = Field(description="Finished jobs behind it (0: the model's band)")


class EtaCalibrationView(BaseModel):
    """What a cluster's finished jobs taught the ETA (``planner.service.loops.outcomes``)."""

    scheduler: str
    cluster: str
    num_jobs: int = Field(description="Finished jobs in the band calibration")
    band_coverage_ratio: float | None = Field(
        description="Share of the published p10-p90 bands that held the real end"
    )
    shutdown_s: float = Field(description="Time from the last iteration to the job's end")
    restart_overhead_s: float | None = None
    buckets: list[EtaBandBucket]


class SkippedRun(BaseModel):
    """A finished job not learnt from, and why (``<field>: <what is wrong>``)."""

    job_id: str
    reason: str


class LearntCalibrationView(BaseModel):
    """One cluster's observed-runs calibration, learnt from the jobs it saw finish
    (``planner.service.learning``)."""

    scheduler: str
    cluster: str
    fitted_s: float = Field(description="When it was fitted (epoch s)")
    num_runs: int = Field(description="Finished jobs it was fitted on")
    num_skipped: int = Field(description="Finished jobs left out, each with its reason")
    skipped: list[SkippedRun] = Field(description="The newest of those, with their reasons")
    held_out_error_ratio: float | None = Field(
        description="Mean |predicted / measured - 1| of its runs, each predicted by a fit "
        "without it (5-fold cross-validation); None with fewer than 2 runs"
    )
    model_error_ratio: float | None = Field(
        description="The same for the uncorrected model, on the same runs"
    )
    online_error_ratio: float | None = Field(
        description="The same for the online calibration's corrections, on the same runs"
    )
    applied: bool = Field(
        description="Whether predictions use it where nothing else corrects them (held-out "
        "error no worse than the model's)"
    )
    replaces_online: bool = Field(
        description="Whether it also replaces the online calibration's correction of a job "
        "(held-out error measured and no worse than the online calibration's)"
    )
    reason: str = Field(description="Why it is applied or not")
    cpu_s: float = Field(description="CPU seconds the fit took")
    keys: list[dict[str, Any]] = Field(
        description="Per key (GPU, recipe, framework, family): runs, compute and network "
        "factors, memory factor, the model's median error on them"
    )


class Calibrations(BaseModel):
    """What the planner has learnt."""

    online: OnlineCalibrationView
    operators: list[OperatorCalibrationView]
    eta: list[EtaCalibrationView] = Field(default_factory=list)
    learnt: list[LearntCalibrationView] = Field(default_factory=list)


class CalibrationUploaded(BaseModel):
    """A stored operator calibration: its name and its summary lines."""

    name: str
    summary: list[str]


# ---------------------------------------------------------------------------- access and audit


class AuditRecord(BaseModel, AuditColumns):
    """One audited write: who (``actor``), what (``action`` on ``target``), why (``reason``)."""


class AuditPage(BaseModel):
    """The newest audit records, newest first."""

    records: list[AuditRecord]
