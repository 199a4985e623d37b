"""``GET /v1/calibrations`` and ``POST /v1/calibrations``: what the planner has learnt.

* ``online``: the per-cluster step-time corrections learnt from running jobs
  (``planner.calibration.online``), with the model's error per cluster: the whole step's
  factor per group (``component: step``) and, learnt from jobs that report per-rank compute
  times, the compute and network factors apart (``component: compute`` / ``network``);
* ``operators/<name>``: operator and collective models fitted from uploaded samples (the CSV
  files ``planner calibrate sample`` writes), stored as data;
* ``eta``: per cluster, what its finished jobs taught the ETA: the band calibration by progress
  bucket and its achieved coverage, the shutdown and the restart overhead.
* ``learnt``: per cluster, the observed-runs calibration fitted from the jobs it saw finish
  (``planner.service.learning``): the runs used and skipped (with reasons), its held-out error
  against the uncorrected model's, whether predictions use it, when it was fitted.

``GET /v1/calibrations/runs?scheduler=&cluster=`` gives the runs that fit is made from (the
newest ``learning.max_runs`` usable ones, oldest first) as the JSON lines ``planner calibrate
observe`` reads (``planner.calibration.observed_runs.RUN_FIELDS``): the same function fits them
to the same calibration offline.

Reading needs role ``reader``; uploading a new calibration ``operator``, replacing an existing
one ``admin`` (and no read-only mode, no cross-origin browser post: ``planner.service.api.
access``). The fit runs on the worker pool (429 when it is full) within budgets: at most
``limits.calibration_max_rows`` rows per CSV, every value within its physical limit
(``planner.calibration.limits``: 422 naming the column), ``limits.calibration_time_budget_s``
CPU seconds, and it stops within a tree of the fit when the client leaves. Each accepted
upload is audited with its uploader.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from typing import Annotated

from fastapi import (
    APIRouter,
    Depends,
    File,
    Form,
    HTTPException,
    Query,
    Request,
    Response,
    UploadFile,
)
from starlette.concurrency import run_in_threadpool

from planner.calibration import (
    Calibration,
    OnlineCalibration,
    fit_calibration,
    read_collective_samples_csv,
    read_op_samples_csv,
)
from planner.calibration.observed_runs import run_document
from planner.calibration.report import summary_lines
from planner.errors import CalibrationError, SpecError
from planner.forecast import stored
from planner.forecast.bands import BandCalibration
from planner.search.budget import BudgetExceededError, SearchBudget
from planner.service.api.access import Access
from planner.service.api.errors import error_responses
from planner.service.api.models import (
    CalibrationGroup,
    Calibrations,
    CalibrationUploaded,
    EtaBandBucket,
    EtaCalibrationView,
    LearntCalibrationView,
    OnlineCalibrationView,
    OperatorCalibrationView,
    SkippedRun,
    answer,
    json_lines_content,
)
from planner.service.api.work import WorkerPool
from planner.service.audit import AuditLog
from planner.service.auth import Principal, Role
from planner.service.learning import PREFIX as LEARNT_PREFIX
from planner.service.learning import LearningConfig, replaces_online
from planner.service.loops.outcomes import ETA_CALIBRATION, knowledge_of
from planner.service.models import CLUSTER_CHARS, SCHEDULER_CHARS
from planner.service.security_settings import LimitSettings
from planner.service.store import Store
from planner.service.stored_json import fields, number, rows

OPERATORS_PREFIX = "operators/"
ROWS_SETTING = "limits.calibration_max_rows"
TIME_SETTING = "limits.calibration_time_budget_s"


def _online_view(state: Mapping[str, object]) -> OnlineCalibrationView:
    groups: list[CalibrationGroup] = []
    stored = state.get("online")
    try:
        if not isinstance(stored, Mapping):
            raise TypeError("online: not an object")
        online = OnlineCalibration.from_json(stored)
    except (KeyError, TypeError, SpecError):
        online = None
    if online is not None:
        learnt = [("step", online.estimates_)] + [
            (component.value, part.estimates) for component, part in online.components_.items()
        ]
        for component, estimates in learnt:
            for (level, prefix), est in sorted(estimates.items(), key=lambda kv: str(kv[0])):
                groups.append(
                    CalibrationGroup(
                        level=str(level),
                        group=list(prefix),
                        factor=math.exp(est.log_ratio),
                        log_sd=est.predictive_log_sd,
                        num_jobs=est.num_jobs,
                        latest_time_s=est.latest_time_s,
                        component=component,
                    )
                )
    num_samples = number(state.get("num_samples", 0))
    return OnlineCalibrationView(
        num_samples=0 if num_samples is None else int(num_samples),
        groups=groups,
        model_error=[dict(e) for e in rows(list(fields(state.get("errors")).values()))],
    )


def _eta_view(state: Mapping[str, object]) -> list[EtaCalibrationView]:
    """Per cluster, what its finished jobs taught the ETA."""
    out: list[EtaCalibrationView] = []
    clusters = fields(state.get("clusters"))
    for key in sorted(clusters):
        scheduler, _, cluster = key.partition("/")
        entry = clusters[key] or {}
        known = knowledge_of(entry)
        bands = BandCalibration.from_json(fields(entry).get("bands"))
        out.append(
            EtaCalibrationView(
                scheduler=scheduler,
                cluster=cluster,
                num_jobs=known.num_jobs,
                band_coverage_ratio=known.coverage_ratio,
                shutdown_s=known.shutdown_s,
                restart_overhead_s=known.restart_overhead_s,
                buckets=[EtaBandBucket(**bucket) for bucket in bands.summary()],
            )
        )
    return out


def _learnt_view(state: Mapping[str, object]) -> LearntCalibrationView | None:
    """One cluster's learnt calibration as listed; None for a state this version cannot read."""
    held_out = fields(state.get("held_out"))
    try:
        return LearntCalibrationView(
            scheduler=str(state["scheduler"]),
            cluster=str(state["cluster"]),
            fitted_s=stored.number(state["fitted_s"]),
            num_runs=_whole(state["num_runs"]),
            num_skipped=_whole(state.get("num_skipped") or 0),
            skipped=[
                SkippedRun(job_id=str(s.get("job_id", "")), reason=str(s.get("reason", "")))
                for s in rows(state.get("skipped"))
            ],
            held_out_error_ratio=_ratio(held_out.get("calibrated_mean_abs_error_ratio")),
            model_error_ratio=_ratio(held_out.get("prior_mean_abs_error_ratio")),
            online_error_ratio=_ratio(held_out.get("online_mean_abs_error_ratio")),
            applied=bool(state.get("applied")),
            replaces_online=bool(state.get("applied")) and replaces_online(held_out),
            reason=str(state.get("reason") or ""),
            cpu_s=stored.number(state.get("cpu_s") or 0.0),
            keys=[dict(k) for k in rows(state.get("summary"))],
        )
    except (KeyError, TypeError, ValueError):
        return None


