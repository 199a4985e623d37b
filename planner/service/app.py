"""The service's composition root and HTTP API (FastAPI).

``create_app`` wires settings, store, sources (adapters), the ingest loop (APScheduler 3.x
``BackgroundScheduler``) and the routes. Everything is injectable for tests: pass ``store``,
``sources``, ``reader`` and ``clock``, and ``start_loops=False`` to drive cycles by hand.

Routes: ``GET /healthz``, ``GET /readyz``, ``GET /v1/jobs``, ``GET /v1/jobs/{job_id}``,
``POST /v1/predict``, ``GET /metrics``; OpenAPI at ``/openapi.json`` and ``/docs``.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from apscheduler.schedulers.background import BackgroundScheduler
from fastapi import Body, FastAPI, File, HTTPException, Query, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from sqlalchemy.engine import make_url

from adapters.logs import LogTailer
from adapters.prometheus import PrometheusClient, PrometheusJobTelemetry
from adapters.slurm import SlurmSource, detect_slurm
from adapters.traces import TraceFiles
from planner import __version__
from planner.errors import PlannerError, SpecError, StoreError
from planner.ports import JobTelemetry, ProgressReader, SchedulerSource, TraceSource
from planner.scenario import predict_documents
from planner.service.ingest import Ingestor, IngestSettings
from planner.service.kube import KubernetesRuntime, build_kubernetes
from planner.service.metrics import KubernetesCollector, PlannerCollector
from planner.service.models import JobRow
from planner.service.routes_calibration import make_router as calibration_router
from planner.service.routes_plan import make_router
from planner.service.settings import Settings, Toggle
from planner.service.slurm_hints import SlurmHintsRuntime, build_slurm_hints
from planner.service.store import Store
from planner.stragglers import analyse

log = logging.getLogger("planner.service")

#: A source whose last success is older than this many ingest intervals is reported stale.
STALE_AFTER_INTERVALS = 3.0


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
    """The log tailer used for job progress."""
    return LogTailer(max_read_bytes=settings.max_log_bytes_per_cycle)


class ServiceState:
    """What the routes share: store, ingestor, settings, clock, readiness, Kubernetes runtime."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        ingestor: Ingestor,
        clock: Callable[[], float],
        *,
        kube: KubernetesRuntime | None = None,
        slurm_hints: SlurmHintsRuntime | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.ingestor = ingestor
        self.clock = clock
        self.kube = kube
        self.slurm_hints = slurm_hints
        self.scheduler: BackgroundScheduler | None = None

    @property
    def is_leader(self) -> bool:
        """Whether this replica runs the loops (always, without leader election)."""
        return self.kube is None or self.kube.is_leader

    @property
    def ready(self) -> bool:
        """Ready once a first ingest cycle succeeded, at once when no source is configured, and
        at once on a replica that is not the leader (it serves reads from the shared store)."""
        return not self.ingestor.sources or self.ingestor.cycles_ok > 0 or not self.is_leader

    def fresh(self) -> bool:
        """True when every source answered within the staleness window."""
        now = self.clock()
        stale_after = STALE_AFTER_INTERVALS * self.settings.ingest_interval_s
        rows = self.store.sources()
        return bool(rows) and all(
            r.last_success_s is not None and now - r.last_success_s <= stale_after for r in rows
        )

    def run_cycle(self) -> None:
        """One ingest cycle (the scheduled job) on the leader; logs and swallows everything."""
        if not self.is_leader:
            log.debug("not the leader: ingest skipped")
            return
        try:
            self.ingestor.run_cycle()
            if self.kube is not None:
                self.kube.after_cycle(self.store)
            if self.slurm_hints is not None:
                self.slurm_hints.after_cycle(self.store)
        except Exception:  # the loop must survive anything; the traceback goes to the log
            log.exception("ingest cycle failed")


