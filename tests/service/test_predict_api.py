"""POST /v1/predict: the same contract as `planner predict --json`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from adapters.logs import LogTailer
from planner.service.main import create_app
from planner.service.settings import Settings

VALID = {
    "name": "llama3-8b",
    "model": {"preset": "llama3-8b"},
    "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
    "parallelism": {"tensor_parallel": 1, "global_batch_size": 64},
}


@pytest.fixture
def client(db_url: str) -> Iterator[TestClient]:
    app = create_app(
        Settings(database_url=db_url), sources=[], reader=LogTailer(), start_loops=False
    )
    with TestClient(app) as c:
        yield c


def test_one_valid_scenario(client: TestClient) -> None:
    response = client.post("/v1/predict", json=VALID)
    assert response.status_code == 200
    body = response.json()
    assert body["name"] == "llama3-8b"
    for key in (
        "iteration_time_s",
        "tokens_per_s",
        "tokens_per_s_per_gpu",
        "model_flops_per_iteration",
        "model_tflops_per_gpu",
        "mfu",
        "memory_per_gpu_bytes",
        "fits_in_memory",
        "breakdown_s",
        "time_to_train_s",
    ):
        assert key in body


def test_a_list_with_an_invalid_scenario(client: TestClient) -> None:
    bad = {**VALID, "name": "bad", "hardware": {"gpu": "h100-nonexistent", "num_gpus": 8}}
    response = client.post("/v1/predict", json=[VALID, bad])
    assert response.status_code == 422
    good, broken = response.json()
    assert good["iteration_time_s"] > 0
    assert broken["name"] == "bad"
    assert broken["error"].startswith("hardware.gpu:")


def test_not_a_scenario(client: TestClient) -> None:
    response = client.post(
        "/v1/predict", content=b"[1, 2", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert "error" in response.json()
