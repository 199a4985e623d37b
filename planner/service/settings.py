"""Service settings: environment variables (``PLANNER_*``) over an optional YAML config file.

Precedence, highest first: constructor arguments, environment variables (``PLANNER_PORT=9000``,
nested with ``__``: ``PLANNER_SLURM__COMMAND_TIMEOUT_S=5``), the YAML file named by
``PLANNER_CONFIG_FILE`` (same keys, nested mappings), then the embedded defaults below. With no
configuration at all the service starts on 127.0.0.1:8080 with a SQLite store in
``$XDG_STATE_HOME/llm-capacity-planner/planner.db`` (``~/.local/state/...`` when unset) and
watches Slurm when its commands are on ``PATH``.
"""

from __future__ import annotations

import os
import re
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, TypedDict

from apscheduler.triggers.cron import CronTrigger
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from planner.errors import SpecError
from planner.service.security_settings import AuthSettings, LimitSettings, RetentionSettings

CONFIG_FILE_ENV = "PLANNER_CONFIG_FILE"


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/llm-capacity-planner`` or ``~/.local/state/llm-capacity-planner``."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "llm-capacity-planner"


def default_database_url() -> str:
    """SQLite file in :func:`default_state_dir` (the directory is created on start)."""
    return f"sqlite:///{default_state_dir() / 'planner.db'}"


class Toggle(StrEnum):
    """``auto`` enables a source when it is detected (e.g. Slurm commands on PATH)."""

    AUTO = "auto"
    ON = "on"
    OFF = "off"


class SlurmSettings(BaseModel):
    """How the planner reaches Slurm: its command-line tools on this host."""

    model_config = ConfigDict(extra="forbid")

    enabled: Toggle = Field(
        default=Toggle.AUTO,
        description="auto: on when squeue and sinfo are on PATH (or in bin_dir); the service "
        "logs which sources it found.",
    )
    cluster: str | None = Field(
        default=None, description="Cluster label; default: Slurm's ClusterName."
    )
    bin_dir: str | None = Field(
        default=None, description="Directory of squeue/sinfo/sacct; default: PATH."
    )
    command_timeout_s: float = Field(
        default=10.0, gt=0, le=300, description="Longest run of one Slurm command, seconds."
    )
    use_sacct: bool | None = Field(
        default=None, description="Read ended jobs from sacct; None = detect accounting."
    )
    hints: Literal["off", "comment", "enforce"] = Field(
        default="off",
        description="Write planner:hint= tokens into job comments (comment), and also lower "
        "TimeLimit from the predicted runtime (enforce).",
    )
    hints_file: str | None = Field(
        default=None, description="Hints file for deploy/slurm/job_submit.lua (local path)."
    )
    allowed_file_roots: list[str] = Field(
        default_factory=list,
        description="Directories (besides each job's own working directory) under which the "
        "files a job names (planner:scenario=, planner:trace=) may be read, as the job's user "
        "would see them; default: none.",
    )


