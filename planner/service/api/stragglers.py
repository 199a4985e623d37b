"""``POST /v1/stragglers``: what-if straggler analysis of an uploaded per-rank trace."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, File, HTTPException, UploadFile

from planner.errors import SpecError
from planner.ports import TraceSource
from planner.service.api.errors import error_responses
from planner.service.api.models import TraceReport
from planner.stragglers import analyse


def make_router(traces: TraceSource) -> APIRouter:
    """The upload route; ``traces`` reads the uploaded files."""
    router = APIRouter(tags=["stragglers"])

    @router.post(
        "/v1/stragglers",
        operation_id="analyse_trace",
        summary="What-if straggler analysis of an uploaded per-rank trace (the CLI's JSON)",
        response_model=TraceReport,
        response_model_exclude_unset=True,
        responses=error_responses(422, 500),
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

    return router
