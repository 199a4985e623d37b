"""The service's composition root: the only module of ``planner`` that imports ``adapters``
(an import-linter contract says so).

``create_app`` turns settings into the running pieces: the store (SQLAlchemy), the scheduler
sources (Slurm CLI, Kubernetes informers), the log tailer, trace files, Prometheus (training
metrics and dcgm-exporter GPU telemetry), leader election, the Kueue AdmissionCheck controller,
hint writers, and the HTTP API. Everything is injectable for tests: pass ``store``, ``sources``,
``reader``, ``traces``, ``telemetry``, ``gpus``, ``kube_api_client`` and ``clock``, and
``start_loops=False`` to drive cycles by hand. ``serve`` is ``planner serve``. The adapters the
offline commands use are wired in ``planner.wiring``, without the service.
"""

from __future__ import annotations

import functools
import gc
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

import uvicorn
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from adapters.kubernetes import (
    DEFAULT_RESOURCES,
    AdmissionCheckController,
    JobHints,
    KubeApi,
    KubernetesSource,
    LeaseElector,
    WorkloadSnapshot,
    write_hints,
)
from adapters.kubernetes.auth import KubeReviewer
from adapters.kubernetes.client import ADMISSIONCHECKS
from adapters.kubernetes.config import api_client_from_config
from adapters.kubernetes.publish import ChangeRule, PredictionPublisher
from adapters.logs import LogTailer
from adapters.prometheus import (
    DcgmJobTelemetry,
    DcgmTelemetry,
    PrometheusClient,
    PrometheusJobTelemetry,
)
from adapters.slurm import (
    SlurmHintWriter,
    SlurmSource,
    TimeLimitPolicy,
    detect_slurm,
    job_key,
    scenario_key,
    write_hints_file,
)
from adapters.traces import TraceFiles
from planner import __version__
from planner.capacity.fleet import parse_fleet
from planner.errors import SourcePermanentError
from planner.ports import GpuTelemetry, JobTelemetry, ProgressReader, SchedulerSource, TraceSource
from planner.recommend.admission import AdvisoryHints, CheckDecision
from planner.service import ingest_child
from planner.service.api import build_app
from planner.service.audit import AuditLog, WritesCollector
from planner.service.auth import (
    Authorizer,
    OpenAuthorizer,
    ReviewAuthorizer,
    TokenAuthorizer,
    read_token_file,
)
from planner.service.capacity_metrics import CapacityCollector
from planner.service.guard import GuardedSource
from planner.service.job_series import MAX_PENDING_JOBS
from planner.service.learning import Learner, Learning, LearningConfig
from planner.service.log_format import configure_logging
from planner.service.loops import IngestLoop, IngestSettings, source_name
from planner.service.loops.collector import CycleCollector
from planner.service.loops.context import QueueForecastConfig
from planner.service.loops.publish import (
    HintsFile,
    KubernetesRuntime,
    SlurmHintsRuntime,
    admission_decider,
)
from planner.service.loops.queue_forecast import published_forecast
from planner.service.metrics import IngestCollector, KubernetesCollector, PlannerCollector
from planner.service.processes import (
    MIN_STALE_S,
    HeartbeatWriter,
    IngestStatus,
    IngestView,
    Supervisor,
    WriteCount,
    heartbeat_name,
    informer_counts,
    loop_figures,
)
from planner.service.reviews import ReviewRunner, read_document
from planner.service.runtime import STALE_AFTER_INTERVALS, ServiceState, exit_after
from planner.service.security_settings import check_exposure
from planner.service.settings import KubernetesSettings, Settings, SlurmSettings, Toggle
from planner.service.store import Store
from planner.service.store.sql import SqlStore
from planner.wiring.ray import ray_executor

log = logging.getLogger("planner.service")

#: Seconds the loops get to stop after the app has (then the process exits regardless).
STOP_GRACE_S = 10.0


