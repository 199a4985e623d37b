"""``POST /v1/predict``: one scenario or a list (the ``planner predict --json`` contract).

Runs on the worker pool (``planner.service.api.work``); role ``reader``. With a calibration
learnt from observed runs (``calibration``: called per request, so a refreshed calibration is
used at once), each prediction also gets its calibrated fields for the ``cluster`` query
parameter (``planner.calibration.observed``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.responses import JSONResponse

from planner.scenario.documents import (
    DocumentError,
    PredictedJson,
    PredictionCalibration,
    predict_results,
)
from planner.service.api.access import Access, open_access
from planner.service.api.errors import error_responses
from planner.service.api.models import Prediction, ScenarioDocument, as_document
from planner.service.api.work import WorkerPool
from planner.service.auth import Role


def make_router(
    access: Access | None = None,
    pool: WorkerPool | None = None,
    calibration: Callable[[], PredictionCalibration | None] | None = None,
) -> APIRouter:
    """The predict route on ``pool`` (default: one worker) for the callers ``access`` admits
    (default: all); ``calibration`` gives the observed-runs calibration to apply (None: none)."""
    access = access or open_access()
    pool = pool or WorkerPool.default()
    router = APIRouter(tags=["predict"], dependencies=[Depends(access.require(Role.READER))])

    @router.post(
        "/v1/predict",
        operation_id="predict",
        summary="Predict one scenario or a list (the `planner predict --json` contract)",
        response_model=Prediction | list[Prediction],
        responses={
            422: {
                "model": Prediction | list[Prediction],
                "description": "At least one scenario was invalid (see its error); a body that "
                "is not JSON gets the error shape",
            },
            **error_responses(400, 401, 403, 413, 415, 429, 500, 503),
        },
    )
    async def predict(
        request: Request,
        body: Annotated[
            ScenarioDocument | list[ScenarioDocument],
            Body(description="A scenario or a list of them"),
        ],
        cluster: Annotated[
            str,
            Query(
                max_length=200,
                description="Cluster the jobs run on (the observed-runs calibration's key)",
            ),
        ] = "",
    ) -> JSONResponse:
        docs = [as_document(d) for d in body] if isinstance(body, list) else [as_document(body)]
        observed = calibration() if calibration is not None else None
        results = await pool.run(request, _predict, docs, observed, cluster)
        invalid = any("error" in r for r in results)
        return JSONResponse(
            results if isinstance(body, list) else results[0],
            status_code=422 if invalid else 200,
        )

    return router


def _predict(
    docs: list[Mapping[str, object]], observed: PredictionCalibration | None, cluster: str
) -> list[PredictedJson | DocumentError]:
    return predict_results(docs, calibration=observed, cluster=cluster)
