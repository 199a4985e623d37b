"""The Megatron-Bridge reader, on launch files written for these tests
(tests/data/launch/megatron_bridge/)."""

from __future__ import annotations

import pytest

from planner.errors import SourceError
from planner.launch.readers.megatron_bridge import READER
from planner.launch.types import Facts, Invocation, MemoryFiles
from tests.launch import reader_support as support

ROOT = "/job"
EXAMPLE = "examples/recipes/llama/pretrain_llama3_8b.py"
RUNNER = "scripts/training/run_recipe.py"


def _files(*, without: str = "") -> MemoryFiles:
    return support.data_files("megatron_bridge", ROOT, without=without)


def _read(*invocations: Invocation, files: MemoryFiles | None = None, gpus: int = 8) -> Facts:
    given = support.allocation(gpus, source="launch: test allocation")
    facts = support.read(
        READER,
        invocations[0],
        files if files is not None else _files(),
        given=given,
        work_dir=ROOT,
        invocations=invocations,
    )
    facts.default("hardware.num_gpus", gpus, "launch: test allocation")
    return support.finished(facts)


def _example(*args: str) -> Invocation:
    return Invocation(program=EXAMPLE, args=args, cwd=ROOT, launcher="torchrun")


def _runner(recipe: str, *args: str) -> Invocation:
    return Invocation(program=RUNNER, args=("--recipe", recipe, *args), cwd=ROOT)


def test_recognises_entry_scripts_only() -> None:
    assert READER.recognises(_example())
    assert READER.recognises(Invocation(program=f"/opt/bridge/{RUNNER}", args=("--recipe", "x")))
    assert not READER.recognises(Invocation(program=RUNNER, args=("a.b=1",)))
    assert not READER.recognises(Invocation(program="pretrain_gpt.py", args=("--num-layers", "2")))
    wrapped = Invocation(program="bash", args=("-c", f"uv run python {RUNNER} --model qwen3_8b"))
    assert READER.recognises(wrapped)


def test_default_config_file_applies_between_recipe_and_cli() -> None:
    facts = _read(_example("model.tensor_model_parallel_size=2", "train.train_iters=700"))
    # recipe: CP 2, model from the HF config of meta-llama/Meta-Llama-3-8B
    assert facts.get("model.num_layers") == 32
    assert facts.get("model.vocab_size") == 128256
    assert facts.get("parallelism.context_parallel") == 2
    # the script's default --config-file (tests' own values)
    assert facts.get("model.seq_length") == 2048
    assert facts.get("parallelism.global_batch_size") == 64
    assert facts.get("parallelism.micro_batch_size") == 2
    assert facts.values["parallelism.global_batch_size"].source.startswith(
        "llama3_8b_pretrain_override_example.yaml:"
    )
    # the command line
    assert facts.get("parallelism.tensor_parallel") == 2
    assert facts.get("training.train_iters") == 700
    assert facts.get("parallelism.data_parallel") == 2
    assert facts.get("launch.gradient_accumulation") == 16
    assert facts.get("parallelism.precision") == "bf16"


def test_default_config_file_absent_uses_its_published_values() -> None:
    files = _files(without="llama3_8b_pretrain_override_example.yaml")
    facts = _read(_example(), files=files)
    assert facts.get("model.seq_length") == 4096
    assert facts.get("parallelism.global_batch_size") == 8
    assert facts.get("training.train_iters") == 20
    assert "7e8111c" in facts.values["training.train_iters"].source


def test_named_config_file_with_interpolation_and_fp8() -> None:
    facts = _read(_example("--config-file", "configs/long.yaml", "train.micro_batch_size=1"))
    assert facts.get("model.seq_length") == 16384
    assert "${model.seq_length}" in facts.values["model.seq_length"].source
    assert facts.get("parallelism.context_parallel") == 4
    assert facts.get("parallelism.global_batch_size") == 32
    assert facts.get("training.train_iters") == 1168251  # the recipe's
    assert facts.get("parallelism.precision") == "fp8"