def build_sources(settings: Settings) -> list[SchedulerSource]:
    """The scheduler sources the settings ask for (Slurm when ``auto`` and its CLI is on PATH)."""
    sources: list[SchedulerSource] = []
    slurm = settings.slurm
    if slurm.enabled == Toggle.ON or (
        slurm.enabled == Toggle.AUTO and detect_slurm(path_env=slurm.bin_dir)
    ):
        sources.append(
            SlurmSource(
                cluster=slurm.cluster,
                bin_dir=slurm.bin_dir,
                timeout_s=slurm.command_timeout_s,
                use_sacct=slurm.use_sacct,
                allowed_file_roots=slurm.allowed_file_roots,
            )
        )
        log.info(
            "source found: slurm (commands in %s, timeout %.0f s)",
            slurm.bin_dir or "PATH",
            slurm.command_timeout_s,
        )
    elif slurm.enabled == Toggle.AUTO:
        log.info("source not found: slurm (squeue/sinfo not on PATH; set PLANNER_SLURM__BIN_DIR)")
    else:
        log.info("source disabled: slurm")
    if not sources:
        log.info("no telemetry source configured: serving predictions only")
    return sources


def build_reader(settings: Settings) -> ProgressReader:
    """The log tailer used for job progress: a job's log is read under the rules of the other
    files it names (its working directory and each scheduler's ``allowed_file_roots``)."""
    return LogTailer(
        max_read_bytes=settings.max_log_bytes_per_cycle,
        allowed_file_roots={
            "slurm": settings.slurm.allowed_file_roots,
            "kubernetes": settings.kubernetes.allowed_file_roots,
        },
    )


def build_prometheus(settings: Settings) -> tuple[JobTelemetry | None, GpuTelemetry | None]:
    """Training metrics and DCGM GPU telemetry from Prometheus (both None without a URL)."""
    prom = settings.prometheus
    if not prom.url:
        return None, None
    client = PrometheusClient(prom.url, timeout_s=prom.timeout_s)
    log.info("job metrics and GPU telemetry (DCGM): Prometheus at %s", prom.url)
    telemetry = PrometheusJobTelemetry(
        client, slurm_job_label=prom.slurm_job_label, step_s=prom.step_s
    )
    return telemetry, DcgmJobTelemetry(DcgmTelemetry(client, window_s=prom.gpu_window_s))


def kubernetes_wanted(settings: KubernetesSettings) -> bool:
    """``on``, or ``auto`` inside a pod or with a kubeconfig named in settings or KUBECONFIG."""
    if settings.enabled == Toggle.OFF:
        return False
    if settings.enabled == Toggle.ON:
        return True
    return bool(
        os.environ.get("KUBERNETES_SERVICE_HOST")
        or settings.kubeconfig
        or os.environ.get("KUBECONFIG")
    )


