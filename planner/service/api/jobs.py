"""``GET /v1/jobs``, ``GET /v1/jobs/{job_id}`` and ``GET /v1/jobs/{job_id}/stragglers``.

Views are the response models (``planner.service.api.models``), built from the store's rows
(their fields checked as they are built) and answered as JSON without a second validation.
``GET /v1/jobs`` pages the list (ordered by scheduler, cluster and numeric job id): ``limit``
jobs a page (without it ``limits.jobs_page``, 100 by default); the answer's ``next_cursor``,
passed as ``?cursor=``, gives the next page, and its ``sources`` leave out their ``nodes``
(2,000 nodes outweigh a page of 100 jobs). ``limit=0`` asks for every job
in one answer, with the nodes, up to ``limits.jobs_unpaged_max`` jobs (more: 422).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import TypeVar

from fastapi import APIRouter, Depends, HTTPException, Query, Response
from pydantic import BaseModel

from planner.service import stored_json
from planner.service.api.access import Access
from planner.service.api.errors import error_responses
from planner.service.api.models import (
    Eta,
    GpuUsage,
    JobDetail,
    JobList,
    JobSummary,
    LaunchFacts,
    LogReading,
    NodeView,
    Prediction,
    Progress,
    QueueForecast,
    SchedulerReported,
    SourceView,
    StepSample,
    Stragglers,
    answer,
)
from planner.service.auth import Role
from planner.service.job_events import job_events
from planner.service.job_fields import PAGE_CHARS, cut, shown
from planner.service.models import JobRow, SourceRow, job_sort_key, listing_key
from planner.service.runtime import ServiceState

_M = TypeVar("_M", bound=BaseModel)

#: Largest page of ``GET /v1/jobs?limit=``.
MAX_JOBS_PAGE = 10_000

NO_STRAGGLER_DATA = (
    "no per-rank timings seen yet: the job's ranks print rank_step lines (see "
    "adapters.logs.parsers) once per logging interval, or the job names a trace "
    "with planner:trace=PATH planner:trace-meta=PATH in its comment"
)


def source_view(
    row: SourceRow, now_s: float, stale_after_s: float, *, nodes: bool = True
) -> SourceView:
    """One source's health: age of its last success and whether it is stale (with its nodes
    unless ``nodes`` is false: a page of jobs leaves them out, unset)."""
    age = None if row.last_success_s is None else max(0.0, now_s - row.last_success_s)
    view = SourceView(
        name=row.name,
        scheduler=row.scheduler,
        cluster=row.cluster,
        last_success_s=row.last_success_s,
        last_attempt_s=row.last_attempt_s,
        age_s=age,
        stale=age is None or age > stale_after_s or row.consecutive_failures > 0,
        consecutive_failures=row.consecutive_failures,
        last_error=row.last_error,
        warnings=row.warnings or [],
    )
    if nodes:
        view.nodes = [NodeView.model_validate(n) for n in row.nodes or []]
    return view


def _progress_ratio(row: JobRow) -> float | None:
    if row.eta:
        value = stored_json.fields(row.eta).get("progress_ratio")
        return float(value) if isinstance(value, int | float) else None
    if row.iteration is not None and row.train_iters:
        return min(1.0, row.iteration / row.train_iters)
    return None


def _last_seen(row: JobRow, source: SourceView | None) -> float:
    """When the scheduler last reported the job: an active job is in every good poll of its
    source (its row is not rewritten for that), an ended one as stored."""
    polled = None if source is None else source.last_success_s
    if row.active and polled is not None:
        return max(row.last_seen_s, polled)
    return row.last_seen_s


def _integer(value: object) -> int | None:
    """``value`` when it is an integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _shown_text(value: object) -> str | None:
    """A stored text field as a page shows it (``job_fields.shown``); not text: None."""
    return shown(stored_json.text(value))