class AdmissionCheckSettings(BaseModel):
    """The planner's Kueue AdmissionCheck (opt-in): advisory ``Ready`` with the prediction in the
    message, or gating (``Retry``/``Rejected``) for the listed queues only."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        default=False,
        description="Be the controller of the Kueue AdmissionCheck named by controller_name.",
    )
    controller_name: str = Field(
        default="planner.llm/llm-capacity-planner",
        description="The AdmissionCheck's controllerName the planner answers for.",
    )
    gating_queues: list[str] = Field(
        default_factory=list,
        description="LocalQueues (namespace/name) or ClusterQueues whose workloads may be held.",
    )
    grace_period_s: float = Field(
        default=120.0,
        gt=0,
        description="With no fresh prediction the check turns Ready after this long, so the "
        "planner never blocks admission on its own, seconds.",
    )


class PublishSettings(BaseModel):
    """Predictions written onto Kubernetes objects (``adapters.kubernetes.publish``,
    docs/kubernetes.md): the predicted admission of pending Kueue Workloads (a condition and
    annotations), the progress and ETA band of running TrainJobs, the expected runtime of every
    job. Each is off by default; the leader writes, only when a value moved enough."""

    model_config = ConfigDict(extra="forbid")

    workload_admission: bool = Field(
        default=False,
        description="Pending Kueue Workloads: the condition (status subresource, server-side "
        "apply) and planner.llm/predicted-admission-p50/-p90 annotations.",
    )
    trainjob_progress: bool = Field(
        default=False,
        description="Running TrainJobs: planner.llm/progress-ratio and "
        "planner.llm/eta-p10/-p50/-p90 annotations.",
    )
    expected_runtime: bool = Field(
        default=False,
        description="Every job: planner.llm/expected-runtime, the p90 of its whole run's wall "
        "time as a Go duration (26h40m).",
    )
    condition_type: str = Field(
        default="PredictedAdmission",
        min_length=1,
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
        r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        description="The Workload condition's type (a domain prefix such as "
        "planner.llm/PredictedAdmission keeps it apart from Kueue's own types).",
    )
    min_change_s: float = Field(
        default=60.0,
        ge=0,
        le=86400,
        description="A published time is rewritten only when it moved by more than "
        "max(min_change_s, min_change_ratio x the time still ahead), seconds.",
    )
    min_change_ratio: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="See min_change_s; an expected runtime is rewritten when it moved by "
        "more than this share of itself.",
    )


class KubernetesSettings(BaseModel):
    """How the planner reaches Kubernetes: in-cluster config or a kubeconfig."""

    model_config = ConfigDict(extra="forbid")

    enabled: Toggle = Field(
        default=Toggle.AUTO,
        description="auto: on when running in a pod (KUBERNETES_SERVICE_HOST) or a kubeconfig "
        "is named in KUBECONFIG.",
    )
    cluster: str = Field(default="kubernetes", description="Cluster label of its jobs.")
    namespace: str | None = Field(default=None, description="Watch one namespace; None: all.")
    kubeconfig: str | None = Field(
        default=None, description="A kubeconfig file; default: in-cluster config, or KUBECONFIG."
    )
    leader_election: bool = Field(
        default=True,
        description="Replicas elect a leader over a coordination.k8s.io Lease: only the leader "
        "ingests and writes, all serve reads from the shared store.",
    )
    lease_name: str = Field(default="llm-capacity-planner", description="The Lease's name.")
    lease_namespace: str = Field(
        default_factory=lambda: os.environ.get("POD_NAMESPACE", "default"),
        description="The Lease's namespace: the pod's own (POD_NAMESPACE), else default.",
    )
    identity: str | None = Field(default=None, description="Leader identity; default hostname.")
    hint_annotations: bool = Field(
        default=False, description="Write planner.llm/* prediction annotations on job objects."
    )
    admission_check: AdmissionCheckSettings = Field(default_factory=AdmissionCheckSettings)
    publish: PublishSettings = Field(default_factory=PublishSettings)
    allowed_file_roots: list[str] = Field(
        default_factory=list,
        description="Mounted directories under which a planner.llm/scenario annotation or a "
        "trace hint may name a world-readable file; default: none.",
    )


class PrometheusSettings(BaseModel):
    """Training metrics that jobs export (``adapters/prometheus/job_exporter.py``), read from
    Prometheus for progress and per-rank straggler detection, and the GPU telemetry of
    dcgm-exporter (utilisation, tensor-core activity per job); off without a URL."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(default=None, description="e.g. http://prometheus:9090")
    timeout_s: float = Field(
        default=10.0, gt=0, le=300, description="Longest Prometheus query, seconds."
    )
    slurm_job_label: str = Field(default="job_id", description="Label carrying a Slurm job id.")
    step_s: float = Field(default=15.0, gt=0, description="Range-query step, <= scrape interval.")
    gpu_window_s: float = Field(
        default=300.0,
        gt=0,
        le=86400,
        description="GPU telemetry (DCGM) is averaged over this window, seconds.",
    )


# ---------------------------------------------------------------- capacity reviews