def build_kubernetes(
    settings: KubernetesSettings,
    store: Store,
    *,
    is_fresh: Callable[[], bool],
    api_client: Any = None,
    read_only: bool = False,
    audit: AuditLog | None = None,
) -> KubernetesRuntime | None:
    """The Kubernetes runtime for ``settings`` (None when off): informers, Lease elector,
    AdmissionCheck controller, hint annotations (neither in ``read_only`` mode; annotations
    audited in ``audit``). ``api_client`` overrides the configuration lookup (tests). Raises
    ``SourcePermanentError`` when ``on`` without a configuration."""
    if api_client is None:
        if not kubernetes_wanted(settings):
            return None
        try:
            api_client = api_client_from_config(settings.kubeconfig)
        except SourcePermanentError as exc:
            if settings.enabled == Toggle.ON:
                raise
            log.warning("source not found: kubernetes (%s)", exc)
            return None
    admission = settings.admission_check
    admit = admission.enabled and not read_only
    publish = settings.publish
    publishing = publish.workload_admission or publish.trainjob_progress or publish.expected_runtime
    if read_only and (admission.enabled or settings.hint_annotations or publishing):
        log.warning(
            "read-only: the admission check, hint annotations and published predictions are off"
        )
    resources = (*DEFAULT_RESOURCES, ADMISSIONCHECKS) if admit else DEFAULT_RESOURCES
    source = KubernetesSource(
        api_client,
        cluster=settings.cluster,
        namespace=settings.namespace,
        resources=resources,
        allowed_file_roots=settings.allowed_file_roots,
    )
    elector = None
    if settings.leader_election:
        elector = LeaseElector(
            api_client,
            name=settings.lease_name,
            namespace=settings.lease_namespace,
            identity=settings.identity or socket.gethostname(),
        )
    reconcile = None
    if admit:
        decide_job = admission_decider(store, is_fresh=is_fresh)

        def decide(workload: WorkloadSnapshot) -> CheckDecision:
            return decide_job(workload.job_id)

        controller = AdmissionCheckController(
            api_client,
            controller_name=admission.controller_name,
            decide=decide,
            gating_queues=admission.gating_queues,
            grace_period_s=admission.grace_period_s,
        )
        reconcile = functools.partial(_reconcile_admission, source, controller)
    writer = None
    if settings.hint_annotations and not read_only:
        api = KubeApi(api_client)

        def writer(job_id: str, hints: AdvisoryHints) -> None:
            write_hints(
                api,
                job_id,
                JobHints(
                    predicted_runtime_s=hints.predicted_runtime_s,
                    eta_s=hints.eta_s,
                    recommended_gpus=hints.recommended_gpus,
                ),
            )

    published = None
    if publishing and not read_only:
        publisher = PredictionPublisher(
            KubeApi(api_client),
            workloads=publish.workload_admission,
            progress=publish.trainjob_progress,
            expected_runtime=publish.expected_runtime,
            condition_type=publish.condition_type,
            rule=ChangeRule(
                min_change_s=publish.min_change_s, min_change_ratio=publish.min_change_ratio
            ),
        )
        published = functools.partial(_publish_predictions, source, publisher, audit)
    return KubernetesRuntime(
        source=source,
        elector=elector,
        reconcile_admission=reconcile,
        write_hints=writer,
        publish_predictions=published,
        audit=audit,
    )


def _publish_predictions(
    source: KubernetesSource, publisher: PredictionPublisher, audit: AuditLog | None, store: Store
) -> None:
    """Write the active Kubernetes jobs' predictions onto the watched objects; errors logged,
    a pass that wrote or failed audited (one entry: the writes per kind, the first errors)."""
    forecasts = {}
    for row in store.list_jobs(active_only=True):
        found = published_forecast(row) if row.scheduler == "kubernetes" else None
        if found is not None:
            forecasts[row.job_id] = found
    informers = source.informers
    workloads = informers.get("workloads")
    jobs = {key: informer.items() for key, informer in informers.items() if key != "workloads"}
    report = publisher.publish(workloads.items() if workloads else (), jobs, forecasts)
    if report.errors:
        log.warning("publishing predictions: %d errors: %s", len(report.errors), report.errors[:3])
    if audit is not None and (report.written or report.errors):
        entry = audit.entry(
            action="published_predictions",
            outcome="error" if report.errors else "ok",
            scheduler="kubernetes",
            cluster=source.cluster,
            target="workloads and jobs",
            reason="; ".join(report.errors[:3]) or "predictions moved enough to be written",
            detail={"written": report.written, "errors": len(report.errors)},
        )
        audit.record([entry])


def _reconcile_admission(source: KubernetesSource, controller: AdmissionCheckController) -> None:
    """One AdmissionCheck reconcile over the informer caches; errors are logged."""
    workloads = source.informers.get("workloads")
    checks = source.informers.get(ADMISSIONCHECKS.key)
    if workloads is None or checks is None:
        return
    report = controller.reconcile(workloads.items(), checks.items())
    if report.errors:
        log.warning("admission check: %d errors: %s", len(report.errors), report.errors[:3])


