"""POST /v1/explore and POST /v1/recommendations (planner.service.api.plan)."""

from __future__ import annotations

import copy
import json

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from planner.service.api.plan import make_router
from tests.recommend.test_allocation import JOB
from tests.search.conftest import SMALL


@pytest.fixture
def client() -> TestClient:
    app = FastAPI()
    app.include_router(make_router(workers=1))
    return TestClient(app)


def test_explore_one_document(client: TestClient) -> None:
    response = client.post("/v1/explore", params={"top_k": 2}, json=SMALL)
    assert response.status_code == 200
    body = response.json()
    assert len(body["top"]) == 2
    assert body["pareto"]
    assert body["counts"]["evaluated"] > 0


def test_explore_ranks_page(client: TestClient) -> None:
    first = client.post("/v1/explore", params={"top_k": 4}, json=SMALL).json()["top"]
    page = client.post("/v1/explore", params={"top_k": 2, "rank_offset": 2}, json=SMALL)
    assert [e["parallelism"] for e in page.json()["top"]] == [e["parallelism"] for e in first[2:]]


def test_explore_list_is_paged(client: TestClient) -> None:
    docs = [{**copy.deepcopy(SMALL), "name": f"job{i}"} for i in range(3)]
    response = client.post("/v1/explore", params={"offset": 1, "limit": 1, "top_k": 1}, json=docs)
    assert response.status_code == 200
    body = response.json()
    assert [r["name"] for r in body["results"]] == ["job1"]
    assert body["total"] == 3
    assert body["next_offset"] == 2


def test_explore_list_streams_json_lines(client: TestClient) -> None:
    docs = [{**copy.deepcopy(SMALL), "name": f"job{i}"} for i in range(2)]
    response = client.post("/v1/explore", params={"stream": True, "top_k": 1}, json=docs)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert [line["name"] for line in lines] == ["job0", "job1"]


def test_explore_invalid_is_422(client: TestClient) -> None:
    bad = {**copy.deepcopy(SMALL), "parallelism": {"global_batch_size": 64, "zero_stage": 7}}
    response = client.post("/v1/explore", json=bad)
    assert response.status_code == 422
    assert response.json()["error"].startswith("parallelism.zero_stage:")
    assert client.post("/v1/explore", params={"objective": "speed"}, json=SMALL).status_code == 422


def test_recommendations(client: TestClient) -> None:
    response = client.post("/v1/recommendations", json=JOB)
    assert response.status_code == 200
    assert response.json()["recommendation"]["num_gpus"] >= 1
    late = copy.deepcopy(JOB)
    late["recommend"]["deadline_s"] = 1.0
    response = client.post("/v1/recommendations", json=late)
    assert response.status_code == 422
    body = response.json()
    assert "cannot be met" in body["error"]
    assert body["scaling"]