def _maybe(model: type[_M], stored: object) -> _M | None:
    """The stored JSON object ``stored`` as ``model`` (validated: a value of another shape is
    a ``ValidationError``, as the response's check made it before); None stays None."""
    return None if stored is None else model.model_validate(stored)


def job_view(row: JobRow, source: SourceView | None) -> JobSummary:
    """One job's summary; ``source`` is its source's view (None: unknown). The scheduler's
    fields are read from its stored snapshot (``state``), a value of another type read as
    absent; text is shown cut to ``job_fields.PAGE_CHARS`` characters."""
    st = stored_json.fields(row.state)
    nodes = st.get("node_list")
    reported = st.get("progress_ratio") is not None or st.get("reported_remaining_s") is not None
    return JobSummary(
        scheduler=row.scheduler,
        cluster=row.cluster,
        job_id=row.job_id,
        name=cut(row.name, PAGE_CHARS),
        user=cut(row.user, PAGE_CHARS),
        status=row.status,
        active=row.active,
        partition=_shown_text(st.get("partition")),
        num_gpus=_integer(st.get("num_gpus")),
        gpus_allocated=gpus if isinstance(gpus := st.get("gpus_allocated"), bool) else None,
        gpu_type=_shown_text(st.get("gpu_type")),
        num_nodes=_integer(st.get("num_nodes")),
        node_list=([n for n in nodes if isinstance(n, str)] if isinstance(nodes, list) else None),
        submit_time_s=stored_json.number(st.get("submit_time_s")),
        start_time_s=stored_json.number(st.get("start_time_s")),
        end_time_s=stored_json.number(st.get("end_time_s")),
        time_limit_s=stored_json.number(st.get("time_limit_s")),
        stdout_path=_shown_text(st.get("stdout_path")),
        described_by=row.described_by,
        description=row.description_detail,
        progress=Progress(
            iteration=row.iteration,
            train_iters=row.train_iters,
            progress_ratio=_progress_ratio(row),
            last_progress_s=row.last_progress_s,
        ),
        prediction=_maybe(Prediction, row.prediction),
        eta=_maybe(Eta, row.eta),
        scheduler_reported=(
            SchedulerReported(
                progress_ratio=stored_json.number(st.get("progress_ratio")),
                remaining_s=stored_json.number(st.get("reported_remaining_s")),
                updated_s=stored_json.number(st.get("progress_updated_s")),
            )
            if reported
            else None
        ),
        first_seen_s=row.first_seen_s,
        last_seen_s=_last_seen(row, source),
        ended_s=row.ended_s,
        data_age_s=None if source is None else source.age_s,
        stale=True if source is None else source.stale,
        outcome=row.outcome,
        queue_forecast=_maybe(QueueForecast, row.queue_forecast),
    )


#: What makes a refused or unreadable log readable, by a phrase of the reason
#: (``adapters.files`` words its refusals so); the first that matches.
LOG_FIXES = (
    (
        ("outside the allowed directories", "no directory is allowed"),
        "write the log under the job's working directory, or have the operator add its "
        "directory to slurm.allowed_file_roots (kubernetes.allowed_file_roots)",
    ),
    (
        ("not searchable by user", "not readable by user", "permission denied"),
        "make the log readable, and its directories searchable, by the job's user (its "
        "owner, its group, or everyone for a job without a host user)",
    ),
    (
        ("not a regular file",),
        "point the job's output (#SBATCH --output) at a regular file, not a FIFO, device, "
        "socket or directory",
    ),
    (("not an absolute path", "not a valid path"), "give the job an absolute output path"),
    (
        ("not read within", "still hung", "changed while it was checked"),
        "nothing to change in the job: the file system did not answer in time (or the file "
        "was being replaced); it is read again next cycle",
    ),
)