def build_slurm_hints(
    settings: SlurmSettings, *, audit: AuditLog | None = None
) -> SlurmHintsRuntime | None:
    """Slurm hints for ``settings.hints`` (``off``: None unless a hints file is asked for,
    ``comment``, ``enforce``: also lower time limits) and ``settings.hints_file``; every write
    audited in ``audit``."""
    writer = None
    if settings.hints in ("comment", "enforce"):
        writer = SlurmHintWriter(
            enforce_time_limit=settings.hints == "enforce",
            policy=TimeLimitPolicy(),
            timeout_s=settings.command_timeout_s,
            bin_dir=settings.bin_dir,
        )
    hints_file = None
    if settings.hints_file:
        hints_file = HintsFile(
            path=settings.hints_file,
            write=functools.partial(write_hints_file, settings.hints_file),
            scenario_key=scenario_key,
            job_key=job_key,
        )
    if writer is None and hints_file is None:
        return None
    log.info(
        "Slurm hints: %s%s",
        settings.hints,
        f", hints file {settings.hints_file}" if settings.hints_file else "",
    )
    return SlurmHintsRuntime(writer=writer, hints_file=hints_file, audit=audit)


def build_authorizer(settings: Settings, *, kube_api_client: Any = None) -> Authorizer:
    """The authorizer ``settings.auth.mode`` asks for: tokens from ``auth.token_file`` (none:
    nobody can write), the cluster's reviews (``kube_api_client`` or the in-cluster / kubeconfig
    configuration), or nobody checked. Raises ``SpecError`` for an unreadable token file and
    ``SourcePermanentError`` without a Kubernetes configuration."""
    auth = settings.auth
    if auth.mode == "none":
        return OpenAuthorizer()
    if auth.mode == "kubernetes":
        client = kube_api_client or api_client_from_config(settings.kubernetes.kubeconfig)
        reviewer = KubeReviewer(client, group=auth.kubernetes_group)
        log.info("API authentication: Kubernetes TokenReview + SubjectAccessReview")
        return ReviewAuthorizer(reviewer.review, reviewer.allowed, cache_s=auth.review_cache_s)
    entries = read_token_file(auth.token_file) if auth.token_file else []
    log.info(
        "API authentication: %d bearer token(s)%s",
        len(entries),
        f" from {auth.token_file}" if auth.token_file else " (no auth.token_file: no writes)",
    )
    return TokenAuthorizer(entries)


@dataclass(slots=True)
class Service:
    """The pieces of one process of the service: its state (store, loop, leadership), the
    registry ``/metrics`` serves, the trace files and the audit log."""

    state: ServiceState
    registry: CollectorRegistry
    traces: TraceSource
    audit: AuditLog


class Parts(TypedDict, total=False):
    """What a test or an embedder may inject instead of what the settings build (module
    docstring); ``ingest_view``: the ingest process's status, in a split service's API
    process."""

    store: Store | None
    sources: Sequence[SchedulerSource] | None
    reader: ProgressReader | None
    traces: TraceSource | None
    kube_api_client: Any
    telemetry: JobTelemetry | None
    gpus: GpuTelemetry | None
    clock: Callable[[], float]
    ingest_view: IngestView | None


