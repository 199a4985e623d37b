"""``POST /v1/simulate`` through the real app, over the live queue the service ingested from the
fake API server loaded with tests/data/kubernetes/cluster.yaml (real client, real store).

The queue: the JobSet llama-70b holds both H100 nodes (16 GPUs) and is past its predicted
runtime (it ends now); the PyTorchJob gpt-13b waits first in ClusterQueue gpu-cq for all 16
GPUs (about 27 h predicted). A job submitted now for 8 H100 GPUs therefore starts when gpt-13b
ends, and never before.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from planner.cli import app as cli
from planner.service.api.simulate import _nodes as stored_nodes
from planner.service.models import SourceRow
from planner.service.security_settings import LimitSettings
from planner.specs.job import NodeState
from tests.k8s_fake import FakeKube
from tests.service.kube_app import cluster_server, ingest, kube_app, wait

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "llama3-8b-h100.yaml"
SCENARIO = yaml.safe_load(EXAMPLE.read_text())
LIMITS = LimitSettings(workers=1, queue=0)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeKube]:
    with cluster_server() as server:
        yield server


@pytest.fixture(scope="module")
def client(fake: FakeKube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    app = kube_app(fake, tmp_path_factory.mktemp("simulate") / "p.db", limits=LIMITS)
    with TestClient(app, base_url="http://localhost") as test_client:
        ingest(app.state.planner)
        yield test_client


@pytest.fixture(scope="module")
def served(fake: FakeKube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app served over real HTTP (uvicorn in a thread), for the command line."""
    app = kube_app(fake, tmp_path_factory.mktemp("served") / "p.db", limits=LIMITS)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait("the server", lambda: server.started)
        ingest(app.state.planner)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def _post(client: TestClient, body: dict[str, Any]) -> Any:
    return client.post("/v1/simulate", json=body)


def test_a_job_submitted_now_starts_when_the_queue_ahead_of_it_ends(client: TestClient) -> None:
    ahead = client.get("/v1/jobs/team-a/pytorchjob/gpt-13b").json()["queue_forecast"]
    answer = _post(client, {"scenario": SCENARIO, "job": {"name": "probe"}})
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["source"] == "kubernetes/k8s-test"
    assert result["runtime_from"] == "scenario"
    assert result["num_gpus"] == 8
    assert result["gpu_type"] == "h100-sxm"
    assert (result["jobs_running"], result["jobs_pending"]) == (2, 1)
    start, done, runtime = result["start_s"], result["completion_s"], result["runtime_s"]
    # it waits for gpt-13b, which takes all 16 H100 GPUs first
    for q in ("p10", "p50", "p90"):
        assert start[q] == pytest.approx(ahead["completion_s"][q], rel=0.02)
    assert start["p10"] <= start["p50"] <= start["p90"]
    assert done["p50"] > start["p50"]
    assert done["p50"] - start["p50"] == pytest.approx(runtime["p50"], rel=0.25)
    assert result["wait_s"]["p50"] == pytest.approx(start["p50"] - result["made_at_s"])
    # the prediction of the scenario is the runtime's median
    predicted = client.post("/v1/predict", json=SCENARIO).json()
    assert runtime["p50"] == pytest.approx(predicted["time_to_train_s"], rel=1e-6)


