"""The HTTP API's contract: /openapi.json has request and response schemas for every /v1 route,
responses match it (the conftest checks every response of the service tests), a client
generated from it with openapi-python-client round-trips requests, and the docs are served
from this process (no CDN)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from adapters.logs import LogTailer
from planner.scenario.schema import SECTIONS
from planner.service.main import create_app
from planner.service.settings import Settings
from planner.specs.job import JobStatus
from tests.service.openapi_check import check_response

from .conftest import Clock, JobFactory, ScriptedSource

VALID = {
    "name": "llama3-8b",
    "model": {"preset": "llama3-8b"},
    "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
    "parallelism": {"tensor_parallel": 1, "global_batch_size": 64},
}


@pytest.fixture
def client(db_url: str, source: ScriptedSource, clock: Clock) -> Iterator[TestClient]:
    app = create_app(
        Settings(database_url=db_url),
        sources=[source],
        reader=LogTailer(),
        clock=clock,
        start_loops=False,
    )
    with TestClient(app) as c:
        yield c


def test_every_v1_route_has_request_and_response_schemas(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    operations = [
        (path, method, op)
        for path, item in spec["paths"].items()
        if path.startswith("/v1/")
        for method, op in item.items()
    ]
    # + GET /v1/audit; reviews: POST, GET, latest, queue; POST /v1/simulate;
    # GET /v1/calibrations/runs
    assert len(operations) == 16
    for path, method, op in operations:
        content = op["responses"]["200"]["content"]
        if path == "/v1/calibrations/runs":  # JSON lines, as `planner calibrate observe` reads
            assert set(content) == {"application/x-ndjson"}
            assert content["application/x-ndjson"]["schema"]["description"]
        else:
            ok = content["application/json"]["schema"]
            assert ok.get("$ref") or ok.get("anyOf"), (path, method)
        if method == "post":
            body = op["requestBody"]["content"]
            schema = next(iter(body.values()))["schema"]
            assert schema.get("$ref") or schema.get("anyOf"), (path, method)
        for status, answer in op["responses"].items():
            if status.startswith(("4", "5")):
                assert "schema" in answer["content"]["application/json"], (path, status)
    error = spec["components"]["schemas"]["ErrorResponse"]
    assert set(error["required"]) == {"error", "detail"}


def test_the_published_schema_holds_the_scenario_format(client: TestClient) -> None:
    """``POST /v1/predict`` takes a scenario or a list of them, and /openapi.json spells out
    each section of the scenario format with the fields of ``planner.scenario.schema``."""
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    body = spec["paths"]["/v1/predict"]["post"]["requestBody"]["content"]["application/json"]
    one = {"$ref": "#/components/schemas/ScenarioDocument"}
    assert one in body["schema"]["anyOf"]
    assert {"type": "array", "items": one} in body["schema"]["anyOf"]
    document = schemas["ScenarioDocument"]["properties"]
    for section, model in SECTIONS.items():
        assert {"$ref": f"#/components/schemas/{model.__name__}"} in document[section]["anyOf"]
        published = schemas[model.__name__]["properties"]
        assert set(published) == set(model.model_fields), section
    assert {"num_layers", "hidden_size", "seq_length"} <= set(schemas["ModelSection"]["properties"])
    assert schemas["ModelSection"]["properties"]["num_layers"]["anyOf"][0]["type"] == "integer"


def test_one_error_shape(client: TestClient) -> None:
    missing = client.get("/v1/jobs/999")
    bad_query = client.get("/v1/jobs", params={"active": "maybe"})
    bad_body = client.post(
        "/v1/predict", content=b"[1, 2", headers={"content-type": "application/json"}
    )
    for response, status in ((missing, 404), (bad_query, 422), (bad_body, 422)):
        assert response.status_code == status
        body = response.json()
        assert set(body) == {"error", "detail"}
        assert body["error"] == body["detail"]
    assert bad_query.json()["error"].startswith("query.active:")


def test_the_schema_check_catches_a_body_that_breaks_the_contract(client: TestClient) -> None:
    """The conftest's check is real: a body without the documented fields fails it."""
    request = httpx.Request("GET", "http://testserver/v1/jobs")
    wrong = httpx.Response(200, json={"jobs": "none"}, request=request)
    with pytest.raises(AssertionError, match="does not match the published schema"):
        check_response(client.app, wrong)
    undocumented = httpx.Response(418, json={}, request=request)
    with pytest.raises(AssertionError, match="not in the OpenAPI document"):
        check_response(client.app, undocumented)


def test_responses_of_this_module_were_checked(
    client: TestClient, responses_match_the_published_schema: list[int]
) -> None:
    client.get("/v1/jobs")
    client.get("/healthz")
    assert responses_match_the_published_schema[0] == 2


def test_docs_load_their_assets_from_the_service(client: TestClient) -> None:
    for page, assets in (
        ("/docs", ("/static-docs/swagger-ui-bundle.js", "/static-docs/swagger-ui.css")),
        ("/redoc", ("/static-docs/redoc.standalone.js",)),
    ):
        html = client.get(page)
        assert html.status_code == 200
        assert "cdn" not in html.text.lower()
        assert "https://" not in html.text
        for asset in assets:
            assert f'"{asset}"' in html.text or f"'{asset}'" in html.text
            served = client.get(asset)
            assert served.status_code == 200
            assert len(served.content) > 10_000
    assert "SwaggerUIBundle" in client.get("/static-docs/swagger-ui-bundle.js").text


def _generate_client(spec: dict[str, Any], root: Path) -> Any:
    (root / "openapi.json").write_text(json.dumps(spec))
    bin_dir = Path(sys.executable).parent
    subprocess.run(
        [
            str(bin_dir / "openapi-python-client"),
            "generate",
            "--path",
            str(root / "openapi.json"),
            "--meta",
            "none",
            "--output-path",
            str(root / "planner_client"),
        ],
        check=True,
        capture_output=True,
        timeout=60,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
    )
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module("planner_client")
    finally:
        sys.path.remove(str(root))


def test_a_generated_client_round_trips(
    client: TestClient, source: ScriptedSource, make_job: JobFactory, tmp_path: Path
) -> None:
    generated = _generate_client(client.get("/openapi.json").json(), tmp_path)
    try:
        predict = importlib.import_module("planner_client.api.predict.predict")
        list_jobs = importlib.import_module("planner_client.api.jobs.list_jobs")
        get_job = importlib.import_module("planner_client.api.jobs.get_job")
        models = importlib.import_module("planner_client.models")
        api = generated.Client(base_url="http://testserver").set_httpx_client(client)

        answer = predict.sync_detailed(client=api, body=models.ScenarioDocument.from_dict(VALID))
        assert answer.status_code == 200
        direct = client.post("/v1/predict", json=VALID).json()
        assert answer.parsed.iteration_time_s == direct["iteration_time_s"]
        assert answer.parsed.to_dict() == direct

        source.set_jobs(make_job(status=JobStatus.RUNNING))
        client.app.state.planner.ingestor.run_cycle()  # type: ignore[attr-defined]
        jobs = list_jobs.sync(client=api, active=True)
        assert [j.job_id for j in jobs.jobs] == ["42"]
        assert jobs.jobs[0].status == "running"
        missing = get_job.sync_detailed(job_id="404", client=api)
        assert missing.status_code == 404
        assert missing.parsed.error.startswith("job_id:")
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] == "planner_client"]:
            del sys.modules[name]