def build_service(settings: Settings, **parts: Unpack[Parts]) -> Service:
    """The pieces :func:`create_app` and the ingest process (:func:`run_ingest`) run (see the
    module docstring for the arguments). With ``ingest_view`` (the API process of a split
    service) nothing is polled or published here: the loop's status and metrics are read from
    what the ingest process stores. Raises ``StoreError`` when the database cannot be opened."""
    clock = parts.get("clock") or time.time
    store = parts.get("store") or SqlStore(settings.database_url)
    ingest_view = parts.get("ingest_view")
    sources = parts.get("sources")
    telemetry, gpus = parts.get("telemetry"), parts.get("gpus")
    audit = AuditLog(store, clock)
    if ingest_view is not None:
        sources = []
    elif sources is None:
        sources = build_sources(settings)
    sources = list(sources)
    traces = parts.get("traces") or TraceFiles(
        allowed_file_roots={
            "slurm": settings.slurm.allowed_file_roots,
            "kubernetes": settings.kubernetes.allowed_file_roots,
        },
        memory_budget_bytes=settings.limits.trace_memory_bytes,
        budget_setting="limits.trace_memory_bytes",
    )
    if telemetry is None and gpus is None and ingest_view is None:
        telemetry, gpus = build_prometheus(settings)
    state_box: list[ServiceState] = []
    kube = None
    if ingest_view is None:
        kube = build_kubernetes(
            settings.kubernetes,
            store,
            is_fresh=lambda: state_box[0].fresh(),  # noqa: PLW0108 (state is built below)
            api_client=parts.get("kube_api_client"),
            read_only=settings.read_only,
            audit=audit,
        )
    if kube is not None:
        sources.append(kube.source)
        log.info(
            "source found: kubernetes (cluster %s, namespace %s, leader election %s, "
            "admission check %s)",
            settings.kubernetes.cluster,
            settings.kubernetes.namespace or "all",
            "on" if kube.elector else "off",
            "on" if kube.reconcile_admission else "off",
        )
    sources = [GuardedSource(src) for src in sources]  # every failure counts (planner_source_up)
    ingestor = IngestLoop(
        store,
        sources,
        parts.get("reader") or build_reader(settings),
        clock=clock,
        settings=IngestSettings(
            model_prior_log_sd=settings.model_prior_log_sd,
            max_scenario_file_bytes=settings.max_scenario_file_bytes,
            ended_job_retention_s=settings.ended_job_retention_s,
            trace_analysis_interval_s=settings.trace_analysis_interval_s,
            queue_forecast=queue_forecast_config(settings),
            job_text_chars=settings.limits.job_text_chars,
        ),
        traces=traces,
        telemetry=telemetry,
        gpus=gpus,
        collect=CycleCollector(),  # the service's cycles keep 10,000 jobs' rows between them
    )
    slurm_hints = (
        build_slurm_hints(settings.slurm, audit=audit)
        if any(src.scheduler == "slurm" for src in sources) and not settings.read_only
        else None
    )
    learning = LearningConfig(**settings.learning.model_dump())
    ingestor.deps.learning = Learning(config=learning)
    state = ServiceState(
        settings,
        store,
        ingestor,
        clock,
        kube=kube,
        slurm_hints=slurm_hints,
        ingest_view=ingest_view,
    )
    state.learner = Learner(store, clock, learning)
    state_box.append(state)
    state.reviews = ReviewRunner(
        settings.review,
        store,
        clock,
        executor_for=ray_executor,
        is_leader=lambda: state.is_leader,
        limits=settings.limits,
    )
    registry = metrics_registry(
        store,
        ingestor,
        audit,
        clock=clock,
        max_pending_jobs=settings.metrics.max_pending_jobs,
        kubernetes_stats=kube.source.stats if kube is not None else None,
        ingest_view=ingest_view,
        kubernetes=kubernetes_wanted(settings.kubernetes),
    )
    return Service(state=state, registry=registry, traces=traces, audit=audit)


def create_app(
    settings: Settings | None = None, *, start_loops: bool = True, **parts: Unpack[Parts]
) -> FastAPI:
    """Build the service's app (see the module docstring); the store is migrated and the loops
    start when the app starts (none with ``ingest_view``: :func:`build_service`). Raises
    ``StoreError`` when the database cannot be opened and ``SpecError`` when the settings would
    expose an unauthenticated API."""
    settings = settings or Settings()
    check_exposure(settings.host, settings.port, settings.auth)
    authorizer = build_authorizer(settings, kube_api_client=parts.get("kube_api_client"))
    service = build_service(settings, **parts)
    return build_app(
        service.state,
        service.registry,
        traces=service.traces,
        start_loops=start_loops,
        authorizer=authorizer,
        audit=service.audit,
    )