def test_a_given_runtime_replaces_the_prediction(client: TestClient) -> None:
    body = {"job": {"num_gpus": 8, "gpu_type": "h100", "runtime_s": {"p50": 3600.0, "p90": 7200.0}}}
    result = _post(client, body).json()
    assert result["runtime_from"] == "runtime_s"
    assert result["runtime_s"] == {"p10": 3600.0, "p50": 3600.0, "p90": 7200.0}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"job": {"num_gpus": 8, "gpu_type": "h100"}}, "job.runtime_s: "),
        ({"job": {"num_gpus": 64, "gpu_type": "h100", "time_limit_s": 3600}}, "job.num_gpus: "),
        ({"job": {"num_gpus": 8, "gpu_type": "a100", "time_limit_s": 60}}, "job.gpu_type: "),
        ({"job": {"nmu_gpus": 8}}, "body.job.nmu_gpus: "),
        ({"job": {"name": "x" * 200}}, "body.job.name: "),
        ({"samples": 100_000}, "body.samples: "),
        ({"scenario": {**SCENARIO, "hardware": {"gpu": "h100-sxm"}}}, "scenario: "),
        ({"source": "slurm", "job": {"num_gpus": 8, "time_limit_s": 60}}, "source: "),
    ],
)
def test_bad_input_is_a_422_naming_the_field(
    client: TestClient, body: dict[str, Any], field: str
) -> None:
    answer = _post(client, body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"].startswith(field), answer.json()["error"]


def test_a_busy_pool_answers_429(client: TestClient) -> None:
    pool = client.app.state.pool  # type: ignore[attr-defined]
    gate = threading.Event()

    async def hold() -> None:
        await pool.run(None, gate.wait, 10.0)

    portal = client.portal
    assert portal is not None
    held = portal.start_task_soon(hold)
    try:
        wait("the one worker busy", lambda: pool.admitted == 1)
        answer = _post(client, {"job": {"num_gpus": 8, "gpu_type": "h100", "time_limit_s": 60}})
    finally:
        gate.set()
        held.result(timeout=10)
    assert answer.status_code == 429
    assert answer.headers["retry-after"] == "5"
    assert answer.json()["error"].startswith("limits.workers: ")


def test_the_command_line_asks_the_service(served: str, tmp_path: Path) -> None:
    runner = CliRunner()
    table = runner.invoke(cli, ["simulate", str(EXAMPLE), "--url", served])
    assert table.exit_code == 0, table.output
    assert "submitted now to kubernetes/k8s-test: 2 running, 1 waiting ahead" in table.stdout
    assert [line.split()[0] for line in table.stdout.splitlines()[2:6]] == [
        "start",
        "finish",
        "wait",
        "runtime",
    ]
    as_json = runner.invoke(cli, ["simulate", str(EXAMPLE), "--url", served, "--json"])
    assert as_json.exit_code == 0, as_json.output
    result = json.loads(as_json.stdout)
    assert result["runtime_from"] == "scenario"
    assert result["num_gpus"] == 8
    # a job file with the request's sections; the API's 422 names the field, exit 2
    job = tmp_path / "job.yaml"
    job.write_text(
        yaml.safe_dump({"job": {"num_gpus": 64, "gpu_type": "h100", "time_limit_s": 60}})
    )
    refused = runner.invoke(cli, ["simulate", str(job), "--url", served])
    assert refused.exit_code == 2
    assert refused.stderr.startswith("planner: job.num_gpus: 64 GPUs never fit")


def test_the_command_line_says_when_the_service_is_unreachable(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = CliRunner().invoke(
        cli, ["simulate", str(EXAMPLE), "--url", f"http://127.0.0.1:{port}"]
    )
    assert result.exit_code == 1
    assert result.stderr.startswith(f"planner: cannot reach the planner at http://127.0.0.1:{port}")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- 1\n- 2\n")
    invalid = CliRunner().invoke(cli, ["simulate", str(bad)])
    assert invalid.exit_code == 2


def test_nodes_stored_by_another_version_are_read_without_a_traceback() -> None:
    """The queue is built from the nodes the last poll stored: a node without a state is left
    out, a value of another type reads as the field's default, a good node as it was."""
    good = {
        "name": "gpu-1",
        "state": "idle",
        "num_gpus": 8,
        "num_gpus_allocated": 2,
        "gpu_type": "h100",
        "num_cpus": 96,
        "memory_bytes": 2.0e12,
        "partitions": ["gpu"],
        "num_cpus_allocated": 8,
        "memory_allocated_bytes": 1.0e11,
    }
    row = SourceRow(
        name="slurm",
        scheduler="slurm",
        nodes=[good, {"name": "gpu-2"}, {"name": "gpu-3", "state": "idle", "num_gpus": "8"}],
    )
    first, third = stored_nodes(row)
    assert first == NodeState(**{**good, "partitions": ("gpu",)})
    assert third == NodeState(name="gpu-3", state="idle")