def _operator_view(
    name: str, updated_s: float, state: Mapping[str, object]
) -> OperatorCalibrationView:
    """A stored operator calibration: its sampled device and summary lines as stored (a value
    of another shape read as absent)."""
    device = fields(state.get("calibration")).get("device")
    summary = state.get("summary")
    return OperatorCalibrationView(
        name=name,
        updated_s=updated_s,
        device=dict(device) if isinstance(device, Mapping) else None,
        summary=[line for line in summary if isinstance(line, str)]
        if isinstance(summary, list)
        else [],
    )


def _whole(value: object) -> int:
    """A stored whole number (or its text); raises TypeError or ValueError for anything else."""
    return int(stored.number(value))


def _ratio(value: object) -> float | None:
    """A stored ratio or None; raises TypeError for anything else."""
    return None if value is None else stored.number(value)


def _fit(
    op_csv: bytes,
    op_name: str,
    coll_csv: bytes | None,
    coll_name: str,
    limits: LimitSettings,
) -> Calibration:
    """The fitted calibration of uploaded CSV bytes (at most ``limits.calibration_max_rows``
    rows each, every value within its physical limit); raises ``HTTPException`` 422."""
    most = limits.calibration_max_rows
    try:
        ops = read_op_samples_csv(
            op_csv.decode("utf-8"), source=op_name, max_rows=most, max_rows_setting=ROWS_SETTING
        )
        collectives = (
            read_collective_samples_csv(
                coll_csv.decode("utf-8"),
                source=coll_name,
                max_rows=most,
                max_rows_setting=ROWS_SETTING,
            )
            if coll_csv is not None
            else []
        )
        return fit_calibration(ops, collectives)
    except UnicodeDecodeError:
        raise HTTPException(422, "samples must be UTF-8 CSV text") from None
    except BudgetExceededError as exc:
        raise HTTPException(
            422,
            f"{exc.field}: parsing and fitting the samples ran past the budget of "
            f"{limits.calibration_time_budget_s:g} CPU seconds; upload fewer rows",
        ) from None
    except (CalibrationError, SpecError) as exc:
        raise HTTPException(422, str(exc)) from None


def _fit_budget(limits: LimitSettings) -> SearchBudget:
    """The budget of one upload: CPU seconds of its worker thread (cancelled when the client
    leaves, like every job of the pool)."""
    return SearchBudget(
        time_budget_s=limits.calibration_time_budget_s,
        time_field=TIME_SETTING,
        clock=time.thread_time,
    )