class QueueForecastSettings(BaseModel):
    """Predicted start and completion of every pending job (``/v1/jobs``), from the running
    jobs' predicted runtimes, by the review's simulator (``planner.capacity.forecast_pending``)
    once per ingest cycle."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        default=True, description="Forecast the pending jobs' start and completion."
    )
    samples: int = Field(default=100, ge=1, le=2000, description="Monte Carlo samples.")
    interval_s: float = Field(
        default=30.0,
        ge=0,
        description="Least time between two forecasts of an unchanged queue (a job starting, "
        "ending or arriving forecasts at once).",
    )
    fleet_file: str | None = Field(
        default=None,
        description="A fleet file (docs/capacity-formats.md) instead of the pools made from the "
        "sources' nodes (one per partition and GPU type).",
    )
    place_on_nodes: bool = Field(
        default=False,
        description="Place jobs on the nodes (each node's free CPUs, memory and GPUs, whole "
        "nodes for exclusive jobs; CPU-only jobs take part) when the source reports what each "
        "job asks of and holds on each node (Slurm), instead of pooling GPUs per partition and "
        "type. Closer to when Slurm starts jobs (median start error 0.10 of the wait against "
        "0.16 on the dev Slurm's scripted mix, benchmarks/results/pending_replay.md) but 6-8 "
        "times the CPU of the pool model, so off by default.",
    )
    backfill_interval_s: float | None = Field(
        default=None,
        ge=0,
        description="Seconds between two of Slurm's backfill cycles (slurm.conf "
        "SchedulerParameters bf_interval): a job behind a partition's first waiting job starts "
        "only in one, so a gap shorter than this between two jobs' ends is mostly not "
        "backfilled. Unset: the cluster's own, as `scontrol show config` says it (30, Slurm's "
        "default, when the source does not say). 0: at every job end.",
    )
    worker_min_jobs: int = Field(
        default=1000,
        ge=0,
        description="Queues of at least this many active jobs are forecast in a worker "
        "process, off the ingest cycle (the forecast lands a cycle or more later; the worker "
        "rests as long as its last forecast took); 0: always in the cycle.",
    )


class LearningSettings(BaseModel):
    """What the service learns from the jobs it saw finish (``planner.service.learning``):
    each finished job with a description and a measured step time is kept as an observed run,
    and each cluster's observed-runs calibration (``planner calibrate observe``'s) is fitted
    again from its newest runs on a schedule of its own, off the ingest cycle."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        default=True, description="Keep finished jobs as observed runs and fit the calibration."
    )
    apply: bool = Field(
        default=True,
        description="Correct predictions with the cluster's learnt calibration where its "
        "held-out error is no worse than the uncorrected model's: POST /v1/predict?cluster= "
        "and jobs the online calibration does not correct; a job's online correction only "
        "where the learnt one is at least as specific and its held-out error is also no worse "
        "than the online calibration's.",
    )
    interval_s: float = Field(
        default=60.0,
        gt=0,
        le=86400,
        description="How often new runs are looked for; a cluster with new runs is fitted "
        "again (at most once per interval).",
    )
    max_runs: int = Field(
        default=2000, ge=1, le=100_000, description="Newest runs of a cluster one fit reads."
    )
    keep_runs: int = Field(
        default=10_000, ge=1, le=1_000_000, description="Runs kept per cluster (newest)."
    )
    fit_cpu_budget_s: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="CPU seconds of one cluster's fit: its held-out error is left out when "
        "the fit itself took most of it.",
    )
    min_iterations: int = Field(
        default=20,
        ge=1,
        description="Iterations a job must have run to count (before, its mean step time is "
        "mostly warm-up).",
    )


class MetricsSettings(BaseModel):
    """What ``/metrics`` exports per job (``planner.service.job_series``)."""

    model_config = ConfigDict(extra="forbid")

    max_pending_jobs: int = Field(
        default=500,
        ge=0,
        description="The most pending jobs (with a prediction; soonest predicted start first) "
        "that get series of their own; every active job is counted in planner_jobs.",
    )


class ServiceSettings(BaseModel):
    """Which processes ``planner serve`` runs (``planner.service.processes``)."""

    model_config = ConfigDict(extra="forbid")

    processes: Literal["single", "split"] = Field(
        default="split",
        description="split: the API in this process and the ingest loop in a child process "
        "it supervises (restarted when it dies), so a page never waits on a cycle; single: "
        "both in one process (for debugging and tests: a page then shares the interpreter "
        "lock with the cycle). Both share the store.",
    )
    role: Literal["all", "api", "ingest"] = Field(
        default="all",
        description="all: what service.processes says; api: only the API (reads what an "
        "ingest process elsewhere stores; its /readyz needs only the store); ingest: only the "
        "ingest loop, leader election and what the leader publishes, no HTTP port (one "
        "container or Deployment each, sharing a PostgreSQL store or a SQLite file on one "
        "volume).",
    )