def create_app(
    settings: Settings | None = None,
    *,
    store: Store | None = None,
    sources: Sequence[SchedulerSource] | None = None,
    reader: ProgressReader | None = None,
    traces: TraceSource | None = None,
    kube_api_client: Any = None,
    telemetry: JobTelemetry | None = None,
    clock: Callable[[], float] = time.time,
    start_loops: bool = True,
) -> FastAPI:
    """Build the FastAPI app; the store is migrated and the loops start when the app starts.

    Raises ``StoreError`` when the database cannot be opened.
    """
    settings = settings or Settings()
    store = store or Store(settings.database_url)
    sources = list(sources) if sources is not None else build_sources(settings)
    traces = traces or TraceFiles()
    if telemetry is None and settings.prometheus.url:
        telemetry = PrometheusJobTelemetry(
            PrometheusClient(settings.prometheus.url, timeout_s=settings.prometheus.timeout_s),
            slurm_job_label=settings.prometheus.slurm_job_label,
            step_s=settings.prometheus.step_s,
        )
        log.info("job metrics: Prometheus at %s", settings.prometheus.url)
    state_box: list[ServiceState] = []
    kube = build_kubernetes(
        settings.kubernetes,
        store,
        is_fresh=lambda: state_box[0].fresh(),  # noqa: PLW0108 (state is built below)
        api_client=kube_api_client,
    )
    if kube is not None:
        sources.append(kube.source)
        log.info(
            "source found: kubernetes (cluster %s, namespace %s, leader election %s, "
            "admission check %s)",
            settings.kubernetes.cluster,
            settings.kubernetes.namespace or "all",
            "on" if kube.elector else "off",
            "on" if kube.controller else "off",
        )
    ingestor = Ingestor(
        store,
        sources,
        reader or build_reader(settings),
        settings=IngestSettings(
            model_prior_log_sd=settings.model_prior_log_sd,
            max_scenario_file_bytes=settings.max_scenario_file_bytes,
            ended_job_retention_s=settings.ended_job_retention_s,
            trace_analysis_interval_s=settings.trace_analysis_interval_s,
        ),
        clock=clock,
        traces=traces,
        telemetry=telemetry,
    )
    slurm_hints = None
    if any(src.scheduler == "slurm" for src in sources):
        slurm_hints = build_slurm_hints(
            settings.slurm.hints,
            hints_file=settings.slurm.hints_file,
            timeout_s=settings.slurm.command_timeout_s,
            bin_dir=settings.slurm.bin_dir,
        )
        if slurm_hints is not None:
            log.info(
                "Slurm hints: %s%s",
                settings.slurm.hints,
                f", hints file {settings.slurm.hints_file}" if settings.slurm.hints_file else "",
            )
    state = ServiceState(settings, store, ingestor, clock, kube=kube, slurm_hints=slurm_hints)
    state_box.append(state)
    registry = CollectorRegistry()
    registry.register(PlannerCollector(store))
    if kube is not None:
        registry.register(KubernetesCollector(kube.source.stats))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store.migrate()
        log.info("store ready: %s (revision %s)", _redact(store.url), store.revision())
        if kube is not None:
            kube.start()
        if start_loops and ingestor.sources:
            scheduler = BackgroundScheduler(timezone="UTC")
            scheduler.add_job(
                state.run_cycle,
                "interval",
                seconds=settings.ingest_interval_s,
                id="ingest",
                max_instances=1,
                coalesce=True,
                next_run_time=_now_datetime(),
            )
            scheduler.start()
            state.scheduler = scheduler
            log.info("ingest loop every %.1f s", settings.ingest_interval_s)
        try:
            yield
        finally:
            if state.scheduler is not None:
                state.scheduler.shutdown(wait=True)
            if kube is not None:
                kube.stop()
            store.dispose()

    app = FastAPI(
        title="LLM capacity planner",
        version=__version__,
        description="Predicts iteration time, memory, MFU and ETA of LLM training jobs.",
        lifespan=lifespan,
    )
    app.state.planner = state

    @app.exception_handler(PlannerError)
    async def planner_error(_: Request, exc: PlannerError) -> JSONResponse:
        status = 422 if isinstance(exc, SpecError) else 503 if isinstance(exc, StoreError) else 500
        return JSONResponse({"error": str(exc)}, status_code=status)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', 'invalid')}"
            for e in exc.errors()
        ]
        return JSONResponse({"error": "; ".join(errors)}, status_code=422)

    @app.get("/healthz", tags=["health"], summary="Liveness: the process serves requests")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], summary="Readiness: first ingest done")
    def readyz() -> JSONResponse:
        body = {
            "ready": state.ready,
            "sources": [getattr(s, "name", s.scheduler) for s in ingestor.sources],
            "cycles_ok": ingestor.cycles_ok,
            "leader": state.is_leader,
        }
        return JSONResponse(body, status_code=200 if state.ready else 503)

    @app.get("/v1/jobs", tags=["jobs"], summary="Jobs with progress, prediction and ETA")
    def list_jobs(
        active: bool = Query(False, description="Only pending and running jobs"),
        status: str | None = Query(None, description="Only jobs in this state, e.g. running"),
    ) -> dict[str, Any]:
        now = clock()
        sources = _source_views(state, now)
        by_key = {(s["scheduler"], s["cluster"]): s for s in sources}
        jobs = [
            _job_view(r, by_key.get((r.scheduler, r.cluster)), now)
            for r in store.list_jobs(active_only=active, status=status)
        ]
        return {
            "generated_at_s": now,
            "stale": any(s["stale"] for s in sources),
            "sources": sources,
            "jobs": jobs,
        }

    def one_job(job_id: str, scheduler: str | None, cluster: str | None) -> JobRow:
        rows = store.find_jobs(job_id, scheduler=scheduler, cluster=cluster)
        if not rows:
            raise HTTPException(404, f"job_id: no job {job_id!r} is known to the planner")
        if len(rows) > 1:
            clusters = ", ".join(f"{r.scheduler}/{r.cluster}" for r in rows)
            raise HTTPException(
                409, f"job_id: {job_id!r} exists on {clusters}; add ?scheduler=&cluster="
            )
        return rows[0]

    @app.get(
        "/v1/jobs/{job_id:path}/stragglers",
        tags=["jobs"],
        summary="Live straggler analysis: flagged ranks, what-if slowdown, impact and advice",
    )
    def get_stragglers(
        job_id: str,
        scheduler: str | None = Query(None),
        cluster: str | None = Query(None, description="Needed when clusters share job ids"),
    ) -> dict[str, Any]:
        row = one_job(job_id, scheduler, cluster)
        body: dict[str, Any] = {
            "scheduler": row.scheduler,
            "cluster": row.cluster,
            "job_id": row.job_id,
            "status": row.status,
        }
        stragglers = row.stragglers or {}
        live = stragglers.get("report")
        trace = stragglers.get("trace") or {}
        if live is not None:
            body["available"] = True
            body["source"] = "live"
            body.update(live)
            remaining_ideal = live.get("remaining_ideal_s")
            last = row.last_progress_s
            body["predicted_completion_without_stragglers_s"] = (
                None
                if remaining_ideal is None or last is None
                else max(clock(), last + remaining_ideal)
            )
            return body
        if "report" in trace:
            body["available"] = True
            body["source"] = "trace"
            body["trace_path"] = trace.get("trace_path")
            body["analysed_at_s"] = trace.get("analysed_at_s")
            body.update(trace["report"])
            body["impact"] = trace.get("impact")
            return body
        body["available"] = False
        body["reason"] = trace.get("error") or (
            "no per-rank timings seen yet: the job's ranks print rank_step lines (see "
            "adapters.logs.parsers) once per logging interval, or the job names a trace "
            "with planner:trace=PATH planner:trace-meta=PATH in its comment"
        )
        return body

    @app.get("/v1/jobs/{job_id:path}", tags=["jobs"], summary="One job in detail")
    def get_job(
        job_id: str,
        scheduler: str | None = Query(None),
        cluster: str | None = Query(None, description="Needed when clusters share job ids"),
    ) -> dict[str, Any]:
        row = one_job(job_id, scheduler, cluster)
        now = clock()
        source = {(s["scheduler"], s["cluster"]): s for s in _source_views(state, now)}.get(
            (row.scheduler, row.cluster)
        )
        view = _job_view(row, source, now)
        view["scenario"] = row.scenario
        view["state"] = row.state
        view["samples"] = [
            {
                "iteration": s.iteration,
                "step_time_s": s.step_time_s,
                "num_iterations": s.num_iterations,
                "time_s": s.time_s,
                "loss": s.loss,
            }
            for s in store.samples(row.id)
        ]
        view["eta_history"] = [p.payload for p in store.predictions(row.id, kind="eta", limit=50)]
        return view

    @app.post(
        "/v1/stragglers",
        tags=["stragglers"],
        summary="What-if straggler analysis of an uploaded per-rank trace (the CLI's JSON)",
        responses={422: {"description": "The trace or the meta file is malformed"}},
    )
    async def analyse_upload(
        trace: Annotated[UploadFile, File(description="Per-rank op trace, .parquet or .csv")],
        meta: Annotated[UploadFile, File(description="Job layout YAML (dp_size, pp_size, ...)")],
    ) -> dict[str, Any]:
        suffix = Path(trace.filename or "trace.parquet").suffix or ".parquet"
        with tempfile.TemporaryDirectory(prefix="planner-trace-") as tmp:
            trace_path = Path(tmp) / f"trace{suffix}"
            meta_path = Path(tmp) / "meta.yaml"
            trace_path.write_bytes(await trace.read())
            meta_path.write_bytes(await meta.read())
            try:
                report = analyse(traces.read(str(trace_path), str(meta_path)))
            except SpecError as exc:
                message = str(exc).replace(str(trace_path), trace.filename or "trace")
                message = message.replace(str(meta_path), meta.filename or "meta")
                raise HTTPException(422, message) from None
        return report.to_dict()

    @app.post(
        "/v1/predict",
        tags=["predict"],
        summary="Predict one scenario or a list (the `planner predict --json` contract)",
        responses={422: {"description": "At least one scenario was invalid (see its error)"}},
    )
    def predict(
        body: Annotated[
            dict[str, Any] | list[Any], Body(description="A scenario or a list of them")
        ],
    ) -> JSONResponse:
        docs = body if isinstance(body, list) else [body]
        results = predict_documents(docs)
        invalid = any("error" in r for r in results)
        content: Any = results if isinstance(body, list) else results[0]
        return JSONResponse(content, status_code=422 if invalid else 200)

    app.include_router(make_router(workers=1))
    app.include_router(calibration_router(store, clock))

    @app.get("/metrics", tags=["metrics"], summary="Prometheus metrics")
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app


