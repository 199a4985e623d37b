"""``KubernetesSource`` end to end: the official client, informers, the fake API server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.kubernetes.client import Resource
from adapters.kubernetes.source import DEFAULT_RESOURCES, KubernetesSource
from planner.errors import SourcePermanentError, SourceTemporaryError
from planner.ports import SchedulerSource
from planner.service.describe import describe_job
from planner.specs.job import JobStatus
from tests.adapters.kubernetes.conftest import find, load_cluster
from tests.adapters.test_job_files import SECRET, refused
from tests.k8s_fake import FakeKube, Fault, wait_for


@pytest.fixture
def source(loaded_fake: FakeKube) -> Iterator[KubernetesSource]:
    src = KubernetesSource(
        loaded_fake.api_client(),
        cluster="fake",
        watch_timeout_s=1,
        backoff_initial_s=0.02,
        backoff_max_s=0.2,
        request_timeout_s=2.0,
    )
    src.start()
    assert src.wait_synced(10.0)
    yield src
    src.stop(2.0)


def test_is_a_scheduler_source(source: KubernetesSource) -> None:
    typed: SchedulerSource = source  # mypy checks the protocol
    assert typed.scheduler == "kubernetes"


def test_snapshot_of_the_cluster(source: KubernetesSource) -> None:
    snap = source.snapshot()
    assert (snap.scheduler, snap.cluster, snap.warnings) == ("kubernetes", "fake", ())
    jobs = {j.job_id: j for j in snap.jobs}
    assert sorted(jobs) == [
        "team-a/jobset/llama-70b",
        "team-a/pytorchjob/gpt-13b",
        "team-b/job/eval-7b",
        "team-b/trainjob/mixtral",
    ]  # the JobSet's Job and the TrainJob's JobSet are not jobs of their own
    assert jobs["team-a/jobset/llama-70b"].status is JobStatus.RUNNING
    pending = jobs["team-a/pytorchjob/gpt-13b"]
    assert pending.status is JobStatus.PENDING
    assert pending.queue_position == 0
    assert jobs["team-b/trainjob/mixtral"].reported_remaining_s == 16200
    nodes = {n.name: n for n in snap.nodes}
    assert nodes["gpu-h100-0"].num_gpus_allocated == 8
    assert source.node_topology()["gpu-h100-0"]["network.topology.nvidia.com/block"] == "block-3"


def test_inline_scenario_is_read_back(source: KubernetesSource) -> None:
    snap = source.snapshot()
    job = next(j for j in snap.jobs if j.job_id == "team-a/pytorchjob/gpt-13b")
    description = describe_job(job, lambda path: source.read_text_file(path, 65536))
    assert description.described_by == "scenario_file"
    assert description.error is None


def test_changes_show_up_in_the_next_snapshot(
    loaded_fake: FakeKube, source: KubernetesSource
) -> None:
    workload = find(load_cluster(), "Workload", "pytorchjob-gpt-13b-8c1d2")
    workload["status"]["conditions"] = [
        {
            "type": "Finished",
            "status": "True",
            "reason": "Succeeded",
            "message": "done",
            "lastTransitionTime": "2026-11-21T00:00:00Z",
        }
    ]
    loaded_fake.put(workload)

    def finished() -> bool:
        jobs = {j.job_id: j for j in source.snapshot().jobs}
        return jobs["team-a/pytorchjob/gpt-13b"].status is JobStatus.COMPLETED

    assert wait_for(finished)


def test_snapshot_before_sync_is_temporary(fake: FakeKube) -> None:
    fake.faults.append(Fault(status=500, path="/api/v1/nodes", times=1000))
    src = KubernetesSource(
        fake.api_client(), watch_timeout_s=1, backoff_initial_s=0.05, backoff_max_s=0.1
    )
    src.start()
    try:
        with pytest.raises(SourceTemporaryError, match="nodes"):
            src.snapshot()
    finally:
        src.stop(2.0)


def test_missing_crds_become_warnings(fake: FakeKube) -> None:
    for obj in load_cluster():
        if obj["apiVersion"] in ("v1", "batch/v1"):
            fake.put(obj)
    not_installed = Resource("volcano", "batch.volcano.sh", "v1alpha1", "jobs", "Job", True)
    src = KubernetesSource(
        fake.api_client(),
        resources=(*DEFAULT_RESOURCES, not_installed),
        watch_timeout_s=1,
        backoff_initial_s=0.02,
        backoff_max_s=0.1,
    )
    src.start()
    try:
        assert src.wait_synced(10.0)
        snap = src.snapshot()
    finally:
        src.stop(2.0)
    assert [j.job_id for j in snap.jobs] == ["team-b/job/eval-7b"]
    assert len(snap.warnings) == 1
    assert snap.warnings[0].startswith("volcano: not available (not installed")
    assert src.stats()["volcano"].installed is False


def test_read_text_file_paths(open_dir: Path, fake: FakeKube) -> None:
    allowed = open_dir / "scenarios"
    allowed.mkdir(mode=0o755)
    (allowed / "a.yaml").write_text("model: {preset: gpt3-13b}\n")
    (allowed / "a.yaml").chmod(0o644)
    (open_dir / "secret.yaml").write_text("x: 1\n")
    (open_dir / "secret.yaml").chmod(0o644)
    src = KubernetesSource(fake.api_client(), allowed_file_roots=[str(allowed)])
    assert src.read_text_file(str(allowed / "a.yaml"), 1000).startswith("model")
    with pytest.raises(SourcePermanentError, match="outside"):
        src.read_text_file(str(open_dir / "secret.yaml"), 1000)
    with pytest.raises(SourcePermanentError, match="limit"):
        src.read_text_file(str(allowed / "a.yaml"), 5)
    with pytest.raises(SourcePermanentError, match="disabled"):
        src.read_text_file("k8s-configmap:team-a/cm/key", 1000)
    with pytest.raises(SourcePermanentError, match="gone"):
        src.read_text_file("k8s-annotation:team-a/jobset/x@123", 1000)


def test_configmap_scenario(fake: FakeKube) -> None:
    fake.put(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "scen", "namespace": "team-a"},
            "data": {"job.yaml": "model: {preset: gpt3-13b}\n"},
        }
    )
    src = KubernetesSource(fake.api_client(), allow_configmap_scenarios=True)
    assert "gpt3-13b" in src.read_text_file("k8s-configmap:team-a/scen/job.yaml", 1000)
    with pytest.raises(SourcePermanentError, match="no key"):
        src.read_text_file("k8s-configmap:team-a/scen/other.yaml", 1000)


def test_kubernetes_reads_only_world_readable_files_under_listed_mounts(
    open_dir: Path, fake: FakeKube
) -> None:
    mount = open_dir / "mnt"
    mount.mkdir(mode=0o755)
    (mount / "ok.yaml").write_text("model: {preset: llama3-8b}\n")
    (mount / "ok.yaml").chmod(0o644)
    (mount / "private.yaml").write_text(SECRET)
    (mount / "private.yaml").chmod(0o600)
    (mount / "passwd.yaml").symlink_to("/etc/passwd")
    default = KubernetesSource(fake.api_client())
    with pytest.raises(SourcePermanentError) as exc:
        default.read_text_file(str(mount / "ok.yaml"), 1000)
    assert "no directory is allowed" in refused(exc)
    src = KubernetesSource(fake.api_client(), allowed_file_roots=[str(mount)])
    assert src.read_text_file(str(mount / "ok.yaml"), 1000).startswith("model")
    with pytest.raises(SourcePermanentError) as exc:
        src.read_text_file(str(mount / "private.yaml"), 1000)
    assert "not readable by user (no host user)" in refused(exc, SECRET)
    for path in ("/etc/passwd", str(mount / "passwd.yaml")):
        with pytest.raises(SourcePermanentError) as exc:
            src.read_text_file(path, 1000)
        assert "outside the allowed directories" in refused(exc, "root:")