def test_framework_and_gradient_reduction_as_the_training_loop_runs_them() -> None:
    facts = _read(_example())
    # NeMo Framework container, Megatron-Core training loop with the nemo profile's overlap
    assert facts.get("training.framework") == "nemo"
    # the recipe's bf16_mixed reduces in fp32 (the nemo profile's default is 16-bit)
    assert facts.get("parallelism.grad_reduce_in_fp32") is True
    assert "bf16_mixed" in facts.values["parallelism.grad_reduce_in_fp32"].source
    # the recipe's mixed precision is copied over the DDP config's
    named = _read(_example("ddp.grad_reduce_in_fp32=false"))
    assert named.get("parallelism.grad_reduce_in_fp32") is True
    # the recipe holds the name "bf16_mixed": Hydra sets no key under it (the script stops)
    refused = _read(_example("mixed_precision.grad_reduce_in_fp32=false"))
    assert refused.get("parallelism.grad_reduce_in_fp32") is True
    assert any("Could not override" in note for note in refused.notes)
    # a recipe that builds its MixedPrecisionConfig takes the key over its bf16_mixed()
    built = _read(
        _runner("llama3_70b_pretrain_config", "mixed_precision.grad_reduce_in_fp32=false"),
        gpus=128,
    )
    assert built.get("parallelism.grad_reduce_in_fp32") is False
    assert built.get("parallelism.precision") == "bf16"
    # no mixed-precision config: the DDP config's
    ddp = _read(_example("mixed_precision=null", "ddp.grad_reduce_in_fp32=false"))
    assert ddp.get("parallelism.grad_reduce_in_fp32") is False


def test_missing_named_config_file_is_an_error() -> None:
    with pytest.raises(SourceError, match=r"nope\.yaml"):
        _read(_example("--config-file=nope.yaml"))


def test_run_recipe_options_then_overrides() -> None:
    invocation = Invocation(
        program=RUNNER,
        args=(
            "--recipe",
            "qwen3_8b_pretrain_config",
            "-tp",
            "2",
            "--global_batch_size=128",
            "-sl",
            "8192",
            "model.tensor_model_parallel_size=1",
        ),
        cwd=ROOT,
    )
    facts = _read(invocation, gpus=16)
    assert facts.get("model.num_layers") == 36
    assert facts.get("parallelism.tensor_parallel") == 1  # the trailing override wins
    assert facts.get("parallelism.global_batch_size") == 128
    assert facts.get("model.seq_length") == 8192
    assert facts.get("parallelism.micro_batch_size") == 2
    assert facts.get("training.train_iters") == 300000
    assert facts.get("training.mode") == "pretrain"


def test_model_and_mode_select_the_recipe() -> None:
    invocation = Invocation(
        program=RUNNER, args=("--model", "gpt_oss_20b", "--mode", "pretrain"), cwd=ROOT
    )
    facts = _read(invocation, gpus=32)
    assert facts.get("launch.recipe") == "gpt_oss_20b_pretrain_config"
    assert facts.get("model.num_experts") == 32
    assert facts.get("parallelism.expert_parallel") == 4
    assert facts.get("parallelism.data_parallel") == 4
    assert facts.get("model.moe_token_dispatcher_type") == "alltoall"
    assert facts.get("model.moe_grouped_gemm") is True
    assert "gpt_oss.py@067f987" in facts.values["model.moe_grouped_gemm"].source


def test_unknown_recipe_is_noted() -> None:
    invocation = Invocation(program=RUNNER, args=("--recipe", "mystery_config"), cwd=ROOT)
    facts = _read(invocation)
    assert not facts.has("model.num_layers")
    assert any("mystery_config" in note for note in facts.notes)


def test_sweep_describes_the_first_run_and_notes_the_others() -> None:
    runs = tuple(
        Invocation(
            program="bash",
            args=(
                "-c",
                f"python {RUNNER} --recipe qwen3_8b_pretrain_config -gb 64 "
                f"model.tensor_model_parallel_size={tp} train.train_iters=500",
            ),
            cwd=ROOT,
            where=f"sweep.sbatch:{line}",
        )
        for tp, line in ((2, 7), (4, 8))
    )
    facts = _read(*runs, gpus=16)
    assert facts.get("parallelism.tensor_parallel") == 2
    assert facts.get("parallelism.data_parallel") == 8
    assert facts.get("training.train_iters") == 500
    assert any("2 trainings" in note and "TP 4" in note for note in facts.notes)


