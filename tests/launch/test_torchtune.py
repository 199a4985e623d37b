"""The torchtune reader: tune run's torchrun options, built-in config names (in-tree file or
catalog), key=value overrides, model builders and LoRA defaults, the FSDP2/TP layout."""

from __future__ import annotations

import pytest

from planner.errors import SourceError
from planner.launch.data import load_data
from planner.launch.readers.torchtune import READER
from planner.launch.readers.torchtune_config import parse_tune_run
from planner.launch.types import Facts, Invocation
from tests.launch import reader_support as support

JOB = "/jobs/tune"


def _read(
    command: str,
    *,
    env: dict[str, str] | None = None,
    program: str = "tune",
    launcher: str = "",
    launcher_args: dict[str, str] | None = None,
    allocation: Facts | None = None,
) -> Facts:
    return support.read_program(
        READER,
        "torchtune",
        JOB,
        program,
        *command.split(),
        env=env,
        launcher=launcher,
        launcher_args=launcher_args,
        allocation=allocation,
        pattern="*.yaml",
    )


def test_parse_tune_run_splits_torchrun_options_recipe_and_overrides() -> None:
    command = (
        "run --nnodes 2 --nproc-per-node=8 --standalone --rdzv_endpoint h:29500 "
        "full_finetune_distributed --config llama3_1/8B_full batch_size=4 ~compile"
    )
    run = parse_tune_run(command.split())
    assert run is not None
    assert dict(run.options) == {
        "nnodes": "2",
        "nproc_per_node": "8",
        "standalone": "",
        "rdzv_endpoint": "h:29500",
    }
    assert run.recipe == "full_finetune_distributed"
    assert run.config == "llama3_1/8B_full"
    assert run.overrides == ("batch_size=4", "~compile")
    assert parse_tune_run(["run", "--nproc_per_node", "2"]) is None


def test_recognises_tune_run_and_recipe_scripts() -> None:
    def inv(program: str, *args: str) -> Invocation:
        return Invocation(program=program, args=args)

    assert READER.recognises(inv("tune", "run", "lora_finetune_single_device", "--config", "x"))
    assert READER.recognises(inv("/usr/bin/tune", "run", "x.py", "--config", "c.yaml"))
    assert not READER.recognises(inv("tune", "download", "meta-llama/Llama-3.1-8B"))
    assert READER.recognises(inv("recipes/full_finetune_distributed.py", "--config", "c.yaml"))
    assert not READER.recognises(inv("train.py", "--config", "c.yaml"))


def test_built_in_name_resolves_through_the_catalog() -> None:
    facts = _read("run --nproc_per_node 4 full_finetune_distributed --config llama3_1/8B_full")
    expected = {
        "model.num_layers": 32,
        "model.hidden_size": 4096,
        "model.num_query_groups": 8,
        "model.ffn_hidden_size": 14336,
        "model.vocab_size": 128256,
        "hardware.num_gpus": 4,
        "parallelism.tensor_parallel": 1,
        "parallelism.data_parallel": 4,
        "launch.fsdp_shard": 4,
        "parallelism.micro_batch_size": 2,
        "launch.gradient_accumulation": 1,
        "parallelism.global_batch_size": 8,
        "parallelism.precision": "bf16",
        "parallelism.zero_stage": 3,
        "parallelism.recompute": "full",
        "training.mode": "sft",
        "launch.recipe": "llama3_1/8B_full",
    }
    assert {name: facts.get(name) for name in expected} == expected
    assert facts.values["parallelism.micro_batch_size"].source.startswith(
        "catalog:llama3_1/8B_full"
    )
    assert "model.seq_length" in facts.unknown
    assert not facts.has("training.train_iters")


def test_a_file_at_the_built_in_path_wins_over_the_catalog() -> None:
    facts = _read("run --nproc_per_node 8 full_finetune_distributed --config llama3_2/1B_full")
    assert facts.get("parallelism.micro_batch_size") == 16  # the published config says 4
    assert facts.values["parallelism.micro_batch_size"].source == "1B_full.yaml:16"
    assert facts.get("model.seq_length") == 2048
    assert facts.get("training.train_iters") == 120  # 3 epochs x max_steps_per_epoch 40
    assert facts.get("parallelism.global_batch_size") == 16 * 2 * 8
    assert facts.get("parallelism.recompute") == "none"
    assert facts.get("model.untie_embeddings") is False


