"""The service with Kubernetes on: the real client against the fake API server (tests/k8s_fake.py).

Informers, leader election, ingest of JobSet/PyTorchJob/TrainJob jobs, the AdmissionCheck state
written on a pending Workload, hint annotations, and the informer metrics.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from planner.service.settings import (
    AdmissionCheckSettings,
)
from tests.adapters.kubernetes.test_admission import _pending_workload
from tests.k8s_fake import FakeKube
from tests.service.kube_app import cluster_server, kube_app, wait


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with cluster_server() as server:
        yield server


def test_kubernetes_jobs_admission_check_and_hints(fake: FakeKube, tmp_path: Path) -> None:
    _pending_workload(fake)
    app = kube_app(
        fake,
        tmp_path / "p.db",
        kube={
            "hint_annotations": True,
            "admission_check": AdmissionCheckSettings(enabled=True),
        },
    )
    state = app.state.planner
    with TestClient(app) as client:
        wait("informer caches", lambda: state.kube.source.wait_synced(0.1))
        wait("leadership", lambda: state.kube.is_leader)
        state.run_cycle()

        jobs = {j["job_id"]: j for j in client.get("/v1/jobs").json()["jobs"]}
        assert "team-a/pytorchjob/gpt-13b" in jobs
        pytorchjob = client.get("/v1/jobs/team-a/pytorchjob/gpt-13b").json()
        assert pytorchjob["scheduler"] == "kubernetes"
        assert pytorchjob["cluster"] == "k8s-test"
        assert pytorchjob["described_by"] == "scenario_file"  # the inline annotation
        assert pytorchjob["prediction"]["iteration_time_s"] > 0
        assert client.get("/readyz").json()["leader"] is True
        trainjob = client.get("/v1/jobs/team-b/trainjob/mixtral").json()
        assert trainjob["scheduler_reported"]["progress_ratio"] == 0.42  # trainerStatus

        workload = fake.get("kueue.x-k8s.io", "workloads", "pytorchjob-gpt-13b-8c1d2", "team-a")
        assert workload is not None
        checks = {c["name"]: c for c in workload["status"]["admissionChecks"]}
        assert checks["llm-planner"]["state"] == "Ready"
        assert checks["llm-planner"]["message"].startswith("llm-capacity-planner: predicted")
        assert checks["provisioning"]["state"] == "Pending"  # another controller's entry

        job = fake.get("kubeflow.org", "pytorchjobs", "gpt-13b", "team-a")
        assert job is not None
        annotations = job["metadata"]["annotations"]
        assert int(annotations["planner.llm/predicted-runtime-seconds"]) > 0
        assert "planner.llm/scenario" in annotations  # the user's annotation is kept

        metrics = client.get("/metrics").text
        assert 'planner_kubernetes_watch_events_total{resource="workloads"}' in metrics
        assert 'planner_kubernetes_cache_synced{resource="pods"} 1.0' in metrics


def test_a_replica_that_is_not_the_leader_only_serves(fake: FakeKube, tmp_path: Path) -> None:
    fake.put(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "llm-capacity-planner", "namespace": "default"},
            "spec": {
                "holderIdentity": "replica-a",
                "leaseDurationSeconds": 3600,
                "acquireTime": "2026-11-21T00:00:00.000000Z",
                "renewTime": "2099-01-01T00:00:00.000000Z",
                "leaseTransitions": 0,
            },
        }
    )
    app = kube_app(fake, tmp_path / "p.db", kube={"cluster": "kubernetes", "identity": "replica-b"})
    state = app.state.planner
    with TestClient(app) as client:
        wait("informer caches", lambda: state.kube.source.wait_synced(0.1))
        time.sleep(0.3)
        assert state.kube.is_leader is False
        state.run_cycle()  # skipped: not the leader
        assert client.get("/v1/jobs").json()["jobs"] == []
        ready = client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["leader"] is False
