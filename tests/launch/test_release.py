"""The framework's release of a launch: the NeMo Framework container's tag, read from a
Kubernetes container's image or pyxis' ``srun --container-image``, becomes the scenario's
``training.framework_version`` (what the observed-runs calibration keys runs by)."""

from __future__ import annotations

import pytest

from planner.launch.describe import describe_launch
from planner.launch.release import nemo_container_release, release_at_least
from planner.launch.types import Launch, MemoryFiles
from planner.scenario import parse_scenario

COMMAND = (
    'nemo llm pretrain -y --factory "llama3_8b(num_nodes=2)" '
    "trainer.strategy.tensor_model_parallel_size=4 data.global_batch_size=256 "
    "data.seq_length=4096"
)


@pytest.mark.parametrize(
    ("image", "release"),
    [
        ("nvcr.io/nvidia/nemo:25.11", "25.11"),
        ("nvcr.io#nvidia/nemo:26.06.01", "26.06.01"),
        ("$oauthtoken@nvcr.io#nvidia/nemo:25.09", "25.09"),
        ("registry.local:5000/nvidia/nemo:25.11@sha256:0123abcd", "25.11"),
        ("nvcr.io/nvidia/nemo@sha256:0123abcd", None),
        ("nvcr.io/nvidia/nemo:latest", None),
        ("nvcr.io/nvidia/pytorch:25.11-py3", None),
        ("example.org/nvidia/nemo-rl:25.11", None),
        ("/lustre/images/nemo_25.11.sqsh", None),
    ],
)
def test_the_release_is_the_nemo_containers_tag(image: str, release: str | None) -> None:
    assert nemo_container_release(image) == release


def test_srun_container_image_gives_the_release() -> None:
    script = (
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\n"
        f"srun --container-image=nvcr.io#nvidia/nemo:25.11 {COMMAND}\n"
    )
    description = describe_launch(
        Launch(batch_script=script, work_dir="/job"), MemoryFiles(), gpu="h100-sxm", predict=False
    )
    assert description.described_by == "nemo2"
    assert description.scenario["training"]["framework_version"] == "25.11"
    assert "srun --container-image" in description.provenance["training.framework_version"]
    assert parse_scenario(description.scenario).training.framework_version == "25.11"


def _pytorchjob(image: str) -> dict[str, object]:
    container = {
        "name": "pytorch",
        "image": image,
        "command": ["bash", "-c", COMMAND],
        "resources": {"limits": {"nvidia.com/gpu": 8}},
    }
    spec = {"replicas": 2, "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "nemo"},
        "spec": {"pytorchReplicaSpecs": {"Worker": spec}},
    }


def test_a_pod_templates_image_gives_the_release_and_another_image_none() -> None:
    def described(image: str) -> object:
        launch = Launch(manifest=(_pytorchjob(image),), work_dir="/job")
        out = describe_launch(launch, MemoryFiles(), gpu="h100-sxm", predict=False)
        assert out.described_by == "nemo2"
        return parse_scenario(out.scenario).training.framework_version

    assert described("nvcr.io/nvidia/nemo:25.09") == "25.09"
    assert described("example.org/trainer:2.4") is None


@pytest.mark.parametrize(
    ("release", "first", "expected"),
    [
        ("26.06", "26.06", True),
        ("26.06.01", "26.06", True),
        ("26.04", "26.06", False),
        ("25.11", "26.06", False),
        ("27.01", "26.06", True),
        ("26.06-rc1", "26.06.01", False),
    ],
)
def test_a_release_is_at_least_another_by_year_month_and_patch(
    release: str, first: str, expected: bool
) -> None:
    assert release_at_least(release, first) is expected
