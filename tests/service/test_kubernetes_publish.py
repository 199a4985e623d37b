"""The service publishing its predictions onto Kubernetes objects (kubernetes.publish settings):
the real client against the fake API server loaded with tests/data/kubernetes/cluster.yaml.

The recorded cluster: the JobSet llama-70b runs on both H100 nodes (16 GPUs) well past its
predicted runtime, the PyTorchJob gpt-13b waits in ClusterQueue gpu-cq for 16 GPUs, the
TrainJob mixtral runs and reports 42 % progress through ``status.trainerStatus``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.kubernetes.translate import parse_time
from planner.service.settings import PublishSettings
from planner.service.store.sql import SqlStore
from tests.adapters.kubernetes.crd_schema import validate_object
from tests.k8s_fake import FakeKube
from tests.service.kube_app import cluster_server, ingest, kube_app, wait


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with cluster_server() as server:
        yield server


def _run(fake: FakeKube, tmp_path: Path, publish: PublishSettings, **kwargs: Any) -> TestClient:
    app = kube_app(fake, tmp_path / "p.db", publish, **kwargs)
    state = app.state.planner
    client = TestClient(app, base_url="http://localhost")
    with client:
        if state.settings.read_only:  # a read-only replica never campaigns for the lease
            wait("informer caches", lambda: state.kube.source.wait_synced(0.1))
            state.run_cycle()
            return client
        ingest(state)
        forecast = client.get("/v1/jobs/team-a/pytorchjob/gpt-13b").json()["queue_forecast"]
        assert forecast["start_s"]["p50"] is not None, forecast  # the queue forecast placed it
        if publish.workload_admission:  # the informers see what the first cycle wrote
            wait("workload watched", lambda: _watched_condition(state))
        state.run_cycle()  # which writes nothing new
    return client


def _watched_condition(state: Any) -> bool:
    informer = state.kube.source.informers["workloads"]
    return any(
        c.get("type") == "PredictedAdmission"
        for w in informer.items()
        for c in (w.get("status") or {}).get("conditions", [])
    )


def test_predictions_are_published_on_workload_and_jobs(fake: FakeKube, tmp_path: Path) -> None:
    publish = PublishSettings(
        workload_admission=True, trainjob_progress=True, expected_runtime=True
    )
    _run(fake, tmp_path, publish)
    wl = fake.get("kueue.x-k8s.io", "workloads", "pytorchjob-gpt-13b-8c1d2", "team-a")
    assert wl is not None
    assert validate_object(wl) == []
    cond = next(c for c in wl["status"]["conditions"] if c["type"] == "PredictedAdmission")
    assert (cond["status"], cond["reason"]) == ("True", "QueueForecast")
    annotations = wl["metadata"]["annotations"]
    p50 = parse_time(annotations["planner.llm/predicted-admission-p50"])
    p90 = parse_time(annotations["planner.llm/predicted-admission-p90"])
    assert p50 is not None
    assert p90 is not None
    assert p50 <= p90
    assert annotations["planner.llm/predicted-admission-p50"] in cond["message"]
    # one write of each: the second cycle saw nothing move enough
    writes = [p for m, p in fake.requests if m == "PATCH" and "pytorchjob-gpt-13b-8c1d2" in p]
    assert len(writes) == 2

    trainjob = fake.get("trainer.kubeflow.org", "trainjobs", "mixtral", "team-b")
    assert trainjob is not None
    assert trainjob["metadata"]["annotations"]["planner.llm/progress-ratio"] == "0.420"
    pytorchjob = fake.get("kubeflow.org", "pytorchjobs", "gpt-13b", "team-a")
    assert pytorchjob is not None
    # the pass that wrote is audited, once: the second cycle wrote nothing
    (audited,) = SqlStore(f"sqlite:///{tmp_path / 'p.db'}").audit(action="published_predictions")
    assert audited.outcome == "ok"
    assert audited.detail == {
        "written": {
            "workload_condition": 1,
            "workload_annotations": 1,
            "jobset_annotations": 1,
            "pytorchjob_annotations": 1,
            "trainjob_annotations": 1,
        },
        "errors": 0,
    }
    runtime = pytorchjob["metadata"]["annotations"]["planner.llm/expected-runtime"]
    assert runtime.endswith("m")
    assert "h" in runtime


@pytest.mark.parametrize("read_only", [False, True])
def test_nothing_is_published_by_default_or_read_only(
    fake: FakeKube, tmp_path: Path, read_only: bool
) -> None:
    publish = (
        PublishSettings(workload_admission=True, trainjob_progress=True, expected_runtime=True)
        if read_only
        else PublishSettings()
    )
    _run(fake, tmp_path, publish, read_only=read_only)
    assert not [m for m, _p in fake.requests if m == "PATCH"]