def metrics_registry(
    store: Store,
    ingestor: IngestLoop,
    audit: AuditLog,
    *,
    clock: Callable[[], float] = time.time,
    max_pending_jobs: int = MAX_PENDING_JOBS,
    kubernetes_stats: Callable[[], Mapping[str, Any]] | None = None,
    ingest_view: IngestView | None = None,
    kubernetes: bool = False,
) -> CollectorRegistry:
    """The registry ``/metrics`` serves: every collector of the service (the Kubernetes
    informers' only with ``kubernetes_stats``). With ``ingest_view`` (the API process of a
    split service) the loop's own metrics, the writes to the schedulers and (``kubernetes``)
    the informers' counters are those the ingest process last reported, under the same names.
    ``deploy/docs_gen.py`` lists its metrics in ``docs/metrics.md``."""
    registry = CollectorRegistry()
    registry.register(PlannerCollector(store, clock, max_pending_jobs))
    registry.register(CapacityCollector(store))
    if ingest_view is None:
        registry.register(IngestCollector(functools.partial(loop_figures, ingestor)))
        if kubernetes_stats is not None:
            registry.register(KubernetesCollector(kubernetes_stats))
        registry.register(audit.collector())
        return registry
    view = ingest_view

    def reported() -> IngestStatus:
        return view.current() or IngestStatus(
            name="", pid=0, started_s=0.0, heartbeat_s=0.0, leader=False, sources=(), cycles_ok=0
        )

    registry.register(IngestCollector(lambda: reported().figures))
    if kubernetes:
        informers = lambda: {i.resource: i for i in reported().informers}  # noqa: E731
        registry.register(KubernetesCollector(informers))
    registry.register(
        WritesCollector(
            lambda: [((w.scheduler, w.kind, w.outcome), w.count) for w in reported().writes]
        )
    )
    return registry


def queue_forecast_config(settings: Settings) -> QueueForecastConfig:
    """The pending jobs' forecast settings, with the pools of ``queue_forecast.fleet_file``
    read here (None: the sources' nodes). Raises ``SpecError`` / ``DocumentError`` naming the
    setting or the file's line when the fleet file cannot be used."""
    cfg = settings.queue_forecast
    fleet = None
    if cfg.fleet_file:
        fleet = parse_fleet(read_document(cfg.fleet_file, "queue_forecast.fleet_file"))
        log.info("queue forecast on the pools of %s", cfg.fleet_file)
    return QueueForecastConfig(**cfg.model_dump(exclude={"fleet_file"}), fleet=fleet)