def log_view(row: JobRow) -> LogReading | None:
    """The job's log as read: its path, the bytes read, and, when it is not read, why (the
    reason kept on its cursor by the ingest loop) and what fixes it."""
    cursor = stored_json.fields(row.log_cursor)
    path = cursor.get("path")
    if not isinstance(path, str):
        return None
    offset = stored_json.number(cursor.get("offset_bytes"))
    reason = stored_json.text(cursor.get("error")) or None
    fix = None
    if reason is not None:
        fix = next(
            (fix for phrases, fix in LOG_FIXES if any(p in reason for p in phrases)),
            "see the reason; the log is tried again every cycle",
        )
    return LogReading(
        path=path,
        offset_bytes=0 if offset is None else int(offset),
        not_read=reason,
        fix=fix,
    )


def stragglers_view(row: JobRow, now_s: float) -> dict[str, object]:
    """The job's straggler analysis (``Stragglers``: the job's keys and the stored report's,
    which the model keeps as they are): live when per-rank timings were seen, else from its
    trace, else ``available: false`` with the reason."""
    body: dict[str, object] = {
        "scheduler": row.scheduler,
        "cluster": row.cluster,
        "job_id": row.job_id,
        "status": row.status,
    }
    stragglers = stored_json.fields(row.stragglers)
    live = stragglers.get("report")
    trace = stored_json.fields(stragglers.get("trace"))
    if isinstance(live, Mapping):
        body.update(available=True, source="live", **live)
        remaining_ideal = stored_json.number(live.get("remaining_ideal_s"))
        last = row.last_progress_s
        body["predicted_completion_without_stragglers_s"] = (
            None if remaining_ideal is None or last is None else max(now_s, last + remaining_ideal)
        )
        return body
    if "report" in trace:
        body.update(
            available=True,
            source="trace",
            trace_path=trace.get("trace_path"),
            analysed_at_s=trace.get("analysed_at_s"),
        )
        body.update(stored_json.fields(trace["report"]))
        body["impact"] = trace.get("impact")
        return body
    body["available"] = False
    body["reason"] = trace.get("error") or NO_STRAGGLER_DATA
    return body


