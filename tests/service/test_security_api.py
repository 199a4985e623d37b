"""The API's security: who may call what, read-only mode, cross-origin writes, body
limits, budgets and the Kubernetes reviews. Each probe of the issue that these cover fails on
code where every endpoint was open and nothing was limited."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.logs import LogTailer
from planner.errors import SpecError
from planner.service.main import create_app
from planner.service.security_settings import AuthSettings, LimitSettings
from planner.service.settings import Settings
from planner.service.store.sql import SqlStore
from tests.k8s_fake import FakeKube
from tests.search.conftest import SMALL

from .conftest import ADMIN_TOKEN, OPERATOR_TOKEN, READER_TOKEN, Clock, ScriptedSource, bearer
from .test_calibration_service import SAMPLES
from .test_service import app_for


def samples_csv() -> str:
    lines = (SAMPLES / "op_samples.csv").read_text().splitlines()
    return "\n".join([lines[0], *[row for row in lines[1:] if row.startswith("gemm,")][:60]]) + "\n"


def upload(client: TestClient, name: str, **kw: Any) -> Any:
    return client.post(
        "/v1/calibrations",
        files={"op_samples": ("op_samples.csv", samples_csv(), "text/csv")},
        data={"name": name},
        **kw,
    )


def test_calibration_uploads_need_an_operator_and_are_audited(
    db_url: str, source: ScriptedSource, clock: Clock
) -> None:
    # Probe: POST /v1/calibrations replaced the calibration for anyone who reached the port.
    with app_for(db_url, source, clock) as client:
        anonymous = upload(client, "cpu")
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        assert "bearer token" in anonymous.json()["error"]
        assert upload(client, "cpu", headers=bearer("not-a-token-at-all")).status_code == 401
        assert upload(client, "cpu", headers=bearer(READER_TOKEN)).status_code == 403
        assert upload(client, "cpu", headers=bearer(OPERATOR_TOKEN)).status_code == 200
        # replacing an existing calibration needs an admin
        again = upload(client, "cpu", headers=bearer(OPERATOR_TOKEN))
        assert again.status_code == 403
        assert "admin" in again.json()["error"]
        assert upload(client, "cpu", headers=bearer(ADMIN_TOKEN)).status_code == 200
        # reads stay open on loopback; the audit trail needs an operator
        assert client.get("/v1/calibrations").status_code == 200
        assert client.get("/v1/audit").status_code == 401
        records = client.get("/v1/audit", headers=bearer(OPERATOR_TOKEN)).json()["records"]
    assert [(r["actor"], r["action"], r["reason"]) for r in records] == [
        ("ci-admin", "calibration_upload", "replaced"),
        ("ci-operator", "calibration_upload", "new operator calibration"),
    ]


def test_a_cross_origin_browser_form_post_changes_nothing(
    db_url: str, source: ScriptedSource, clock: Clock
) -> None:
    # Probe: a cross-origin browser form post to POST /v1/calibrations succeeded (no CSRF
    # protection). A browser's form carries no Authorization header, and even a page that
    # somehow holds a token is refused by its Origin.
    evil = {"Origin": "http://evil.example"}
    with app_for(db_url, source, clock) as client:
        assert upload(client, "cpu", headers=evil).status_code == 403
        refused = upload(client, "cpu", headers={**evil, **bearer(ADMIN_TOKEN)})
        assert refused.status_code == 403
        assert "cross-origin" in refused.json()["error"]
        same = upload(client, "cpu", headers={"Origin": "http://testserver", **bearer(ADMIN_TOKEN)})
        assert same.status_code == 200
        # JSON routes take JSON only: a form or text/plain post never reaches them
        form = client.post(
            "/v1/predict", content=b"name=x", headers={"content-type": "text/plain", **evil}
        )
        assert form.status_code == 415
        assert "application/json" in form.json()["error"]
        assert "access-control-allow-origin" not in form.headers  # CORS off by default
        assert client.get("/v1/calibrations").json()["operators"][0]["name"] == "cpu"


def test_read_only_mode_refuses_writes_and_writes_no_hints(
    db_url: str, source: ScriptedSource, clock: Clock
) -> None:
    with app_for(db_url, source, clock, read_only=True) as client:
        refused = upload(client, "cpu", headers=bearer(ADMIN_TOKEN))
        assert refused.status_code == 403
        assert "read_only" in refused.json()["error"]
        assert client.app.state.planner.slurm_hints is None  # type: ignore[attr-defined]
        assert client.get("/v1/jobs").status_code == 200


def test_reads_are_anonymous_only_on_loopback(
    tmp_path: Path, token_file: Path, source: ScriptedSource
) -> None:
    settings = Settings(
        host="0.0.0.0",
        database_url=f"sqlite:///{tmp_path / 'p.db'}",
        auth=AuthSettings(token_file=str(token_file)),
    )
    app = create_app(settings, sources=[source], reader=LogTailer(), start_loops=False)
    with TestClient(app) as client:
        assert client.get("/v1/jobs").status_code == 401
        assert client.post("/v1/predict", json={}).status_code == 401
        assert client.get("/v1/jobs", headers=bearer(READER_TOKEN)).status_code == 200
        assert client.get("/healthz").status_code == 200
        assert client.get("/metrics").status_code == 200


def test_an_unauthenticated_public_listener_is_refused(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'p.db'}"
    with pytest.raises(SpecError) as err:
        create_app(Settings(host="0.0.0.0", database_url=db), sources=[], start_loops=False)
    assert err.value.field == "auth.token_file"
    assert "PLANNER_AUTH__MODE=none" in str(err.value)
    app = create_app(
        Settings(host="0.0.0.0", database_url=db, auth=AuthSettings(mode="none")),
        sources=[],
        start_loops=False,
    )
    with TestClient(app) as client:  # none: said on purpose, everyone is admin
        assert upload(client, "cpu").status_code == 200


@pytest.mark.parametrize(
    ("host", "mode", "anonymous"),
    [("127.0.0.1", "token", {"reader"}), ("0.0.0.0", "token", set()), ("0.0.0.0", "none", None)],
    ids=["loopback", "public", "mode-none"],
)
def test_the_published_security_is_what_each_operation_enforces(
    tmp_path: Path, token_file: Path, host: str, mode: str, anonymous: set[str] | None
) -> None:
    # Probe: /openapi.json said GET/POST /v1/reviews* needed a token while they answered
    # without one (Schemathesis ST401/ST203): the schema must say what the routes do, for
    # every operation and every access setting.
    settings = Settings(
        host=host,
        database_url=f"sqlite:///{tmp_path / 'p.db'}",
        auth=AuthSettings(mode=mode, token_file=str(token_file)),  # type: ignore[arg-type]
    )
    app = create_app(settings, sources=[], reader=LogTailer(), start_loops=False)
    with TestClient(app) as client:
        spec = client.get("/openapi.json").json()
        checked = set()
        for path, item in spec["paths"].items():
            for method, operation in item.items():
                if "security" not in operation:
                    continue  # probes and /metrics: open by design
                optional = {} in operation["security"]
                url = path.replace("{job_id}", "1")
                body = operation.get("requestBody", {}).get("content", {})
                if "multipart/form-data" in body:
                    answer = client.request(method, url, files={"x": ("x", b"", "text/plain")})
                else:
                    answer = client.request(method, url, json={} if body else None)
                name = f"{method.upper()} {path}"
                assert (answer.status_code == 401) is not optional, (name, answer.text)
                if anonymous is None:
                    assert optional, name  # mode none: everyone may do everything
                elif not anonymous:
                    assert not optional, name
                checked.add(name)
    assert len(checked) >= 14
    assert {"POST /v1/reviews", "GET /v1/reviews", "GET /v1/reviews/latest"} <= checked


def test_body_limits_and_budgets_answer_clearly(tmp_path: Path) -> None:
    limits = LimitSettings(
        json_body_bytes=4096,
        upload_body_bytes=len(samples_csv()) + 1000,
        explore_max_candidates=1000,
    )
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'p.db'}", limits=limits)
    app = create_app(settings, sources=[], reader=LogTailer(), start_loops=False)
    with TestClient(app) as client:
        big = client.post("/v1/predict", json=[{"name": "x" * 100}] * 100)
        assert big.status_code == 413
        assert big.json()["error"].startswith("limits.json_body_bytes:")
        declared = client.post(
            "/v1/calibrations",
            content=b"x",
            headers={"content-type": "multipart/form-data; boundary=x", "content-length": "1e9"},
        )
        assert declared.status_code == 400
        assert declared.json()["error"] == "content-length: not a byte count"
        # Probe: a 167 MB calibration upload was read whole (and blocked /healthz); over the
        # limit it is refused, streamed or declared, before authentication or parsing.
        streamed = client.post(
            "/v1/calibrations",
            files={"op_samples": ("op_samples.csv", samples_csv() * 3, "text/csv")},
        )
        assert streamed.status_code == 413
        assert streamed.json()["error"].startswith("limits.upload_body_bytes:")
        declared_big = client.post(
            "/v1/stragglers",
            content=b"x",
            headers={
                "content-type": "multipart/form-data; boundary=x",
                "content-length": "167000000",
            },
        )
        assert declared_big.status_code == 413
        explore = client.post("/v1/explore", json=SMALL)
        assert explore.status_code == 422
        assert explore.json()["error"].startswith("limits.explore_max_candidates:")


#: GPT-3 175B on 1,024 A100s, every knob open: about 10^6 candidates in many chunks.
GPT3: dict[str, Any] = {
    "name": "gpt3-175b",
    "model": {
        "num_layers": 96,
        "hidden_size": 12288,
        "num_attention_heads": 96,
        "seq_length": 2048,
        "vocab_size": 51200,
    },
    "hardware": {"gpu": "a100-80gb", "num_gpus": 1024},
    "parallelism": {"global_batch_size": 1536},
}


def test_explore_time_budget_names_the_budget(tmp_path: Path) -> None:
    # Probe: explore ran past 150 s and kept burning CPU; now it stops between chunks.
    limits = LimitSettings(explore_time_budget_s=0.05)
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'p.db'}", limits=limits)
    app = create_app(settings, sources=[], reader=LogTailer(), start_loops=False)
    with TestClient(app) as client:
        answer = client.post("/v1/explore", json=copy.deepcopy(GPT3))
        assert answer.status_code == 422
        assert answer.json()["error"].startswith("limits.explore_time_budget_s:")


def test_kubernetes_mode_reviews_tokens_with_the_cluster(tmp_path: Path) -> None:
    fake = FakeKube().start()
    try:
        fake.tokens = {"sa-token": ("system:serviceaccount:ml:ci", ["system:serviceaccounts"])}
        fake.grants = {
            ("system:serviceaccounts", "planner.llm", "roles", "use", "reader"),
            ("system:serviceaccount:ml:ci", "planner.llm", "roles", "use", "operator"),
        }
        settings = Settings(
            host="0.0.0.0",
            database_url=f"sqlite:///{tmp_path / 'p.db'}",
            auth=AuthSettings(mode="kubernetes"),
        )
        app = create_app(
            settings,
            store=SqlStore(settings.database_url),
            sources=[],
            reader=LogTailer(),
            kube_api_client=fake.api_client(),
            start_loops=False,
        )
        with TestClient(app) as client:
            assert client.get("/v1/jobs").status_code == 401
            assert client.get("/v1/jobs", headers=bearer("forged")).status_code == 401
            assert client.get("/v1/jobs", headers=bearer("sa-token")).status_code == 200
            assert upload(client, "k8s", headers=bearer("sa-token")).status_code == 200
            again = upload(client, "k8s", headers=bearer("sa-token"))
            assert again.status_code == 403  # admin is not granted
        reviews = [p for m, p in fake.requests if m == "POST" and "review" in p]
        assert any(p.endswith("/tokenreviews") for p in reviews)
        assert any(p.endswith("/subjectaccessreviews") for p in reviews)
    finally:
        fake.stop()