class ReviewSettings(BaseModel):
    """The capacity review the service runs on a schedule and stores (``GET
    /v1/reviews/latest``, the ``planner_capacity_*`` metrics)."""

    model_config = ConfigDict(extra="forbid")

    schedule: str | None = Field(
        default=None,
        description="When to run: a crontab line (5 fields, UTC: '0 6 * * 1') or an interval "
        "('6h', '30m', '1d', '3600s'); None: no scheduled review.",
    )
    fleet_file: str | None = Field(default=None, description="The fleet file (required).")
    plan_file: str | None = Field(default=None, description="The plan file (required).")
    what_if_files: list[str] = Field(default_factory=list, description="What-if files.")
    live_jobs: bool = Field(
        default=True, description="Include the service's running and pending jobs."
    )
    samples: int = Field(
        default=200, ge=1, le=10000, description="Monte Carlo samples per scenario."
    )
    sizing: bool = Field(
        default=True,
        description="Search the smallest addition per GPU type that meets every deadline at p90.",
    )
    sizing_samples: int | None = Field(
        default=None,
        ge=1,
        le=10000,
        description="Samples per sizing run; default: min(samples, 100).",
    )
    seed: int = Field(default=0, description="Seed of the random draws.")
    run_on_start: bool = Field(default=True, description="Also run once when the service starts.")
    keep: int = Field(default=20, ge=1, le=1000, description="Stored reviews kept (newest).")
    ray_address: str | None = Field(
        default=None, description="Run the Monte Carlo samples on this Ray cluster ([ray] extra)."
    )

    @model_validator(mode="after")
    def _files_with_schedule(self) -> ReviewSettings:
        if self.schedule is not None:
            parse_schedule(self.schedule)
            if not self.fleet_file or not self.plan_file:
                raise ValueError("a review schedule needs review.fleet_file and review.plan_file")
        return self


_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_INTERVAL_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class IntervalFields(TypedDict):
    """The arguments of APScheduler 3's ``interval`` trigger that a schedule sets."""

    seconds: float


class CronFields(TypedDict):
    """The arguments of APScheduler 3's ``cron`` trigger: a crontab line's 5 fields."""

    minute: str
    hour: str
    day: str
    month: str
    day_of_week: str


def parse_schedule(text: str) -> tuple[str, IntervalFields | CronFields]:
    """An APScheduler 3 trigger for ``review.schedule``: ``("interval", {"seconds": s})`` for
    ``6h``/``30m``/``1d``/``3600s``, ``("cron", fields)`` for a 5-field crontab line (UTC; its
    day-of-week numbers, 0 or 7 = Sunday, become names). Raises ``ValueError`` saying what to
    write."""
    if match := _INTERVAL.match(text):
        seconds = float(match[1]) * _INTERVAL_S[match[2]]
        if seconds < 60:
            raise ValueError(f"review.schedule {text!r}: at least one minute apart")
        interval: IntervalFields = {"seconds": seconds}
        return "interval", interval
    fields = text.split()
    if len(fields) != 5:
        raise ValueError(
            f"review.schedule {text!r} is neither an interval (6h, 30m, 1d) nor a crontab line "
            "of 5 fields (minute hour day month day-of-week, UTC), e.g. '0 6 * * 1'"
        )
    minute, hour, day, month, day_of_week = fields
    # crontab numbers days from Sunday (0 or 7); APScheduler 3 from Monday: use the names.
    days = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")
    cron: CronFields = {
        "minute": minute,
        "hour": hour,
        "day": day,
        "month": month,
        "day_of_week": re.sub(r"(?<![/\d])[0-7](?!\d)", lambda m: days[int(m[0])], day_of_week),
    }
    try:
        CronTrigger(**cron, timezone="UTC")
    except ValueError as exc:
        raise ValueError(f"review.schedule {text!r}: {exc}") from None
    return "cron", cron