def configure_service_logging(level: str) -> None:
    """The service's log: one record per line on standard error (``configure_logging``), the
    libraries' per-cycle chatter (APScheduler, Alembic) only at DEBUG."""
    configure_logging(level)
    if level.upper() != "DEBUG":
        for noisy in ("apscheduler", "alembic"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


def ingest_status(service: Service, *, started_s: float) -> IngestStatus:
    """What this ingest process reports now (its heartbeat, ``planner.service.processes``)."""
    state = service.state
    kube = state.kube
    return IngestStatus(
        name=heartbeat_name(),
        pid=os.getpid(),
        started_s=started_s,
        heartbeat_s=state.clock(),
        leader=state.is_leader,
        sources=tuple(source_name(s) for s in state.ingestor.sources),
        cycles_ok=state.ingestor.cycles_ok,
        last_error=state.last_error,
        figures=loop_figures(state.ingestor),
        writes=tuple(
            WriteCount(scheduler=scheduler, kind=kind, outcome=outcome, count=count)
            for (scheduler, kind, outcome), count in service.audit.snapshot()
        ),
        informers=informer_counts(kube.source.stats()) if kube is not None else (),
    )


def run_ingest(settings: Settings, parent_pid: int | None = None) -> None:
    """The ingest process (``service.role: ingest``, or the child a split ``planner serve``
    supervises): the loops, leader election and what the leader publishes, and a heartbeat in
    the store every few seconds and after each cycle; no HTTP port. Returns on SIGTERM/SIGINT
    (a running cycle gets :data:`STOP_GRACE_S`) or, with ``parent_pid``, once that process is
    gone. Raises ``PlannerError`` when the store cannot be opened or migrated."""
    if parent_pid is not None:  # a spawned child: the parent's logging is not inherited
        configure_service_logging(settings.log_level)
    store = SqlStore(settings.database_url)
    service = build_service(settings, store=store)
    state = service.state
    started_s = state.clock()
    writer = HeartbeatWriter(store, functools.partial(ingest_status, service, started_s=started_s))
    state.heartbeat = writer.beat
    stopping = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("ingest process: signal %d, stopping", signum)
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    state.start(start_loops=True)
    log.info("planner %s ingest process (pid %d)", __version__, os.getpid())
    try:
        while not stopping.wait(1.0):
            if parent_pid is not None and os.getppid() != parent_pid:
                log.warning("ingest process: the supervising process is gone, stopping")
                break
    finally:
        exit_after(STOP_GRACE_S)
        state.stop()


def _spawn_ingest(settings: Settings) -> multiprocessing.process.BaseProcess:
    """The ingest child of this process (started by the caller; ``spawn``: no state of the
    parent's threads is inherited)."""
    context = multiprocessing.get_context("spawn")
    return context.Process(
        target=ingest_child.run, args=(settings, os.getpid()), name="planner-ingest", daemon=False
    )


def serve(settings: Settings) -> None:
    """Run the service (``planner serve``): under uvicorn on ``settings.host``/``port`` with
    the loops in this process (``service.processes: single``) or in a supervised child
    (``split``), or one part alone (``service.role``: ``api``, ``ingest``). Raises
    ``PlannerError`` when the store cannot be opened or migrated, or the settings would expose
    an unauthenticated API.

    On SIGTERM/SIGINT uvicorn stops accepting connections, requests in flight get
    ``shutdown_grace_s`` (then their searches are cancelled at the next chunk), the loops (or
    the ingest child) stop, and a watchdog ends the process :data:`STOP_GRACE_S` later whatever
    still runs, so the pod stops within its termination grace period (30 s by default)."""
    role = settings.service.role
    if role == "ingest":
        run_ingest(settings)
        return
    check_exposure(settings.host, settings.port, settings.auth)
    store = SqlStore(settings.database_url)
    store.migrate()  # fail here with a message rather than inside the server's start-up
    supervisor = None
    view = None
    if role == "api" or settings.service.processes == "split":
        if role == "all":
            supervisor = Supervisor(functools.partial(_spawn_ingest, settings))
        view = IngestView(
            store,
            time.time,
            stale_after_s=max(STALE_AFTER_INTERVALS * settings.ingest_interval_s, MIN_STALE_S),
            child=supervisor,
        )
    application = create_app(settings, store=store, ingest_view=view)
    log.info(
        "planner %s serving on http://%s:%d (API docs at /docs)%s%s",
        __version__,
        settings.host,
        settings.port,
        ", read-only" if settings.read_only else "",
        ", ingest in a child process" if supervisor else ", API only" if view else "",
    )
    # Once the app stops (after the requests' grace), the loops get STOP_GRACE_S more.
    on_stop = application.state.planner.on_stop
    on_stop.append(functools.partial(exit_after, STOP_GRACE_S))
    if supervisor is not None:
        on_stop.append(functools.partial(supervisor.stop, STOP_GRACE_S * 0.8))
        supervisor.start()
    # What start-up made (the modules, the app: about 250,000 objects) lives as long as the
    # process: frozen, Python's full collections do not traverse it (one over it took 140-160
    # ms of CPU, a page's whole time in the API process).
    gc.collect()
    gc.freeze()
    try:
        uvicorn.run(
            application,
            host=settings.host,
            port=settings.port,
            log_config=None,
            timeout_graceful_shutdown=max(1, int(settings.shutdown_grace_s)),
        )
    finally:
        if supervisor is not None:
            supervisor.stop(STOP_GRACE_S * 0.8)