def test_overrides_replace_the_model_component() -> None:
    facts = _read(
        "run --nproc_per_node 2 full_finetune_distributed --config llama3_2/1B_full "
        "model=torchtune.models.llama3_2.llama3_2_3b batch_size=3"
    )
    assert facts.get("model.num_layers") == 28
    assert facts.values["model.num_layers"].source.startswith("catalog:llama3_2_3b")
    assert facts.values["launch.model_name"].source == (
        "override: model=torchtune.models.llama3_2.llama3_2_3b"
    )
    assert facts.get("parallelism.micro_batch_size") == 3
    assert facts.get("parallelism.global_batch_size") == 3 * 2 * 2


def test_lora_config_with_tp_hsdp_and_removed_key() -> None:
    facts = _read(
        "run --nnodes 2 --nproc_per_node 8 lora_finetune_distributed "
        "--config custom/qwen3_lora_tp.yaml batch_size=2 model.lora_rank=16 "
        "~tokenizer.max_seq_len"
    )
    # shard -1 = 16 / (replicate 2 x TP 2) = 4; data parallel = 2 x 4 = 8.
    assert facts.get("hardware.num_gpus") == 16
    assert facts.get("hardware.gpus_per_node") == 8
    assert facts.get("launch.num_nodes") == 2
    assert facts.get("parallelism.tensor_parallel") == 2
    assert facts.get("launch.fsdp_shard") == 4
    assert facts.get("parallelism.data_parallel") == 8
    assert facts.get("parallelism.global_batch_size") == 2 * 4 * 8
    assert facts.get("training.mode") == "lora"
    assert facts.get("training.lora_rank") == 16
    assert facts.values["training.lora_rank"].source == "override: model.lora_rank=16"
    assert facts.get("launch.lora_alpha") == 64
    assert facts.get("training.lora_targets") == ["linear_qkv", "linear_proj"]
    assert facts.get("model.kv_channels") == 128
    assert not facts.has("model.seq_length")


def test_lora_builder_defaults_and_transform_default_length() -> None:
    facts = _read(
        "run --nproc_per_node 8 lora_finetune_distributed --config custom/llama4_lora_defaults.yaml"
    )
    assert facts.get("training.lora_rank") == 8
    assert "training.lora_rank" in facts.assumed
    assert facts.get("launch.lora_alpha") == 16
    assert facts.get("training.lora_targets") == ["linear_qkv"]
    assert facts.get("model.seq_length") == 8192
    assert "model.seq_length" in facts.assumed
    assert facts.get("model.num_experts") == 16
    assert facts.get("model.moe_router_topk") == 1
    assert not facts.has("parallelism.precision")  # fp32 has no scenario precision
    assert any("fp32" in note for note in facts.notes)
    assert not facts.has("training.train_iters")


def test_single_device_recipe_and_tune_run_without_torchrun_options() -> None:
    single = _read("run lora_finetune_single_device --config custom/qwen3_lora_tp.yaml")
    assert single.get("hardware.num_gpus") == 1
    assert single.get("parallelism.tensor_parallel") == 1
    assert single.get("parallelism.data_parallel") == 1
    assert single.get("parallelism.zero_stage") == 0
    alone = _read("run full_finetune_distributed --config llama3_1/8B_full")
    assert alone.get("hardware.num_gpus") == 1
    assert any("one process" in note for note in alone.notes)


def test_kubernetes_trainjob_command_takes_the_pet_environment() -> None:
    allocation = Facts()
    allocation.set("hardware.gpus_per_node", 2, "manifest: nvidia.com/gpu")
    allocation.set("launch.num_nodes", 1, "manifest: numNodes")
    facts = _read(
        "run --rdzv_endpoint=localhost:29500 full_finetune_distributed --config "
        "llama3_2/3B_full dataset=torchtune.datasets.instruct_dataset dataset.source=parquet "
        "tokenizer.path=/workspace/model/original/tokenizer.model",
        env={"PET_NNODES": "1", "PET_NPROC_PER_NODE": "2"},
        allocation=allocation,
    )
    assert facts.get("hardware.num_gpus") == 2
    assert facts.values["hardware.gpus_per_node"].source == "manifest: nvidia.com/gpu"
    assert facts.get("launch.num_nodes") == 1
    assert facts.get("parallelism.data_parallel") == 2
    assert facts.get("launch.gradient_accumulation") == 8
    assert facts.get("parallelism.global_batch_size") == 64
    assert facts.get("model.hidden_size") == 3072