def test_unexpanded_shell_variable_leaves_the_recipe_value() -> None:
    invocation = Invocation(
        program=RUNNER,
        args=("--recipe", "qwen3_8b_pretrain_config", "model.tensor_model_parallel_size=$TP"),
        cwd=ROOT,
    )
    facts = _read(invocation)
    assert facts.get("parallelism.tensor_parallel") == 4
    assert any("$TP" in note for note in facts.notes)


def test_moe_routing_overrides_reach_the_scenario() -> None:
    overrides = {
        "moe_expert_capacity_factor": ("1.0", 1.0),
        "moe_pad_expert_input_to_capacity": ("true", True),
        "moe_token_dispatcher_type": ("flex", "flex"),  # over the recipe's alltoall
        "moe_router_force_load_balancing": ("false", False),
        "moe_grouped_gemm": ("false", False),  # over the recipe's true
    }
    args = [f"model.{key}={text}" for key, (text, _) in overrides.items()]
    invocation = Invocation(program=RUNNER, args=("--model", "gpt_oss_20b", *args), cwd=ROOT)
    facts = _read(invocation, gpus=32)
    for key, (text, value) in overrides.items():
        assert facts.get(f"model.{key}") == value
        assert type(facts.get(f"model.{key}")) is type(value)
        assert f"model.{key}={text}" in facts.values[f"model.{key}"].source


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (("model.cuda_graph_impl=full_iteration",), "full_iteration"),
        (
            ("model.cuda_graph_impl=local", "model.cuda_graph_scope=full_iteration"),
            "full_iteration",
        ),
        (
            (
                "model.cuda_graph_impl=transformer_engine",
                "model.cuda_graph_scope=[attn,moe_router]",
            ),
            "per_layer",
        ),
        ((), None),
    ],
)
def test_cuda_graphs_come_from_the_provider(
    overrides: tuple[str, ...], expected: str | None
) -> None:
    invocation = Invocation(program=RUNNER, args=("--model", "gpt_oss_20b", *overrides), cwd=ROOT)
    facts = _read(invocation, gpus=32)
    assert facts.get("training.cuda_graphs") == expected
    if expected is not None:
        assert "model.cuda_graph_" in facts.values["training.cuda_graphs"].source


def test_cpu_offloading_and_fp8_weights_come_from_the_config() -> None:
    offload = ("model.cpu_offloading=true", "model.cpu_offloading_num_layers=4")
    facts = _read(
        Invocation(program=RUNNER, args=("--model", "gpt_oss_20b", *offload), cwd=ROOT), gpus=32
    )
    assert facts.get("parallelism.activation_offload_layers") == 4
    assert (
        "cpu_offloading_num_layers=4"
        in facts.values["parallelism.activation_offload_layers"].source
    )
    weights_only = (*offload, "model.cpu_offloading_activations=false")
    facts = _read(
        Invocation(program=RUNNER, args=("--model", "gpt_oss_20b", *weights_only), cwd=ROOT),
        gpus=32,
    )
    assert not facts.has("parallelism.activation_offload_layers")
    fp8 = _read(
        _runner(
            "llama3_70b_pretrain_config",
            "mixed_precision.fp8=hybrid",
            "mixed_precision.fp8_param_gather=true",
        ),
        gpus=128,
    )
    assert fp8.get("parallelism.fp8_param_gather") is True


def test_block_recompute_of_the_first_layers_comes_from_the_config() -> None:
    """``set_recompute_overrides``: granularity full, method block, ``recompute_num_layers``;
    the uniform method recomputes every layer (no count stated)."""
    full = ("model.recompute_granularity=full", "model.recompute_num_layers=5")
    block = _read(_example(*full, "model.recompute_method=block"))
    assert block.get("parallelism.recompute") == "full"
    assert block.get("parallelism.recompute_num_layers") == 5
    assert "recompute_num_layers=5" in block.values["parallelism.recompute_num_layers"].source
    uniform = _read(_example(*full, "model.recompute_method=uniform"))
    assert uniform.get("parallelism.recompute") == "full"
    assert not uniform.has("parallelism.recompute_num_layers")


