"""Request and response models of the capacity-review routes (``planner.service.api.reviews``):
the review's JSON (``docs/capacity-formats.md``, "Output: review.json") as pydantic models, so
``/openapi.json`` documents it. Times are epoch seconds (UTC); a quantile is null when the job
does not start or complete within the horizon."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# the core's JSON types, used as they are (pydantic validates and documents TypedDicts)
from planner.capacity.review import ComparisonRow
from planner.capacity.stats import Summary
from planner.service.models import ReviewColumns

#: The schema's bound on samples; the service's own is ``limits.review_max_samples``.
MAX_SAMPLES = 10_000
MAX_WHAT_IFS = 20


class Quantiles(BaseModel):
    """10th, 50th and 90th percentile over the Monte Carlo samples (null: not within the
    horizon)."""

    p10: float | None
    p50: float | None
    p90: float | None


class SeriesQuantiles(BaseModel):
    """Per-bin 10th, 50th and 90th percentiles."""

    p10: list[float | None]
    p50: list[float | None]
    p90: list[float | None]


#: A small review that runs in well under a second: one pool of 64 H100, one planned job.
REVIEW_EXAMPLE: dict[str, Any] = {
    "fleet": {
        "name": "example",
        "scheduler": "slurm",
        "start": "2025-07-01",
        "horizon_days": 30,
        "pools": [{"name": "h100", "gpu": "h100-sxm", "num_gpus": 64}],
    },
    "plan": {
        "jobs": [
            {
                "name": "llama3-8b",
                "scenario": {
                    "model": {"preset": "llama3-8b"},
                    "parallelism": {"tensor_parallel": 2, "global_batch_size": 128},
                },
                "total_tokens": 2.0e10,
                "gpu": "h100-sxm",
                "num_gpus": 16,
                "deadline": "+20d",
            }
        ]
    },
    "live_jobs": False,
    "samples": 20,
    "sizing": False,
}


class ReviewRequest(BaseModel):
    """A review to run: the documents of ``planner review`` as JSON (formats in
    ``docs/capacity-formats.md``; dates may be relative to the review's start, ``+19d``)."""

    # strict: a value of another JSON type (``"sizing": 0``, ``"samples": "200"``) is a 422,
    # as the schema says, not converted
    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra={"examples": [REVIEW_EXAMPLE]}
    )

    fleet: dict[str, Any] = Field(description="A fleet document: pools, scheduler, horizon")
    plan: dict[str, Any] | None = Field(
        default=None, description="A plan document (upcoming jobs); none: today's queue only"
    )
    what_ifs: list[dict[str, Any]] = Field(
        default_factory=list,
        max_length=MAX_WHAT_IFS,
        description="What-if scenarios (each a what-if document's mapping)",
    )
    jobs: dict[str, Any] | None = Field(
        default=None,
        description="A jobs snapshot document (today's running and pending jobs); none: the "
        "service's own active jobs with their ETAs (unless live_jobs is false)",
    )
    live_jobs: bool = Field(default=True, description="Include the service's active jobs")
    start: str | float | None = Field(
        default=None,
        description="Review start (ISO date/time UTC, or epoch s); none: the later of the "
        "fleet's start and the queue's time (now, for the live jobs)",
    )
    samples: int = Field(
        default=200,
        ge=1,
        le=MAX_SAMPLES,
        description="Monte Carlo samples (at most limits.review_max_samples, default 2000)",
    )
    seed: int = Field(default=0, description="Seed of the random draws")
    sizing: bool = Field(default=True, description="Search the smallest addition per GPU type")
    sizing_samples: int | None = Field(default=None, ge=1, le=MAX_SAMPLES)