def _now_datetime() -> datetime:
    return datetime.now(UTC)


def _redact(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


def _source_views(state: ServiceState, now: float) -> list[dict[str, Any]]:
    stale_after = STALE_AFTER_INTERVALS * state.settings.ingest_interval_s
    views = []
    for row in state.store.sources():
        age = None if row.last_success_s is None else max(0.0, now - row.last_success_s)
        views.append(
            {
                "name": row.name,
                "scheduler": row.scheduler,
                "cluster": row.cluster,
                "last_success_s": row.last_success_s,
                "last_attempt_s": row.last_attempt_s,
                "age_s": age,
                "stale": age is None or age > stale_after or row.consecutive_failures > 0,
                "consecutive_failures": row.consecutive_failures,
                "last_error": row.last_error,
                "warnings": row.warnings or [],
                "nodes": row.nodes or [],
            }
        )
    return views


def _job_view(row: JobRow, source: dict[str, Any] | None, now: float) -> dict[str, Any]:
    st = row.state or {}
    eta = row.eta
    return {
        "scheduler": row.scheduler,
        "cluster": row.cluster,
        "job_id": row.job_id,
        "name": row.name,
        "user": row.user,
        "status": row.status,
        "active": row.active,
        "partition": st.get("partition"),
        "num_gpus": st.get("num_gpus"),
        "gpus_allocated": st.get("gpus_allocated"),
        "gpu_type": st.get("gpu_type"),
        "num_nodes": st.get("num_nodes"),
        "node_list": st.get("node_list"),
        "submit_time_s": st.get("submit_time_s"),
        "start_time_s": st.get("start_time_s"),
        "end_time_s": st.get("end_time_s"),
        "time_limit_s": st.get("time_limit_s"),
        "stdout_path": st.get("stdout_path"),
        "described_by": row.described_by,
        "description": row.description_detail,
        "progress": {
            "iteration": row.iteration,
            "train_iters": row.train_iters,
            "progress_ratio": (eta or {}).get("progress_ratio")
            if eta
            else (
                min(1.0, row.iteration / row.train_iters)
                if row.iteration is not None and row.train_iters
                else None
            ),
            "last_progress_s": row.last_progress_s,
        },
        "prediction": row.prediction,
        "eta": eta,
        "scheduler_reported": (
            {
                "progress_ratio": st.get("progress_ratio"),
                "remaining_s": st.get("reported_remaining_s"),
                "updated_s": st.get("progress_updated_s"),
            }
            if st.get("progress_ratio") is not None or st.get("reported_remaining_s") is not None
            else None
        ),
        "first_seen_s": row.first_seen_s,
        "last_seen_s": row.last_seen_s,
        "ended_s": row.ended_s,
        "data_age_s": None if source is None else source["age_s"],
        "stale": True if source is None else source["stale"],
    }