def test_a_deleted_key_keeps_the_recipe_functions_value() -> None:
    """``~key`` leaves the merged config without the key, and ``apply_overrides`` sets only
    the keys it holds: the recipe function's value stays."""
    deleted = _read(_example("~mixed_precision", "ddp.grad_reduce_in_fp32=false"))
    assert deleted.get("parallelism.grad_reduce_in_fp32") is True
    assert "bf16_mixed" in deleted.values["parallelism.grad_reduce_in_fp32"].source
    assert any("'~mixed_precision'" in note for note in deleted.notes)
    layout = _read(
        _example("model.tensor_model_parallel_size=4", "~model.tensor_model_parallel_size")
    )
    assert layout.get("parallelism.tensor_parallel") == 1  # llama3_8b_pretrain_config's
    field = _read(
        _runner("llama3_70b_pretrain_config", "mixed_precision.fp8=hybrid", "~mixed_precision.fp8"),
        gpus=128,
    )
    assert field.get("parallelism.precision") == "bf16"
    assert not field.has("parallelism.fp8_recipe")


@pytest.mark.parametrize(("strategy", "stage"), support.MEGATRON_FSDP_STRATEGY_STAGES)
def test_megatron_fsdp_runs_the_zero_stage_of_its_sharding_strategy(
    strategy: str, stage: int
) -> None:
    for flag in ("ddp.use_megatron_fsdp=true", "dist.use_megatron_fsdp=true"):
        facts = _read(_example(flag, f"ddp.data_parallel_sharding_strategy={strategy}"))
        assert facts.get("parallelism.zero_stage") == stage
        assert facts.get("parallelism.megatron_fsdp") is True
        assert "parallelism.zero_stage" not in facts.assumed
    # the strategy alone, without Megatron-FSDP, leaves the distributed optimizer's stage
    alone = _read(_example(f"ddp.data_parallel_sharding_strategy={strategy}"))
    assert not alone.has("parallelism.zero_stage")
    assert not alone.has("parallelism.megatron_fsdp")


def test_megatron_fsdp_takes_the_recipes_strategy_else_megatron_cores_default() -> None:
    # the Llama recipes set none: Megatron-Core's DistributedDataParallelConfig default, no_shard
    llama = _read(_example("ddp.use_megatron_fsdp=true"))
    assert llama.get("parallelism.zero_stage") == 0
    assert "parallelism.zero_stage" in llama.assumed
    assert "distributed_data_parallel_config.py" in llama.values["parallelism.zero_stage"].source
    assert any("default no_shard assumed (ZeRO 0)" in note for note in llama.notes)
    # _qwen3_common sets optim_grads_params
    qwen = _read(_runner("qwen3_8b_pretrain_config", "ddp.use_megatron_fsdp=true"))
    assert qwen.get("parallelism.zero_stage") == 3
    assert "catalog:qwen3_8b_pretrain_config" in qwen.values["parallelism.zero_stage"].source
    assert not _read(_runner("qwen3_8b_pretrain_config")).has("parallelism.megatron_fsdp")
    bad = _read(_example("ddp.use_megatron_fsdp=true", "ddp.data_parallel_sharding_strategy=full"))
    assert bad.get("parallelism.zero_stage") == 0
    assert any("'full'" in n and "not one of Megatron-FSDP's" in n for n in bad.notes)


def test_megatron_fsdp_from_the_config_file() -> None:
    facts = _read(_example("--config-file", "configs/fsdp_optim.yaml"))
    assert facts.get("parallelism.zero_stage") == 1
    assert facts.values["parallelism.zero_stage"].source.startswith("fsdp_optim.yaml:")
    assert facts.values["parallelism.megatron_fsdp"].source.startswith("fsdp_optim.yaml:")
    over = _read(
        _example("--config-file", "configs/fsdp_optim.yaml", "dist.use_megatron_fsdp=false")
    )
    assert not over.has("parallelism.megatron_fsdp")
