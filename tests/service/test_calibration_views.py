"""``GET /v1/calibrations`` answers the API's models (``planner.service.api.models``) as its
views build them from the stored states: every field a model declares is set from the state,
and where a core or service record declares the same shape (a band bucket, a skipped run), the
model names exactly its fields."""

from __future__ import annotations

from typing import get_type_hints

from pydantic import BaseModel

from planner.forecast.bands import BandBucketJson
from planner.service.api.calibrations import (
    _eta_view,
    _learnt_view,
    _online_view,
    _operator_view,
)
from planner.service.api.models import EtaBandBucket, SkippedRun
from planner.service.learning import SkippedRunJson


def _unset(view: BaseModel) -> set[str]:
    return set(type(view).model_fields) - view.model_fields_set


def test_each_calibration_view_sets_every_field_of_its_model() -> None:
    learnt = _learnt_view(
        {"scheduler": "slurm", "cluster": "a", "fitted_s": 10.0, "num_runs": 3,
         "skipped": [{"job_id": "7", "reason": "iteration_time_s: zero"}]}
    )  # fmt: skip
    assert learnt is not None
    eta = _eta_view({"clusters": {"slurm/a": {"shutdown_s": [30.0]}}})
    operator = _operator_view("h100", 5.0, {"summary": ["gemm: 3 fits"]})
    views = [learnt, *learnt.skipped, *eta, operator]
    assert [_unset(v) for v in views] == [set()] * len(views)
    # the online view's update time is set by the route, from the row
    assert _unset(_online_view({})) == {"updated_s"}
    assert (eta[0].scheduler, eta[0].cluster, operator.summary) == ("slurm", "a", ["gemm: 3 fits"])


def test_the_shapes_declared_twice_name_the_same_fields() -> None:
    assert list(EtaBandBucket.model_fields) == list(get_type_hints(BandBucketJson))
    assert list(SkippedRun.model_fields) == list(get_type_hints(SkippedRunJson))
