"""``POST /v1/stragglers``: what-if straggler analysis of an uploaded per-rank trace.

The upload is bounded (``limits.upload_body_bytes``) and the analysis runs on the worker pool
(``planner.service.api.work``); role ``reader``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, File, HTTPException, Request, UploadFile

from planner.errors import SpecError
from planner.ports import TraceSource
from planner.service.api.access import Access, open_access
from planner.service.api.errors import error_responses
from planner.service.api.models import TraceReport
from planner.service.api.work import WorkerPool
from planner.service.auth import Role
from planner.stragglers import analyse
from planner.stragglers.whatif import StragglerReportJson


def make_router(
    traces: TraceSource, access: Access | None = None, pool: WorkerPool | None = None
) -> APIRouter:
    """The upload route; ``traces`` reads the uploaded files on ``pool`` (default: one worker)
    for the callers ``access`` admits (default: all)."""
    access = access or open_access()
    pool = pool or WorkerPool.default()
    router = APIRouter(tags=["stragglers"], dependencies=[Depends(access.require(Role.READER))])

    def analyse_files(
        trace: bytes, meta: bytes, suffix: str, names: tuple[str, str]
    ) -> StragglerReportJson:
        with tempfile.TemporaryDirectory(prefix="planner-trace-") as tmp:
            trace_path = Path(tmp) / f"trace{suffix}"
            meta_path = Path(tmp) / "meta.yaml"
            trace_path.write_bytes(trace)
            meta_path.write_bytes(meta)
            try:
                return analyse(traces.read(str(trace_path), str(meta_path))).to_dict()
            except SpecError as exc:
                message = str(exc).replace(str(trace_path), names[0])
                message = message.replace(str(meta_path), names[1])
                raise HTTPException(422, message) from None

    @router.post(
        "/v1/stragglers",
        operation_id="analyse_trace",
        summary="What-if straggler analysis of an uploaded per-rank trace (the CLI's JSON)",
        response_model=TraceReport,
        response_model_exclude_unset=True,
        responses=error_responses(400, 401, 403, 413, 415, 422, 429, 500, 503),
    )
    async def analyse_upload(
        request: Request,
        trace: Annotated[UploadFile, File(description="Per-rank op trace, .parquet or .csv")],
        meta: Annotated[UploadFile, File(description="Job layout YAML (dp_size, pp_size, ...)")],
    ) -> StragglerReportJson:
        suffix = (Path(trace.filename or "trace.parquet").suffix or ".parquet").lower()
        if suffix not in (".parquet", ".csv"):
            raise HTTPException(
                422, f"trace: {suffix!r} files are not traces; send .parquet or .csv"
            )
        names = (trace.filename or "trace", meta.filename or "meta")
        return await pool.run(
            request, analyse_files, await trace.read(), await meta.read(), suffix, names
        )

    return router
