"""Pure translators on the constructed cluster (tests/data/kubernetes/cluster.yaml)."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.kubernetes.translate import (
    JobContext,
    description_fields,
    gpus_in,
    job_state,
    node_state,
    node_topology,
    parse_quantity,
    parse_time,
    pods_of_job,
    trainer_progress,
)
from planner.service.describe import describe_job
from planner.specs.job import JobStatus
from tests.adapters.kubernetes.conftest import find


@pytest.mark.parametrize(
    ("text", "value"),
    [("8", 8.0), (8, 8.0), ("500m", 0.5), ("16Gi", 16 * 2.0**30), ("1e3", 1000.0), ("2k", 2000.0)],
)
def test_parse_quantity(text: object, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize(
    "text", ["", "abc", "8 GPUs", None, True, [], "5Zi", "NaN", "Infinity", "8ki"]
)
def test_parse_quantity_rejects_garbage(text: object) -> None:
    assert parse_quantity(text) is None


def test_parse_time() -> None:
    assert parse_time("2026-11-20T08:00:00Z") == pytest.approx(1_795_161_600.0)
    assert parse_time("2026-11-20T08:00:00.123456Z") == pytest.approx(1_795_161_600.123456)
    assert parse_time("yesterday") is None
    assert parse_time("2026-11-20T08:00:00") is None  # no zone: not RFC 3339


def test_gpus_in_counts_nvidia_and_amd() -> None:
    assert gpus_in({"nvidia.com/gpu": "8", "cpu": "4"}) == 8
    assert gpus_in({"amd.com/gpu": 4}) == 4
    assert gpus_in({"nvidia.com/gpu": "lots"}) == 0


def test_nodes(cluster: list[dict[str, Any]]) -> None:
    pods = [o for o in cluster if o["kind"] == "Pod"]
    h100 = node_state(find(cluster, "Node", "gpu-h100-0"), pods)
    assert (h100.state, h100.num_gpus, h100.num_gpus_allocated) == ("ready", 8, 8)
    assert h100.gpu_type == "NVIDIA-H100-80GB-HBM3"
    assert h100.num_cpus == 207
    assert h100.partitions == ("h100-pool",)
    amd = node_state(find(cluster, "Node", "gpu-mi300x-0"), pods)
    assert (amd.state, amd.num_gpus, amd.gpu_type) == (
        "not-ready+cordoned",
        8,
        "AMD_Instinct_MI300X_OAM",
    )
    odd = node_state(find(cluster, "Node", "gpu-odd-0"), pods)
    assert (odd.state, odd.num_gpus, odd.num_gpus_allocated) == ("unknown", 4, 4)
    assert odd.gpu_type == "NVIDIA-Future-GPU-999GB"
    assert node_topology(find(cluster, "Node", "gpu-h100-0")) == {
        "topology.kubernetes.io/zone": "us-east-1a",
        "network.topology.nvidia.com/block": "block-3",
        "network.topology.nvidia.com/spine": "spine-1",
    }


def _context(
    cluster: list[dict[str, Any]], kind: str, obj: dict[str, Any], workload: str | None
) -> JobContext:
    pods = [o for o in cluster if o["kind"] == "Pod"]
    return JobContext(
        pods=pods_of_job(kind, obj, pods),
        workload=find(cluster, "Workload", workload) if workload else None,
        local_queues={("team-a", "team-a-queue"): "gpu-cq", ("team-b", "team-b-queue"): "gpu-cq"},
        queue_positions={("team-a", "pytorchjob-gpt-13b-8c1d2"): 0},
        node_products={
            "gpu-h100-0": "NVIDIA-H100-80GB-HBM3",
            "gpu-h100-1": "NVIDIA-H100-80GB-HBM3",
            "gpu-odd-0": "NVIDIA-Future-GPU-999GB",
        },
        flavor_products={"h100": "NVIDIA-H100-80GB-HBM3"},
    )


def test_running_jobset(cluster: list[dict[str, Any]]) -> None:
    obj = find(cluster, "JobSet", "llama-70b")
    job = job_state(
        "jobset", obj, _context(cluster, "jobset", obj, "jobset-llama-70b-3f2a1"), cluster="k"
    )
    assert job.job_id == "team-a/jobset/llama-70b"
    assert (job.status, job.num_gpus, job.gpus_allocated, job.num_nodes) == (
        JobStatus.RUNNING,
        16,
        True,
        2,
    )
    assert job.node_list == ("gpu-h100-0", "gpu-h100-1")
    assert job.gpu_type == "NVIDIA-H100-80GB-HBM3"
    assert (job.queue_name, job.partition, job.account, job.namespace) == (
        "team-a-queue",
        "gpu-cq",
        "team-a",
        "team-a",
    )
    assert job.submit_time_s == parse_time("2026-11-20T08:00:00Z")
    assert job.start_time_s == parse_time("2026-11-20T08:00:04Z")  # Admitted
    assert job.command is not None
    assert "--num-layers 80" in job.command


def test_megatron_args_in_the_command_describe_the_job(cluster: list[dict[str, Any]]) -> None:
    obj = find(cluster, "JobSet", "llama-70b")
    job = job_state(
        "jobset", obj, _context(cluster, "jobset", obj, "jobset-llama-70b-3f2a1"), cluster="k"
    )
    description = describe_job(job, lambda path: "")
    assert description.described_by == "megatron"
    assert description.document is not None
    assert description.document["model"]["num_layers"] == 80
    assert description.document["hardware"]["num_gpus"] == 16


def test_pending_pytorchjob_with_inline_scenario(cluster: list[dict[str, Any]]) -> None:
    obj = find(cluster, "PyTorchJob", "gpt-13b")
    job = job_state(
        "pytorchjob",
        obj,
        _context(cluster, "pytorchjob", obj, "pytorchjob-gpt-13b-8c1d2"),
        cluster="k",
    )
    assert (job.status, job.state_reason) == (JobStatus.PENDING, "Pending")
    assert (job.num_gpus, job.gpus_allocated, job.num_nodes) == (16, False, 2)
    assert job.start_time_s is None
    assert job.node_list == ()
    assert job.queue_position == 0
    assert job.time_limit_s == 172800
    assert job.gpu_type is None  # not admitted: no flavor yet, no node selector
    comment, _cmd, _script, inline = description_fields("pytorchjob", obj, None)
    (path,) = inline
    assert comment == f"planner:scenario={path}"
    assert path.startswith("k8s-annotation:team-a/pytorchjob/gpt-13b@")
    description = describe_job(job, lambda p: inline[p])
    assert description.described_by == "scenario_file"
    assert description.document is not None
    assert description.document["training"]["train_iters"] == 5000


def test_trainjob_progress_and_eta(cluster: list[dict[str, Any]]) -> None:
    obj = find(cluster, "TrainJob", "mixtral")
    job = job_state(
        "trainjob", obj, _context(cluster, "trainjob", obj, "trainjob-mixtral-77aa1"), cluster="k"
    )
    assert job.job_id == "team-b/trainjob/mixtral"
    assert (job.status, job.num_gpus, job.node_list) == (JobStatus.RUNNING, 4, ("gpu-odd-0",))
    assert job.gpu_type == "NVIDIA-Future-GPU-999GB"  # unknown product: reported as is
    assert job.progress_ratio == pytest.approx(0.42)
    assert job.reported_remaining_s == 16200
    assert job.progress_updated_s == parse_time("2026-11-20T10:00:00Z")
    assert job.time_limit_s == 259200
    assert job.command == "torchrun train_mixtral.py --config /configs/mixtral-8x7b.yaml"
    progress = trainer_progress(obj)
    assert progress is not None
    assert ("loss", "1.873") in progress.metrics
    assert describe_job(job, lambda p: "").described_by == "none"


def test_completed_batch_job(cluster: list[dict[str, Any]]) -> None:
    obj = find(cluster, "Job", "eval-7b")
    job = job_state("job", obj, _context(cluster, "job", obj, None), cluster="k")
    assert (job.status, job.num_gpus) == (JobStatus.COMPLETED, 1)
    assert job.end_time_s == parse_time("2026-11-20T02:00:00Z")
    assert job.start_time_s == parse_time("2026-11-20T01:00:05Z")


def test_failed_deadline_is_timeout(cluster: list[dict[str, Any]]) -> None:
    obj = find(cluster, "Job", "eval-7b")
    obj["status"]["conditions"] = [
        {
            "type": "Failed",
            "status": "True",
            "reason": "DeadlineExceeded",
            "lastTransitionTime": "2026-11-20T03:00:00Z",
        }
    ]
    job = job_state("job", obj, JobContext(), cluster="k")
    assert (job.status, job.state_reason) == (JobStatus.TIMEOUT, "DeadlineExceeded")


def test_deactivated_workload_is_suspended(cluster: list[dict[str, Any]]) -> None:
    obj = find(cluster, "PyTorchJob", "gpt-13b")
    workload = find(cluster, "Workload", "pytorchjob-gpt-13b-8c1d2")
    workload["spec"]["active"] = False
    job = job_state("pytorchjob", obj, JobContext(workload=workload), cluster="k")
    assert (job.status, job.state_reason) == (JobStatus.SUSPENDED, "WorkloadDeactivated")


@pytest.mark.parametrize(
    "obj",
    [
        {},
        {"metadata": None, "spec": None, "status": None},
        {
            "metadata": {"name": "x", "namespace": "n", "creationTimestamp": 5},
            "spec": {"replicatedJobs": [None, 3, {"replicas": "two"}]},
        },
        {
            "metadata": {"name": "x", "annotations": {"planner.llm/scenario": 7}},
            "status": {"conditions": "no", "trainerStatus": {"progressPercentage": "half"}},
        },
        {
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {
                        "template": {
                            "spec": {
                                "containers": [{"resources": {"limits": {"nvidia.com/gpu": "x"}}}]
                            }
                        }
                    }
                }
            }
        },
    ],
)
@pytest.mark.parametrize("kind", ["job", "jobset", "pytorchjob", "trainjob"])
def test_odd_objects_never_crash(kind: str, obj: dict[str, Any]) -> None:
    job = job_state(
        kind,
        obj,
        JobContext(pods=[{}, {"spec": None}], workload={"status": {"conditions": [None]}}),
        cluster="k",
    )
    assert job.scheduler == "kubernetes"
    node = node_state(obj, [obj])
    assert node.num_gpus == 0


def _env_pytorchjob() -> dict[str, Any]:
    """A PyTorchJob whose Megatron-LM arguments come from its container's ``env`` through
    ``$(VAR)`` references, and whose node count only the operator's ``PET_NNODES`` tells."""
    container = {
        "name": "pytorch",
        "image": "nvcr.io/nvidia/pytorch:25.01-py3",
        "command": ["torchrun", "--nproc_per_node=8", "pretrain_gpt.py"],
        "args": [
            "--num-layers=$(NUM_LAYERS)",
            "--hidden-size=$(HIDDEN)",
            "--num-attention-heads=32",
            "--seq-length=4096",
            "--max-position-embeddings=4096",
            "--micro-batch-size=1",
            "--global-batch-size=$(GBS)",
            "--tensor-model-parallel-size=8",
            "--train-iters=5000",
            "--bf16",
        ],
        "env": [
            {"name": "NUM_LAYERS", "value": "40"},
            {"name": "HIDDEN", "value": "5120"},
            {"name": "GBS", "value": "512"},
        ],
        "resources": {"limits": {"nvidia.com/gpu": 8}},
    }
    template = {"spec": {"containers": [container]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "gpt-env", "namespace": "team-a", "resourceVersion": "7"},
        "spec": {
            "runPolicy": {"suspend": False},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template},
                "Worker": {"replicas": 3, "template": template},
            },
        },
        "status": {"conditions": [{"type": "Running", "status": "True"}]},
    }


def test_container_env_reaches_the_launch_readers() -> None:
    obj = _env_pytorchjob()
    job = job_state("pytorchjob", obj, JobContext(), cluster="k")
    assert job.launch_manifest is not None
    assert "resourceVersion" not in job.launch_manifest
    assert "suspend" not in job.launch_manifest
    description = describe_job(job, lambda path: "")
    assert description.described_by == "megatron"
    assert description.document is not None
    assert description.document["model"]["num_layers"] == 40
    assert description.document["model"]["hidden_size"] == 5120
    assert description.document["parallelism"]["global_batch_size"] == 512
    assert description.document["hardware"]["num_gpus"] == 32  # 4 pods x 8 (PET_NNODES)


def test_a_huge_object_is_not_kept_as_the_launch() -> None:
    obj = _env_pytorchjob()
    obj["metadata"]["annotations"] = {"x": "y"}
    obj["spec"]["padding"] = "x" * (300 * 1024)
    job = job_state("pytorchjob", obj, JobContext(), cluster="k")
    assert job.launch_manifest is None
    assert job.command is not None  # the command line still describes what it can