def encode_cursor(row: JobRow) -> str:
    """The opaque cursor that resumes a listing after ``row``."""
    raw = json.dumps([row.scheduler, row.cluster, row.job_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str, tuple[int, str]]:
    """The sort key a cursor resumes after; raises ``HTTPException`` 422 for a bad cursor."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        scheduler, cluster, job_id = json.loads(raw)
        if not all(isinstance(v, str) for v in (scheduler, cluster, job_id)):
            raise ValueError(cursor)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise HTTPException(
            422, "cursor: not a next_cursor of this API; list again without it"
        ) from None
    return (scheduler, cluster, job_sort_key(job_id))


def page_of(
    rows: list[JobRow], limit: int | None, cursor: str | None
) -> tuple[list[JobRow], str | None]:
    """The rows after ``cursor`` (sorted as the store sorts them), at most ``limit``, and the
    cursor of the next page (None: this was the last)."""
    if cursor is not None:
        after = decode_cursor(cursor)
        rows = [r for r in rows if listing_key(r) > after]
    if limit is None or len(rows) <= limit:
        return rows, None
    page = rows[:limit]
    return page, encode_cursor(page[-1])


def make_router(state: ServiceState, access: Access) -> APIRouter:
    """The job routes over ``state``'s store and clock, for callers ``access`` lets read."""
    router = APIRouter(tags=["jobs"], dependencies=[Depends(access.require(Role.READER))])
    store = state.store

    def sources(now_s: float, *, nodes: bool = True) -> dict[tuple[str, str], SourceView]:
        rows = store.sources(nodes=nodes)
        views = [source_view(r, now_s, state.stale_after_s, nodes=nodes) for r in rows]
        return {(v.scheduler, v.cluster): v for v in views}

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

    scheduler_q = Query(None, description="Scheduler of the job, e.g. slurm")
    cluster_q = Query(None, description="Needed when clusters share job ids")

    @router.get(
        "/v1/jobs",
        operation_id="list_jobs",
        summary="Jobs with progress, prediction and ETA",
        response_model=JobList,
        response_model_exclude_unset=True,
        responses={
            200: {
                "description": "Jobs with progress, prediction and ETA",
                "links": {
                    "GetJob": {
                        "operationId": "get_job",
                        "parameters": {"job_id": "$response.body#/jobs/0/job_id"},
                    },
                    "GetJobStragglers": {
                        "operationId": "job_stragglers",
                        "parameters": {"job_id": "$response.body#/jobs/0/job_id"},
                    },
                },
            },
            **error_responses(401, 403, 422, 503),
        },
    )
    def list_jobs(
        active: bool = Query(False, description="Only pending and running jobs"),
        status: str | None = Query(None, description="Only jobs in this state, e.g. running"),
        limit: int | None = Query(
            None,
            ge=0,
            le=MAX_JOBS_PAGE,
            description="Jobs per page (absent: the limits.jobs_page setting, 100 by default); "
            "0: every job in one answer, with the sources' nodes, up to the "
            "limits.jobs_unpaged_max setting (more: 422)",
        ),
        cursor: str | None = Query(
            None, max_length=1024, description="next_cursor of the previous page"
        ),
    ) -> Response:
        limits = state.settings.limits
        unpaged = limit == 0
        page = limits.jobs_unpaged_max if unpaged else (limit or limits.jobs_page)
        now = state.clock()
        after = None if cursor is None else decode_cursor(cursor)
        rows = store.list_jobs(
            active_only=active, status=status, after=after, limit=page + 1
        )  # reads only its rows (10,000 jobs)
        if unpaged and len(rows) > page:
            raise HTTPException(
                422,
                f"limit: 0 lists every job in one answer, at most {page:,} "
                "(limits.jobs_unpaged_max); there are more: page with limit=1.."
                f"{MAX_JOBS_PAGE} and the answer's next_cursor",
            )
        by_key = sources(now, nodes=unpaged)  # a page leaves the nodes out
        rows, next_cursor = page_of(rows, page, None)
        listing = JobList(
            generated_at_s=now,
            stale=any(s.stale for s in by_key.values()),
            sources=list(by_key.values()),
            jobs=[job_view(r, by_key.get((r.scheduler, r.cluster))) for r in rows],
            next_cursor=next_cursor,
        )
        return answer(listing)

    @router.get(
        "/v1/jobs/{job_id:path}/stragglers",
        operation_id="job_stragglers",
        summary="Live straggler analysis: flagged ranks, what-if slowdown, impact and advice",
        response_model=Stragglers,
        response_model_exclude_unset=True,
        responses=error_responses(401, 403, 404, 409, 422, 503),
    )
    def get_stragglers(
        job_id: str, scheduler: str | None = scheduler_q, cluster: str | None = cluster_q
    ) -> dict[str, object]:
        return stragglers_view(one_job(job_id, scheduler, cluster), state.clock())

    @router.get(
        "/v1/jobs/{job_id:path}",
        operation_id="get_job",
        summary="One job in detail",
        response_model=JobDetail,
        response_model_exclude_unset=True,
        responses=error_responses(401, 403, 404, 409, 422, 503),
    )
    def get_job(
        job_id: str, scheduler: str | None = scheduler_q, cluster: str | None = cluster_q
    ) -> Response:
        row = one_job(job_id, scheduler, cluster)
        summary = job_view(row, sources(state.clock()).get((row.scheduler, row.cluster)))
        detail = JobDetail(
            **dict(summary),
            scenario=row.scenario,
            state=row.state,
            # each of the model's fields read from the row's column of that name
            samples=[
                StepSample.model_validate(s, from_attributes=True) for s in store.samples(row.id)
            ],
            eta_history=[
                Eta.model_validate(p.payload)
                for p in store.predictions(row.id, kind="eta", limit=50)
            ],
            events=job_events(row),
            gpus=_maybe(GpuUsage, row.gpus),
            log=log_view(row),
        )
        if row.description_facts is not None:  # absent for a job described otherwise
            detail.launch_description = LaunchFacts.model_validate(row.description_facts)
        return answer(detail)

    return router
