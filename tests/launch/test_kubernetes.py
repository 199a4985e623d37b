"""Kubernetes manifests -> the training container's command, environment and the allocation
(planner.launch.kubernetes), on manifests written for these tests
(tests/data/launch/kubernetes/)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest
import yaml

from planner.errors import SpecError
from planner.launch import kubernetes
from planner.launch.data import load_data
from planner.launch.kubernetes import plan_from_manifest
from planner.launch.kubernetes_pods import command_text, expand_references
from planner.launch.kubernetes_trainjob import CATALOG_FILE, catalog_runtime
from planner.launch.shell import LaunchPlan
from planner.launch.types import Facts, Launch, LaunchFiles, MemoryFiles

DATA = Path(__file__).resolve().parents[1] / "data" / "launch" / "kubernetes"
WORK_DIR = "/jobs/run-1"


def documents(name: str) -> tuple[Mapping[str, object], ...]:
    text = (DATA / name).read_text(encoding="utf-8")
    return tuple(d for d in yaml.safe_load_all(text) if d is not None)


@dataclass
class Call:
    """One call of plan_from_command, as the manifest layer made it."""

    text: str
    source: str
    env: dict[str, str]
    cwd: str | None
    allocation: Facts


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[Call]:
    """Records what plan_from_manifest hands the shell layer (the shell is tested apart)."""
    made: list[Call] = []

    def record(
        text: str,
        *,
        source: str,
        env: Mapping[str, str],
        cwd: str | None,
        files: LaunchFiles,
        allocation: Facts | None = None,
        per_node: bool = False,
    ) -> LaunchPlan:
        assert per_node, "a pod's container runs once on every pod"
        facts = allocation if allocation is not None else Facts()
        made.append(Call(text, source, dict(env), cwd, facts))
        return LaunchPlan(allocation=facts, files=MemoryFiles(fallback=files))

    monkeypatch.setattr(kubernetes, "plan_from_command", record)
    return made


def plan(name: str) -> LaunchPlan:
    manifest = documents(name)
    launch = Launch(manifest=manifest, work_dir=WORK_DIR)
    return plan_from_manifest(manifest, source=name, launch=launch, files=MemoryFiles())


def allocation(facts: Facts) -> tuple[object, object, object]:
    return (
        facts.get("launch.num_nodes"),
        facts.get("hardware.gpus_per_node"),
        facts.get("hardware.num_gpus"),
    )


def test_pytorchjob_master_and_workers_run_the_bash_script(calls: list[Call]) -> None:
    result = plan("pytorchjob_master_worker.yaml")
    (call,) = calls
    assert allocation(result.allocation) == (4, 4, 16)
    replicas = result.allocation.values["launch.num_nodes"].source
    assert "spec.pytorchReplicaSpecs.Master.replicas (1)" in replicas
    assert "spec.pytorchReplicaSpecs.Worker.replicas (3)" in replicas
    assert call.text.startswith("set -e\ntorchrun --nnodes=$PET_NNODES")
    assert "--config /mnt/corpus/run.yaml --world $WORLD_SIZE" in call.text
    assert call.cwd == "/opt/train"
    assert call.source == "pytorchjob_master_worker.yaml: " + (
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[1]"
    )
    env = call.env
    assert env["CONFIG"] == "/mnt/corpus/run.yaml"
    assert "HF_TOKEN" not in env
    assert env["PET_NNODES"] == "4"
    assert env["PET_NPROC_PER_NODE"] == "4"
    assert env["WORLD_SIZE"] == "4"  # replicas x 1: the operator counts "auto" as 1
    assert (env["RANK"], env["PET_NODE_RANK"]) == ("0", "0")
    assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "gpt-small-master-0"
    assert env["MASTER_PORT"] == "29400"
    assert env["PYTHONUNBUFFERED"] == "1"
    assert any("HF_TOKEN" in note for note in result.allocation.notes)


def test_trainjob_resolves_a_builtin_runtime_from_the_catalog(calls: list[Call]) -> None:
    result = plan("trainjob_builtin.yaml")
    (call,) = calls
    assert allocation(result.allocation) == (1, 2, 2)
    assert call.text.startswith(
        "tune run --rdzv_endpoint=localhost:29500 full_finetune_distributed "
        "--config llama3_2/1B_full "
    )
    assert "checkpointer.checkpoint_dir=/workspace/model" in call.text
    assert call.cwd == WORK_DIR
    # Without spec.trainer the torch plugin injects no PET_* variables.
    assert not [name for name in call.env if name.startswith("PET_")]
    source = result.allocation.values["hardware.num_gpus"].source
    assert source.startswith("catalog:torchtune-llama3.2-1b (numNodes 1 x 2 GPUs per node")
    assert "llama3_2_1B.yaml@8c0f5059bd51" in source


def test_trainjob_uses_the_runtime_given_in_the_manifest(calls: list[Call]) -> None:
    result = plan("trainjob_with_runtime.yaml")
    (call,) = calls
    assert allocation(result.allocation) == (2, 4, 8)
    assert call.text == "torchrun -m team.train --steps 500"
    assert call.env["RUN_KIND"] == "ablation"
    assert call.env["PET_NNODES"] == "2"
    assert call.env["PET_NPROC_PER_NODE"] == "4"
    assert call.env["PET_MASTER_ADDR"] == "team-run-node-0-0.team-run"
    assert call.env["PET_MASTER_PORT"] == "29500"
    source = result.allocation.values["launch.num_nodes"].source
    assert "TrainingRuntime team-torch" in source
    assert source.endswith("spec.mlPolicy.numNodes")


def test_trainjob_trainer_fields_override_the_runtime(calls: list[Call]) -> None:
    result = plan("trainjob_overrides.yaml")
    (call,) = calls
    assert allocation(result.allocation) == (4, 8, 32)
    assert call.text == "torchrun --nproc_per_node=8 fit.py --epochs 2"
    assert call.env["SEED"] == "17"
    assert (call.env["PET_NNODES"], call.env["PET_NPROC_PER_NODE"]) == ("4", "8")
    assert result.allocation.values["launch.num_nodes"].source == (
        "trainjob_overrides.yaml: spec.trainer.numNodes"
    )
    assert "spec.trainer.resourcesPerNode.limits.nvidia.com/gpu (8)" in (
        result.allocation.values["hardware.gpus_per_node"].source
    )


def test_trainjob_tune_run_is_completed_as_the_controller_does(calls: list[Call]) -> None:
    result = plan("trainjob_tune_lora.yaml")
    (call,) = calls
    assert allocation(result.allocation) == (1, 4, 4)
    assert call.text == (
        "tune run --rdzv_endpoint=tune-lora-node-0-0.tune-lora:29500 "
        "lora_finetune_distributed --config llama3_2/3B_lora output_dir=/workspace/output "
        "tokenizer.path=/workspace/model/original/tokenizer.model "
        "checkpointer.checkpoint_dir=/workspace/model "
        "'model.lora_attn_modules=[q_proj,v_proj]' batch_size=2"
    )
    assert call.env["PET_NPROC_PER_NODE"] == "4"
    assert "PET_MASTER_ADDR" not in call.env


def test_jobset_trains_on_the_replicated_jobs_with_gpus(calls: list[Call]) -> None:
    result = plan("jobset.yaml")
    (call,) = calls
    assert allocation(result.allocation) == (4, 2, 8)
    assert call.text == "torchrun --nnodes=4 --nproc_per_node=2 train.py --index 0"
    assert "spec.replicatedJobs[1].replicas" in result.allocation.values["launch.num_nodes"].source
    assert "amd.com/gpu" in result.allocation.values["hardware.gpus_per_node"].source


def test_indexed_job_expands_references_as_the_kubelet_does(calls: list[Call]) -> None:
    result = plan("job_indexed.yaml")
    (call,) = calls
    assert allocation(result.allocation) == (2, 8, 16)
    assert call.text == "python -m ft.main --shard 0 --price '$(cost)'"
    assert call.env["JOB_COMPLETION_INDEX"] == "0"


def test_multi_document_manifest_finds_the_pytorchjob(calls: list[Call]) -> None:
    result = plan("multi_document.yaml")
    (call,) = calls
    assert allocation(result.allocation) == (2, 8, 16)
    assert call.text == "torchrun --nproc_per_node=8 train.py --lr 3e-4"
    assert call.source.startswith("multi_document.yaml (document 4): spec.pytorchReplicaSpecs")
    assert call.env["PET_NNODES"] == "1:8"
    assert call.env["PET_RDZV_ENDPOINT"] == "store:2379"
    assert call.env["PET_RDZV_BACKEND"] == "etcd"
    assert "WORLD_SIZE" not in call.env  # no Master: the operator sets no WORLD_SIZE
    assert any("elastic" in note for note in result.allocation.notes)


def test_unknown_kinds_give_an_empty_plan(calls: list[Call]) -> None:
    result = plan("unknown_kind.yaml")
    assert calls == []
    assert result.invocations == ()
    assert not result.allocation.values


def test_trainjob_with_an_unknown_runtime_and_no_trainer_gives_an_empty_plan(
    calls: list[Call],
) -> None:
    manifest = (
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "lost"},
            "spec": {"runtimeRef": {"name": "no-such-runtime"}},
        },
    )
    result = plan_from_manifest(
        manifest, source="job.yaml", launch=Launch(manifest=manifest), files=MemoryFiles()
    )
    assert calls == []
    assert result.invocations == ()
    assert any("no-such-runtime" in note for note in result.allocation.notes)


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("malformed_replicas.yaml", "spec.pytorchReplicaSpecs.Worker.replicas"),
        ("malformed_containers.yaml", "spec.template.spec.containers"),
        ("malformed_trainer.yaml", "spec.trainer"),
    ],
)
def test_wrong_types_raise_a_spec_error_naming_the_field(name: str, field: str) -> None:
    with pytest.raises(SpecError) as raised:
        plan(name)
    assert raised.value.field == f"{name}: {field}"
    assert "fix the manifest" in str(raised.value)


def test_documents_that_are_not_mappings_are_skipped_and_lists_are_read(
    calls: list[Call],
) -> None:
    job = documents("job_indexed.yaml")[0]
    stray: object = "a stray string"
    manifest = cast(
        "tuple[Mapping[str, object], ...]",
        (stray, {"apiVersion": "v1", "kind": "List", "items": [7, job]}),
    )
    result = plan_from_manifest(
        manifest, source="job.yaml", launch=Launch(manifest=manifest), files=MemoryFiles()
    )
    assert allocation(result.allocation) == (2, 8, 16)
    assert len(calls) == 1


def test_a_job_kind_of_another_api_group_is_not_read(calls: list[Call]) -> None:
    job = dict(documents("job_indexed.yaml")[0])
    job["apiVersion"] = "example.org/v1"
    result = plan_from_manifest(
        (job,), source="job.yaml", launch=Launch(manifest=(job,)), files=MemoryFiles()
    )
    assert calls == []
    assert result.invocations == ()


def test_the_shell_layer_receives_the_command() -> None:
    result = plan("job_indexed.yaml")
    assert [invocation.program for invocation in result.invocations] == ["ft.main"]
    assert result.invocations[0].args[:2] == ("--shard", "0")


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        (["sh", "-ec", "echo $1", "name", "a b"], "set -- 'a b'\necho $1"),
        (["/bin/bash", "-c", "torchrun train.py"], "torchrun train.py"),
        (["bash", "-l", "-c", "python x.py"], "python x.py"),
        (["bash", "run.sh", "--fast"], "bash run.sh --fast"),
        (["python", "-c", "print(1)"], "python -c 'print(1)'"),
    ],
)
def test_command_text(argv: list[str], text: str) -> None:
    assert command_text(argv) == text


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("$(A)/x", "1/x"),
        ("$$(A)", "$(A)"),
        ("$(MISSING)", "$(MISSING)"),
        ("$((1 + 2))", "$((1 + 2))"),
        ("${A} $A $", "${A} $A $"),
        ("$(A", "$(A"),
    ],
)
def test_expand_references(text: str, expanded: str) -> None:
    assert expand_references(text, {"A": "1"}) == expanded


def test_every_catalog_runtime_cites_its_source_and_reads() -> None:
    catalog = load_data(CATALOG_FILE)
    assert {"torch-distributed", "deepspeed-distributed", "torchtune-llama3.2-3b"} <= set(catalog)
    for name, entry in catalog.items():
        assert isinstance(entry, Mapping), name
        source = entry["source"]
        assert isinstance(source, Mapping), name
        assert source["repo"] == "kubeflow/trainer", name
        assert str(source["path"]).startswith("manifests/base/runtimes/"), name
        assert re.fullmatch(r"[0-9a-f]{40}", str(source["commit"])), name
        assert entry["ml_policy"] in {"torch", "mpi", "jax", "xgboost"}, name
        found = catalog_runtime(name)
        assert found is not None
    assert catalog_runtime("no-such-runtime") is None


def test_trainjob_on_an_mpi_runtime_sets_the_openmpi_slots(calls: list[Call]) -> None:
    result = plan("trainjob_deepspeed.yaml")
    (call,) = calls
    assert allocation(result.allocation) == (2, 8, 16)
    assert call.text == (
        "mpirun --hostfile /etc/mpi/hostfile python ds_train.py --deepspeed_config ds.json"
    )
    # The runtime's numProcPerNode 1 becomes the GPU count of a node.
    assert call.env["OMPI_MCA_orte_set_default_slots"] == "8"
    assert "PET_NNODES" not in call.env


def test_pytorchjob_integer_nproc_per_node_without_elastic_policy(calls: list[Call]) -> None:
    job = dict(documents("multi_document.yaml")[3])
    spec = dict(cast("Mapping[str, object]", job["spec"]))
    del spec["elasticPolicy"]
    spec["nprocPerNode"] = 2
    job["spec"] = spec
    result = plan_from_manifest(
        (job,), source="job.yaml", launch=Launch(manifest=(job,)), files=MemoryFiles()
    )
    (call,) = calls
    assert allocation(result.allocation) == (2, 8, 16)
    assert (call.env["PET_NPROC_PER_NODE"], call.env["PET_NNODES"]) == ("2", "2")
    assert call.source == "job.yaml: spec.pytorchReplicaSpecs.Worker.template.spec.containers[0]"
    assert not result.allocation.notes


def test_args_without_a_command_are_read_as_the_command_line(calls: list[Call]) -> None:
    job = dict(documents("job_indexed.yaml")[0])
    job["spec"] = {
        "template": {"spec": {"containers": [{"name": "main", "args": ["python", "t.py"]}]}}
    }
    result = plan_from_manifest(
        (job,), source="job.yaml", launch=Launch(manifest=(job,)), files=MemoryFiles()
    )
    (call,) = calls
    assert call.text == "python t.py"
    assert allocation(result.allocation) == (1, None, None)
    assert any("entrypoint" in note for note in result.allocation.notes)