def test_recipe_script_under_torchrun() -> None:
    facts = _read(
        "--config custom/qwen3_lora_tp.yaml",
        program="recipes/lora_finetune_distributed.py",
        launcher="torchrun",
        launcher_args={"nproc_per_node": "4"},
    )
    assert facts.get("hardware.num_gpus") == 4
    assert facts.get("parallelism.data_parallel") == 2  # replicate 2 x shard 4/(2 x 2)
    assert facts.get("training.mode") == "lora"


def test_a_zero_degree_is_a_note_not_an_error() -> None:
    facts = _read(
        "run --nproc_per_node 4 full_finetune_distributed --config llama3_1/8B_full "
        "tensor_parallel_dim=0"
    )
    assert facts.get("parallelism.tensor_parallel") == 1
    assert facts.get("parallelism.data_parallel") == 4
    assert any("tensor_parallel_dim 0" in note for note in facts.notes)


def test_missing_config_path_names_the_file() -> None:
    with pytest.raises(SourceError, match=r"nowhere\.yaml.*--config"):
        _read("run --nproc_per_node 2 full_finetune_distributed --config nowhere.yaml")


def test_every_catalog_config_names_a_known_builder() -> None:
    data = load_data("torchtune.yaml")
    models = data["models"]
    aliases = data["aliases"]
    assert isinstance(models, dict)
    assert isinstance(aliases, dict)
    configs = data["configs"]
    assert isinstance(configs, dict)
    assert len(configs) > 50
    for name, entry in configs.items():
        builder = str(entry["model._component_"]).rpartition(".")[2]
        base = builder.partition("_")[2] if builder.startswith(("lora_", "qlora_")) else builder
        assert aliases.get(base, base) in models, name


def test_bf16_dtype_trains_in_pure_bf16() -> None:
    """``dtype: bf16``: no fp32 master, bf16 moments and gradients; another optimizer is only
    noted."""
    facts = _read("run --nproc_per_node 8 full_finetune_distributed --config llama3_2/1B_full")
    fields = ("main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype", "grad_reduce_in_fp32")
    assert tuple(facts.get(f"parallelism.{f}") for f in fields) == ("bf16", "bf16", "bf16", False)
    assert facts.values["parallelism.main_params_dtype"].source == "1B_full.yaml:20"
    paged = _read(
        "run --nproc_per_node 8 full_finetune_distributed --config llama3_2/1B_full "
        "optimizer._component_=bitsandbytes.optim.PagedAdamW8bit"
    )
    assert not paged.has("parallelism.main_params_dtype")
    assert any("PagedAdamW8bit keeps states of its own" in note for note in paged.notes)


def test_the_adamw_fused_and_foreach_keys_are_its_implementation() -> None:
    field = "parallelism.optimizer_implementation"
    base = (
        "run --nproc_per_node 8 full_finetune_distributed --config llama3_2/1B_full "
        "optimizer._component_=torch.optim.AdamW"
    )
    assert not _read(base.rpartition(" ")[0]).has(field)  # no optimizer section
    fused = _read(base + " optimizer.fused=True")  # as torchtune's configs set it
    assert fused.get(field) == "fused"
    assert field not in fused.assumed
    unfused = _read(base + " optimizer.fused=False")
    assert unfused.get(field) == "foreach"  # torch's default on CUDA
    assert field in unfused.assumed
    loop = _read(base + " optimizer.fused=False optimizer.foreach=False")
    assert loop.get(field) == "for_loop"
    assert field not in loop.assumed
    # one optimizer per parameter, stepped in the backward: no step over every parameter
    assert not _read(base + " optimizer.fused=False optimizer_in_bwd=True").has(field)
    paged = _read(base.replace("torch.optim.AdamW", "bitsandbytes.optim.PagedAdamW8bit"))
    assert not paged.has(field)
