"""``POST /v1/predict``: one scenario or a list (the ``planner predict --json`` contract)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body
from fastapi.responses import JSONResponse

from planner.scenario import predict_documents
from planner.service.api.errors import error_responses
from planner.service.api.models import Prediction, ScenarioDocument, as_document


def make_router() -> APIRouter:
    """The predict route."""
    router = APIRouter(tags=["predict"])

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
            **error_responses(500, 503),
        },
    )
    def predict(
        body: Annotated[
            ScenarioDocument | list[ScenarioDocument],
            Body(description="A scenario or a list of them"),
        ],
    ) -> JSONResponse:
        docs = [as_document(d) for d in body] if isinstance(body, list) else [as_document(body)]
        results = predict_documents(docs)
        invalid = any("error" in r for r in results)
        content: Any = results if isinstance(body, list) else results[0]
        return JSONResponse(content, status_code=422 if invalid else 200)

    return router
