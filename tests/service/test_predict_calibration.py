"""POST /v1/predict with a calibration learnt from observed runs: the calibrated fields are
added for the cluster asked for, the model's fields stay as computed."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from planner.calibration.observed import ObservedCalibration, observe_runs
from planner.calibration.observed_runs import read_observed_runs
from planner.service.api import predict
from tests.calibration.test_observed import _runs_text, _scenario


def _client(calibration: ObservedCalibration | None) -> TestClient:
    app = FastAPI()
    app.include_router(predict.make_router(calibration=lambda: calibration))
    return TestClient(app)


def test_predict_applies_the_observed_calibration() -> None:
    runs, _ = read_observed_runs(_runs_text(1.25, cluster="east"), "runs.jsonl")
    calibration = observe_runs(runs).calibration
    with _client(calibration) as client:
        plain = client.post("/v1/predict", json=_scenario(2, 8)).json()
        assert plain["calibration"]["level"] == "gpu_recipe"  # no cluster: learnt elsewhere
        east = client.post("/v1/predict?cluster=east", json=[_scenario(2, 8)])
    assert east.status_code == 200
    (body,) = east.json()
    assert body["iteration_time_s"] == plain["iteration_time_s"]
    assert body["calibration"]["method"] == "observed_runs"
    assert body["calibration"]["level"] == "key"
    assert body["calibrated_iteration_time_s"] > 1.2 * body["iteration_time_s"]


def test_predict_without_a_calibration_is_the_plain_contract() -> None:
    with _client(None) as client:
        body = client.post("/v1/predict?cluster=east", json=_scenario(1, 1)).json()
    assert "calibration" not in body
    assert "calibrated_iteration_time_s" not in body