class Settings(BaseSettings):
    """Every knob of ``planner serve``; see the module docstring for where values come from."""

    model_config = SettingsConfigDict(
        env_prefix="PLANNER_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    host: str = Field(
        default="127.0.0.1",
        description="Bind address (planner serve --host). A non-loopback address in token "
        "mode needs auth.token_file.",
    )
    port: int = Field(default=8080, ge=0, le=65535, description="Port (planner serve --port).")
    allowed_hosts: list[str] = Field(
        default_factory=lambda: ["localhost", "127.0.0.1", "::1"],
        description="Host names the API answers to (the Host header; port ignored): names, "
        "'*.suffix' for every name under suffix, '*' for any; IP addresses are always "
        "accepted. Others get 421: a DNS-rebinding page is served under a name of its own.",
    )
    database_url: str = Field(
        default_factory=default_database_url,
        description="SQLAlchemy URL of the store: SQLite by default, PostgreSQL "
        "(postgresql+psycopg://...; the [postgres] extra) for more than one replica. Alembic "
        "migrations are applied on start.",
    )
    ingest_interval_s: float = Field(
        default=15.0, gt=0, le=3600, description="Seconds between two polls of each source."
    )
    log_level: str = Field(
        default="INFO",
        description="Python logging level; DEBUG also logs the scheduler's and the "
        "migrations' per-cycle lines.",
    )
    model_prior_log_sd: float = Field(
        default=0.3,
        gt=0,
        le=5,
        description="Log-space sd of the performance model's step-time prediction, the prior "
        "of the ETA blend (uncalibrated analytic model: ~30%).",
    )
    max_log_bytes_per_cycle: int = Field(
        default=4 * 1024 * 1024, gt=0, description="Most bytes read from one job's log per cycle."
    )
    max_scenario_file_bytes: int = Field(
        default=1024 * 1024, gt=0, description="Largest scenario file a job may name."
    )
    ended_job_retention_s: float = Field(
        default=7 * 24 * 3600.0,
        gt=0,
        description="Ended jobs stay in the store (and /v1/jobs) this long, then are pruned.",
    )
    trace_analysis_interval_s: float = Field(
        default=300.0,
        gt=0,
        description="Least time between two what-if analyses of the trace a job names.",
    )
    slurm: SlurmSettings = Field(default_factory=SlurmSettings)
    kubernetes: KubernetesSettings = Field(default_factory=KubernetesSettings)
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)
    # planner.service.security_settings: who may call, bounded work, retention.
    auth: AuthSettings = Field(default_factory=AuthSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    read_only: bool = Field(
        default=False,
        description="Refuse every state-changing request (403) and write nothing to the "
        "schedulers (no hints, no admission decisions).",
    )
    shutdown_grace_s: float = Field(
        default=15.0,
        gt=0,
        le=300,
        description="After SIGTERM, requests in flight get this long, the loops 10 s more; "
        "then the process exits (keep the sum under terminationGracePeriodSeconds, 30 s).",
    )
    queue_forecast: QueueForecastSettings = Field(default_factory=QueueForecastSettings)
    review: ReviewSettings = Field(default_factory=ReviewSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    learning: LearningSettings = Field(default_factory=LearningSettings)
    # planner.service.processes: one process or an API and an ingest process.
    service: ServiceSettings = Field(default_factory=ServiceSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get(CONFIG_FILE_ENV)
        if config_file:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=config_file))
        return tuple(sources)


def load_settings(**overrides: Any) -> Settings:
    """Build :class:`Settings`; raises ``SpecError`` naming the bad key on invalid configuration."""
    config_file = os.environ.get(CONFIG_FILE_ENV)
    if config_file and not Path(config_file).is_file():
        raise SpecError(CONFIG_FILE_ENV, f"config file {config_file!r} does not exist")
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "settings"
        raise SpecError(
            field,
            f"{err['msg']} (set it with PLANNER_{field.upper().replace('.', '__')} "
            f"or in the file named by {CONFIG_FILE_ENV})",
        ) from None
    except (OSError, ValueError) as exc:
        raise SpecError(CONFIG_FILE_ENV, f"cannot read config file: {exc}") from None