class JobForecastView(BaseModel):
    """One job's forecast: start and completion quantiles, deadline risk."""

    name: str
    kind: str = Field(description="running, pending or planned")
    team: str
    pool: str | None
    num_gpus: int
    start_s: Quantiles
    completion_s: Quantiles
    deadline_s: float | None
    miss_probability: float | None = Field(description="Share of samples missing the deadline")
    timeout_probability: float = Field(description="Share of samples killed by the time limit")
    layout: str = ""
    wait_s: dict[str, float | None] = Field(default_factory=dict, description="p50, p90 queued")
    miss_cause: str | None = Field(default=None, description="capacity, failure or time limit")
    runtime_p90_s: float | None = None
    time_limit_s: float | None = None
    failures_mean: float = 0.0
    limit_kills_mean: float = 0.0
    lost_gpu_hours_mean: float = 0.0
    checkpoint_interval_s: float | None = None
    note: str = ""
    preemptions_mean: float = Field(default=0.0, description="Runs Kueue evicted per sample")
    preempted_gpu_hours_mean: float = Field(default=0.0, description="GPU-hours they cost")


class PoolWeekView(BaseModel):
    """One pool in one week: capacity, busy GPU-hours, utilisation, occupancy and demand."""

    pool: str
    week_start_s: float
    capacity_gpu_hours: float
    busy_gpu_hours: Quantiles
    utilisation: float
    idle_gpu_hours: float
    occupied_gpus: Quantiles
    demand_gpus: Quantiles


class TeamUsageView(BaseModel):
    """GPU-hours and cost of one team."""

    team: str
    gpu_hours_mean: float
    gpu_hours_p10: float
    gpu_hours_p90: float
    cost_mean: float | None
    lost_gpu_hours_mean: float = 0.0
    quota_gpu_hours: float | None = None
    queued_gpu_hours_mean: float = 0.0
    quota_use: float | None = None
    preemptions_mean: float = Field(default=0.0, description="Runs Kueue evicted per sample")
    preempted_gpu_hours_mean: float = Field(default=0.0, description="GPU-hours they cost")


class OccupancyView(BaseModel):
    """Occupied GPUs of one pool over time (6-hour bins)."""

    pool: str
    edges_s: list[float]
    capacity_gpus: list[float]
    occupied_gpus: SeriesQuantiles
    demand_gpus_p50: list[float | None]


class ScenarioView(BaseModel):
    """One scenario's forecast."""

    name: str
    num_samples: int
    summary: Summary
    jobs: list[JobForecastView]
    pool_weeks: list[PoolWeekView]
    teams: list[TeamUsageView]
    occupancy: list[OccupancyView]
    excluded: list[dict[str, Any]] = Field(description="Jobs that fit no pool: name, reason")
    warnings: list[str]
    queues: list[dict[str, Any]] = Field(default_factory=list, description="ClusterQueue use")
    fleet_cost_mean: float | None = None
    held_gpu_hours_mean: float = 0.0
    lost_gpu_hours_mean: float = 0.0
    goodput: float | None = None


class SizingView(BaseModel):
    """The smallest addition of one GPU type meeting every deadline at p90."""

    gpu: str
    pool: str
    gpus_added: int | None
    latest_date_s: float | None
    unfixable: list[str]
    evaluations: int
    answer: str = ""


class ReviewResult(BaseModel):
    """A capacity review (``planner review``'s ``review.json``)."""

    start_s: float
    horizon_s: float
    num_samples: int
    seed: int | None
    comparison: list[ComparisonRow]
    scenarios: list[ScenarioView]
    sizing: list[SizingView]
    not_capacity: list[dict[str, Any]] = Field(
        default_factory=list, description="Missed deadlines no capacity saves, with the fix"
    )
    model_note: str = ""


class StoredReview(BaseModel, ReviewColumns):
    """A review the service ran on its schedule (``error`` when it could not run)."""

    summary: list[ComparisonRow] | None


class LatestReview(StoredReview):
    """The newest stored review that ran, with its result."""

    result: ReviewResult


class StoredReviews(BaseModel):
    """The stored reviews, newest first."""

    reviews: list[StoredReview]


class SnapshotJob(BaseModel):
    """A job of the jobs snapshot: its scheduler fields (``JobState``) and predicted runtime."""

    model_config = ConfigDict(extra="allow")

    job_id: str
    status: str
    num_gpus: int
    runtime_s: dict[str, float] = Field(description="p10_s, p50_s, p90_s")


class QueueSnapshotView(BaseModel):
    """Today's running and pending jobs with their predicted runtimes, in the jobs-snapshot
    format ``planner review --jobs`` reads."""

    taken_at: float
    jobs: list[SnapshotJob]
