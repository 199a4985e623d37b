"""The LLM Foundry reader: composer's world size, ``${...}`` interpolation with overrides, MPT
shapes, batch and accumulation, durations, precision and FSDP sharding."""

from __future__ import annotations

import pytest

from planner.errors import PlannerError
from planner.launch.configs import load_config
from planner.launch.readers.foundry import READER
from planner.launch.readers.foundry_yaml import FoundryConfig
from planner.launch.types import Facts, Invocation
from tests.launch import reader_support as support

JOB = "/jobs/foundry"


def _read(invocation: Invocation, *, per_node: int = 8, nodes: int = 1) -> Facts:
    given = support.allocation(per_node * nodes, nodes, per_node)
    facts = support.read(READER, invocation, support.data_files("foundry", JOB), given=given)
    return support.finished(facts)


def _composer(*args: str, env: dict[str, str] | None = None, **options: str) -> Invocation:
    return Invocation(
        program="train.py",
        args=args,
        env=env or {},
        cwd=JOB,
        launcher="composer",
        launcher_args=options,
    )


def test_recognises_composer_and_the_foundry_train_script() -> None:
    assert READER.recognises(_composer("yamls/mpt_gqa.yaml"))
    assert READER.recognises(Invocation(program="composer", args=("-n", "8", "train.py", "a.yaml")))
    assert READER.recognises(
        Invocation(program="scripts/train/train.py", args=("a.yaml",), launcher="python")
    )
    assert not READER.recognises(Invocation(program="train.py", args=("conf.yaml",)))
    assert not READER.recognises(Invocation(program="composer", args=("--version",)))


def test_mpt_shape_interpolation_and_hybrid_shard() -> None:
    facts = _read(_composer("yamls/mpt_gqa.yaml", world_size="32"), nodes=4)
    assert facts.get("model.hidden_size") == 3072
    assert facts.get("model.ffn_hidden_size") == 10752
    assert facts.get("model.num_query_groups") == 8
    assert facts.get("model.activation") == "swiglu"
    assert facts.get("model.untie_embeddings") is False
    assert facts.get("model.seq_length") == 4096
    assert facts.values["model.seq_length"].source == "mpt_gqa.yaml:2 (${variables.seq})"
    assert facts.get("hardware.num_gpus") == 32
    assert facts.get("launch.num_nodes") == 4
    assert facts.get("launch.gradient_accumulation") == 1
    assert facts.get("parallelism.micro_batch_size") == 16
    assert facts.get("parallelism.global_batch_size") == 512
    assert facts.get("training.train_iters") == 10000
    assert facts.get("parallelism.precision") == "fp8"
    assert facts.get("parallelism.zero_stage") == 3
    assert facts.get("launch.fsdp_shard") == 8


def test_a_cli_override_of_a_variable_reaches_every_reference() -> None:
    invocation = _composer(
        "yamls/mpt_gqa.yaml", "variables.seq=8192", "global_train_batch_size=1024"
    )
    facts = _read(invocation)
    assert facts.get("model.seq_length") == 8192
    assert facts.values["model.seq_length"].source.startswith("override: variables.seq=8192")
    assert facts.get("launch.gradient_accumulation") == 1024 // 8 // 16


def test_world_size_from_the_environment_and_microbatch_capped() -> None:
    facts = _read(_composer("yamls/ddp_epochs.yaml", env={"WORLD_SIZE": "16"}), nodes=2)
    assert facts.get("hardware.num_gpus") == 16
    assert facts.get("launch.num_nodes") == 2
    assert facts.get("parallelism.micro_batch_size") == 2
    assert facts.get("launch.gradient_accumulation") == 1
    assert facts.get("parallelism.zero_stage") == 0
    assert not facts.has("launch.fsdp_shard")
    assert not facts.has("training.train_iters")
    assert not facts.has("parallelism.precision")
    assert facts.get("model.num_layers") == 4
    assert facts.get("model.hidden_size") == 2048
    assert "model.hidden_size" in facts.assumed
    assert "mosaicml/llm-foundry" in facts.values["model.hidden_size"].source


def test_composer_nproc_option_and_local_model_with_lora() -> None:
    invocation = Invocation(
        program="composer", args=("-n", "4", "train.py", "yamls/hf_lora_tokens.yaml"), cwd=JOB
    )
    facts = _read(invocation)
    assert facts.get("hardware.num_gpus") == 4
    assert facts.get("model.num_layers") == 12
    assert facts.get("model.seq_length") == 2048
    assert facts.get("training.mode") == "lora"
    assert facts.get("training.lora_rank") == 32
    assert facts.get("training.total_tokens") == 2e9
    assert facts.get("parallelism.micro_batch_size") == 24
    assert "parallelism.micro_batch_size" in facts.assumed
    assert facts.get("launch.gradient_accumulation") == 1
    assert facts.get("parallelism.precision") == "bf16"
    assert "parallelism.precision" in facts.assumed
    assert facts.get("launch.fsdp_shard") == 4


def test_a_python_launch_runs_one_process_without_fsdp() -> None:
    invocation = Invocation(
        program="scripts/train/train.py",
        args=("yamls/hf_lora_tokens.yaml",),
        cwd=JOB,
        launcher="python",
    )
    facts = _read(invocation)
    assert facts.get("hardware.num_gpus") == 1
    assert facts.get("parallelism.zero_stage") == 0
    assert not facts.has("launch.fsdp_shard")
    assert facts.get("parallelism.micro_batch_size") == 96
    assert facts.get("launch.gradient_accumulation") == 1


def test_interpolation_that_cannot_be_resolved_reads_as_none() -> None:
    tree = load_config(
        "a: ${oc.env:HOME}\nb: ${missing.key}\nc: x-${d}\nd: 3\ne: ${e}\n", "/j/t.yaml"
    )
    config = FoundryConfig(tree, {})
    assert config.value("a") is None
    assert config.value("b") is None
    assert config.value("c") == "x-3"
    with pytest.raises(PlannerError, match="nest too deep"):
        config.value("e")


def test_a_missing_yaml_is_a_planner_error() -> None:
    with pytest.raises(PlannerError, match=r"nope\.yaml"):
        _read(_composer("yamls/nope.yaml"))