def make_router(
    store: Store,
    clock: Callable[[], float],
    access: Access,
    pool: WorkerPool,
    audit: AuditLog,
    *,
    limits: LimitSettings | None = None,
    max_runs: int = LearningConfig().max_runs,
) -> APIRouter:
    """The calibration routes over ``store``; fits run on ``pool`` within ``limits``
    (``calibration_max_rows``, ``calibration_time_budget_s``; default: the settings'
    defaults), uploads go to ``audit``; ``max_runs``: the runs a learnt fit is made from
    (``learning.max_runs``), the most ``/v1/calibrations/runs`` gives."""
    limits = limits or LimitSettings()
    router = APIRouter(tags=["calibration"])
    uploader = access.require(Role.OPERATOR, writes=True)

    @router.get(
        "/v1/calibrations/runs",
        operation_id="list_observed_runs",
        summary="The finished runs a cluster's learnt calibration is fitted from, as the JSON "
        "lines `planner calibrate observe` reads",
        response_class=Response,
        responses={
            200: {
                "content": json_lines_content(
                    "One run per line: scenario, iteration_time_s, memory_per_gpu_bytes (when "
                    "DCGM measured it), cluster"
                )
            },
            **error_responses(401, 403, 422, 503),
        },
        dependencies=[Depends(access.require(Role.READER))],
    )
    def list_observed_runs(
        scheduler: Annotated[
            str, Query(min_length=1, max_length=SCHEDULER_CHARS, description="e.g. slurm")
        ],
        cluster: Annotated[
            str,
            Query(min_length=1, max_length=CLUSTER_CHARS, description="As the scheduler names it"),
        ],
        limit: Annotated[
            int | None,
            Query(ge=1, description="Newest runs (default and most: learning.max_runs)"),
        ] = None,
    ) -> Response:
        rows = store.observed_runs(scheduler, cluster, limit=min(limit or max_runs, max_runs))
        text = "".join(
            json.dumps(
                run_document(
                    r.scenario,
                    r.iteration_time_s,
                    memory_per_gpu_bytes=r.memory_per_gpu_bytes,
                    cluster=r.cluster,
                ),
                allow_nan=False,
            )
            + "\n"
            for r in rows
        )
        return Response(text, media_type="application/x-ndjson")

    @router.get(
        "/v1/calibrations",
        operation_id="list_calibrations",
        summary="Online corrections, fitted operator models, what finished jobs taught",
        response_model=Calibrations,
        response_model_exclude_unset=True,
        responses=error_responses(401, 403, 503),
        dependencies=[Depends(access.require(Role.READER))],
    )
    def list_calibrations() -> Response:
        online = OnlineCalibrationView(num_samples=0, groups=[], model_error=[])
        operators: list[OperatorCalibrationView] = []
        eta: list[EtaCalibrationView] = []
        learnt: list[LearntCalibrationView] = []
        for row in store.calibrations():
            if row.name == ETA_CALIBRATION:
                eta = _eta_view(row.state)
            elif row.name.startswith(LEARNT_PREFIX):
                view = _learnt_view(row.state or {})
                learnt += [view] if view is not None else []
            elif row.name == "online":
                online = _online_view(row.state)
                online.updated_s = row.updated_s
            elif row.name.startswith(OPERATORS_PREFIX):
                name = row.name[len(OPERATORS_PREFIX) :]
                operators.append(_operator_view(name, row.updated_s, row.state))
        return answer(Calibrations(online=online, operators=operators, eta=eta, learnt=learnt))

    @router.post(
        "/v1/calibrations",
        operation_id="upload_calibration",
        summary="Fit operator/collective models from uploaded samples and store them",
        response_model=CalibrationUploaded,
        responses=error_responses(400, 401, 403, 413, 415, 422, 429, 503),
    )
    async def upload(
        request: Request,
        op_samples: Annotated[UploadFile, File(description="op_samples.csv")],
        collective_samples: Annotated[
            UploadFile | None, File(description="collective_samples.csv (optional)")
        ] = None,
        name: Annotated[str, Form(pattern=r"^[A-Za-z0-9_.-]{1,48}$")] = "default",
        principal: Principal = Depends(uploader),  # noqa: B008 (FastAPI's idiom)
    ) -> CalibrationUploaded:
        key = OPERATORS_PREFIX + name
        exists = await run_in_threadpool(store.calibration, key) is not None
        if principal.role < Role.ADMIN and exists:
            raise HTTPException(
                403,
                f"name: calibration {name!r} exists; replacing it needs role admin "
                f"({principal.name} has {principal.role.label}); upload under a new name",
            )
        calibration = await pool.run(
            request,
            _fit,
            await op_samples.read(),
            op_samples.filename or "op_samples.csv",
            await collective_samples.read() if collective_samples is not None else None,
            (collective_samples.filename if collective_samples else None)
            or "collective_samples.csv",
            limits,
            budget=_fit_budget(limits),
        )
        summary = summary_lines(calibration)
        state = {
            "calibration": json.loads(calibration.to_json()),
            "summary": summary,
            "uploaded_by": principal.name,
        }
        await run_in_threadpool(store.put_calibration, key, state, clock())
        entry = audit.entry(
            action="calibration_upload",
            outcome="ok",
            target=key,
            reason="replaced" if exists else "new operator calibration",
            detail={"summary": summary[:20]},
            actor=principal.name,
        )
        await run_in_threadpool(audit.record, [entry])
        return CalibrationUploaded(name=name, summary=summary)

    return router
