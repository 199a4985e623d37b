"""The NeMo Automodel reader: the automodel CLI, recipe modules under torchrun, command-line
overrides, the distributed: layout, the step scheduler's batches, PEFT, and notes for what it
does not read."""

from __future__ import annotations

import pytest

from planner.errors import SourceError
from planner.launch.describe import describe_launch
from planner.launch.readers import READERS
from planner.launch.readers.automodel import READER
from planner.launch.readers.automodel_config import parse_run, translate_value
from planner.launch.types import Facts, Invocation, Launch
from tests.launch import reader_support as support

JOB = "/jobs/automodel"
TRAIN_FT = "nemo_automodel.recipes.llm.train_ft"


def _read(
    command: str,
    *,
    program: str = "automodel",
    launcher: str = "",
    launcher_args: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    allocation: Facts | None = None,
) -> Facts:
    return support.read_program(
        READER,
        "automodel",
        JOB,
        program,
        *command.split(),
        launcher=launcher,
        launcher_args=launcher_args,
        env=env,
        allocation=allocation,
    )


def test_recognises_the_cli_the_cli_module_and_the_llm_recipe_modules() -> None:
    for program, args in (
        ("automodel", ("cfg.yaml",)),
        ("/usr/local/bin/automodel", ("cfg.yaml", "--nproc-per-node", "8")),
        ("am", ("cfg.yaml",)),
        ("nemo_automodel.cli.app", ("cfg.yaml",)),
        (TRAIN_FT, ("--config", "cfg.yaml")),
        ("nemo_automodel.recipes.llm.benchmark", ("-c", "cfg.yaml")),
        ("/opt/Automodel/nemo_automodel/recipes/llm/train_ft.py", ("--config", "cfg.yaml")),
    ):
        invocation = Invocation(program=program, args=args)
        assert READER.recognises(invocation), program
        assert next(r for r in READERS if r.recognises(invocation)).name == "automodel"
    for program, args in (
        ("am", ("status",)),
        ("nemo_automodel.recipes.llm.kd_unknown", ("--config", "cfg.yaml")),
        ("train_ft.py", ("--config", "cfg.yaml")),
    ):
        assert not READER.recognises(Invocation(program=program, args=args)), program


def test_cli_arguments_follow_argparse_and_parse_cli_argv() -> None:
    run = parse_run(
        Invocation(
            program="automodel",
            args=(
                "cfg.yaml",
                "--nproc_per_node=4",
                "--step_scheduler.max_steps",
                "12",
                "--distributed.sequence_parallel",
                "--model.pretrained_model_name_or_path=Qwen/Qwen3-8B",
                "stray",
            ),
        )
    )
    assert (run.config, run.cli, run.nproc_per_node) == ("cfg.yaml", True, "4")
    assert [(key, value) for key, value, _ in run.overrides] == [
        ("step_scheduler.max_steps", 12),
        ("distributed.sequence_parallel", True),
        ("model.pretrained_model_name_or_path", "Qwen/Qwen3-8B"),
    ]
    module = parse_run(Invocation(program=TRAIN_FT, args=("-c", "x.yaml", "--seed=7")))
    assert (module.config, module.cli, module.module) == ("x.yaml", False, TRAIN_FT)
    assert [key for key, _, _ in module.overrides] == ["seed"]
    assert [translate_value(t) for t in ("none", "False", "1e-5", "[1, 2]", "fsdp2")] == [
        None,
        False,
        1e-5,
        [1, 2],
        "fsdp2",
    ]


def test_full_fine_tuning_with_tensor_parallel_on_one_node() -> None:
    facts = _read("configs/llama_sft_tp.yaml --nproc-per-node 8")
    assert facts.get("training.framework") == "automodel"
    assert facts.get("training.mode") == "sft"
    assert facts.get("launch.hf_id") == "meta-llama/Llama-3.1-8B"
    assert facts.get("model.num_layers") == 32
    assert facts.get("hardware.num_gpus") == 8
    assert (
        facts.values["hardware.num_gpus"].source == "launch: automodel --nnodes x --nproc_per_node"
    )
    assert facts.get("parallelism.tensor_parallel") == 2
    assert facts.get("parallelism.data_parallel") == 4
    assert facts.get("parallelism.zero_stage") == 3
    assert facts.get("launch.fsdp_shard") == 4
    assert facts.get("parallelism.sequence_parallel") is True
    assert facts.get("parallelism.tp_comm_overlap") is True
    assert facts.values["parallelism.tp_comm_overlap"].source == "llama_sft_tp.yaml:19"
    assert facts.get("parallelism.recompute") == "full"
    assert facts.get("parallelism.micro_batch_size") == 3
    assert facts.get("parallelism.global_batch_size") == 96
    assert facts.get("launch.gradient_accumulation") == 8  # 96 / (3 x 4)
    assert facts.get("training.train_iters") == 420
    assert facts.get("model.seq_length") == 6144  # packed_sequence_size
    assert facts.get("parallelism.precision") == "bf16"
    assert "parallelism.precision" in facts.assumed  # FSDP2Config's mp_policy
    assert any("'team_notes' is not read" in note for note in facts.notes)


def test_command_line_overrides_beat_the_yaml() -> None:
    facts = _read(
        "configs/llama_sft_tp.yaml --nproc-per-node=8 --distributed.tp_size 1 "
        "--step_scheduler.local_batch_size=6 --distributed.activation_checkpointing=selective"
    )
    assert facts.get("parallelism.tensor_parallel") == 1
    assert facts.values["parallelism.tensor_parallel"].source == (
        "override: --distributed.tp_size 1"
    )
    assert facts.get("parallelism.data_parallel") == 8
    assert not facts.has("parallelism.tp_comm_overlap")  # no TP: nothing to overlap
    assert facts.get("launch.gradient_accumulation") == 2  # 96 / (6 x 8)
    assert facts.get("parallelism.recompute") == "selective"
    lora = _read(
        "configs/qwen_lora.yaml --nproc-per-node 2 --peft.dim 4 --peft.target_modules=None"
    )
    assert lora.get("training.lora_rank") == 4
    assert lora.values["training.lora_rank"].source == "override: --peft.dim 4"
    assert lora.get("launch.lora_alpha") == 32  # PeftConfig default
    assert "launch.lora_alpha" in lora.assumed
    assert lora.get("training.lora_targets") == [
        "linear_qkv",
        "linear_proj",
        "linear_fc1",
        "linear_fc2",
    ]  # '*_proj' by default
    assert "training.lora_targets" in lora.assumed


def test_lora_with_an_inferred_data_parallel_size_under_torchrun() -> None:
    facts = _read(
        "--config configs/qwen_lora.yaml",
        program=TRAIN_FT,
        launcher="torchrun",
        launcher_args={"nproc_per_node": "4"},
    )
    assert (
        facts.get("launch.hf_id") == "Qwen/Qwen3-8B"
    )  # model.config.pretrained_model_name_or_path
    assert facts.get("hardware.num_gpus") == 4
    assert facts.get("parallelism.data_parallel") == 4  # dp_size none: world / (TP x CP x PP)
    assert facts.get("training.mode") == "lora"
    assert facts.get("training.lora_rank") == 24
    assert facts.get("training.lora_targets") == ["linear_qkv", "linear_fc2"]
    assert facts.get("model.seq_length") == 1536
    assert facts.get("launch.gradient_accumulation") == 2  # 48 / (6 x 4)
    assert not facts.has("training.train_iters")
    assert any("no step_scheduler.max_steps" in note for note in facts.notes)
    assert not any("sequence_parallel" in name for name in facts.values)  # TP 1


def test_benchmark_recipe_with_pipeline_and_expert_parallel() -> None:
    allocation = support.allocation(gpus=16, nodes=2, per_node=8)
    facts = _read(
        "--config configs/moe_bench.yaml",
        program="nemo_automodel.recipes.llm.benchmark",
        launcher="torchrun",
        launcher_args={"nproc_per_node": "8", "nnodes": "2"},
        allocation=allocation,
    )
    assert facts.get("training.mode") == "pretrain"
    assert facts.get("hardware.num_gpus") == 16
    assert facts.get("parallelism.pipeline_parallel") == 2
    assert facts.get("parallelism.expert_parallel") == 8
    assert facts.get("parallelism.data_parallel") == 8
    assert facts.get("parallelism.micro_batch_size") == 2  # pp_microbatch_size
    assert facts.get("parallelism.pipeline_batch_size") == 4  # local_batch_size
    assert facts.get("launch.gradient_accumulation") == 2  # 64 / (4 x 8)
    assert facts.get("parallelism.zero_stage") == 2  # PP layers stay gathered after forward
    assert facts.get("model.seq_length") == 1024  # MockIterableDataset's default
    assert "model.seq_length" in facts.assumed
    assert any("distributed.overlap_everything is not a fsdp2" in n for n in facts.notes)


def test_the_cli_without_nproc_per_node_takes_the_node_gpus() -> None:
    facts = _read("configs/qwen_lora.yaml", allocation=support.allocation(per_node=4, gpus=4))
    assert facts.get("hardware.num_gpus") == 4
    assert any("one process per GPU of the node" in note for note in facts.notes)
    unknown = _read("configs/qwen_lora.yaml")
    assert not unknown.has("hardware.num_gpus")
    assert not unknown.has("parallelism.data_parallel")
    assert unknown.get("parallelism.precision") == "bf16"  # FSDP2's mp_policy, world or not
    assert any("does not say how many" in note for note in unknown.notes)


def test_a_recipe_module_without_torchrun_is_one_process() -> None:
    facts = _read("-c configs/qwen_lora.yaml --distributed.dp_size=1", program=TRAIN_FT)
    assert facts.get("hardware.num_gpus") == 1
    assert facts.get("parallelism.data_parallel") == 1
    assert facts.get("parallelism.zero_stage") == 0


def test_kubeflow_pet_environment_gives_the_world() -> None:
    facts = _read(
        "--config configs/llama_sft_tp.yaml",
        program=TRAIN_FT,
        launcher="torchrun",
        env={"PET_NNODES": "2", "PET_NPROC_PER_NODE": "4"},
    )
    assert facts.get("hardware.num_gpus") == 8
    assert facts.get("parallelism.data_parallel") == 4


def test_layout_refusals_and_bad_values_are_notes() -> None:
    facts = _read(
        "configs/llama_sft_tp.yaml --nproc-per-node 8 --distributed.tp_size=3 "
        "--distributed.cp_size=0 --distributed.strategy=zero9 "
        "--distributed.sequence_parallel=false"
    )
    assert any("not a multiple of TP 3" in note for note in facts.notes)
    assert any("cp_size 0 is not a size" in note for note in facts.notes)
    assert any("strategy 'zero9'" in note for note in facts.notes)
    assert any("needs sequence_parallel" in note for note in facts.notes)
    assert not facts.has("parallelism.data_parallel")
    ddp = _read("configs/llama_sft_tp.yaml --nproc-per-node 8 --distributed.strategy ddp")
    assert ddp.get("parallelism.zero_stage") == 0
    assert any("sequence_parallel is not a ddp setting" in note for note in ddp.notes)
    batch = _read(
        "configs/qwen_lora.yaml --nproc-per-node 8 --step_scheduler.local_batch_size 5"
    )  # 48 / (5 x 8) is not whole
    assert not batch.has("launch.gradient_accumulation")
    assert any("Automodel refuses it" in note for note in batch.notes)


def test_a_config_without_a_recipe_or_a_model_is_read_with_notes() -> None:
    files = support.data_files(
        "automodel",
        JOB,
        extra={f"{JOB}/bare.yaml": "step_scheduler:\n  global_batch_size: 8\n"},
    )
    invocation = Invocation(
        program="automodel", args=("bare.yaml", "--nproc-per-node", "2"), cwd=JOB
    )
    facts = support.read(READER, invocation, files)
    assert facts.get("training.mode") == "sft"
    assert any("names no recipe" in note for note in facts.notes)
    assert any("names no pretrained_model_name_or_path" in note for note in facts.notes)
    assert facts.get("parallelism.global_batch_size") == 8
    assert facts.get("parallelism.micro_batch_size") == 1  # local_batch_size default
    none = _read("--nproc-per-node 2")
    assert any("names no config" in note for note in none.notes)


def test_missing_config_names_the_file() -> None:
    with pytest.raises(SourceError, match=r"nowhere\.yaml.*Automodel config"):
        _read("configs/nowhere.yaml --nproc-per-node 2")


def test_a_slurm_script_described_end_to_end() -> None:
    script = (support.DATA / "automodel" / "jobs" / "automodel.sbatch").read_text()
    description = describe_launch(
        Launch(batch_script=script, work_dir=JOB),
        support.data_files("automodel", JOB),
        gpu="h100-sxm",
    )
    assert description.described_by == "automodel"
    par = description.scenario["parallelism"]
    assert (par["tensor_parallel"], par["data_parallel"]) == (4, 4)
    assert description.scenario["training"]["framework"] == "automodel"
    assert description.launch["gradient_accumulation"] == 8  # 96 / (3 x 4)
    assert description.train_iters == 900
    assert description.provenance["parallelism.tensor_parallel"] == (
        "override: --distributed.tp_size=4"
    )


def test_the_automodel_cli_in_a_script_counts_its_processes() -> None:
    script = (
        "#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gpus-per-node=8\n"
        "automodel configs/llama_sft_tp.yaml --nproc-per-node 4\n"
    )
    description = describe_launch(
        Launch(batch_script=script, work_dir=JOB),
        support.data_files("automodel", JOB),
        gpu="h100-sxm",
    )
    assert description.described_by == "automodel"
    assert description.scenario["parallelism"]["data_parallel"] == 2  # 4 / TP 2


def test_a_pytorchjob_running_the_recipe_module() -> None:
    container = {
        "name": "pytorch",
        "image": "example.org/automodel:1",
        "workingDir": JOB,
        "command": ["torchrun", "--nproc_per_node=4", "-m", TRAIN_FT],
        "args": ["--config", "configs/qwen_lora.yaml", "--step_scheduler.max_steps=30"],
        "resources": {"limits": {"nvidia.com/gpu": 4}},
    }
    replica = {"replicas": 1, "template": {"spec": {"containers": [container]}}}
    manifest = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "automodel-lora"},
        "spec": {"pytorchReplicaSpecs": {"Master": replica, "Worker": replica}},
    }
    description = describe_launch(
        Launch(manifest=(manifest,), work_dir=JOB),
        support.data_files("automodel", JOB),
        gpu="h100-sxm",
    )
    assert description.described_by == "automodel"
    assert description.scenario["parallelism"]["data_parallel"] == 8  # 2 pods x 4
    assert description.scenario["training"]["mode"] == "lora"
    assert description.train_iters == 30


def test_the_earlier_cli_form_with_command_and_domain() -> None:
    pretrain = _read("pretrain llm -c configs/llama_sft_tp.yaml --nproc-per-node=8")
    assert pretrain.get("training.mode") == "pretrain"
    assert pretrain.values["training.mode"].source.startswith("launch: automodel pretrain llm")
    assert pretrain.get("hardware.num_gpus") == 8
    assert pretrain.get("parallelism.data_parallel") == 4
    finetune = _read("finetune llm --config=configs/qwen_lora.yaml --nproc-per-node 2")
    assert finetune.get("training.mode") == "lora"
    assert finetune.get("parallelism.data_parallel") == 2
    vlm = _read("finetune vlm -c configs/qwen_lora.yaml --nproc-per-node 2")
    assert any("does not model" in note for note in vlm.notes)
    module = parse_run(Invocation(program=TRAIN_FT, args=("--config=x.yaml",)))
    assert module.config is None  # parse_cli_argv wants the path as its own argument


def test_a_recipe_the_reader_does_not_model_is_noted() -> None:
    facts = _read(
        "configs/llama_sft_tp.yaml --nproc-per-node 8 "
        "--recipe=KnowledgeDistillationRecipeForNextTokenPrediction"
    )
    assert facts.get("training.mode") == "sft"
    assert "read as train_ft" in facts.values["training.mode"].source
    assert any("not one the reader models" in note for note in facts.notes)


def test_fp8_section_and_an_fp32_model() -> None:
    base = "configs/llama_sft_tp.yaml --nproc-per-node 8 --fp8.enabled=true"
    tensorwise = _read(base)
    assert tensorwise.get("parallelism.precision") == "fp8"
    assert tensorwise.values["parallelism.precision"].source == "override: --fp8.enabled=true"
    assert tensorwise.get("parallelism.fp8_recipe") == "tensorwise"
    rowwise = _read(base + " --fp8.recipe_name rowwise")
    assert rowwise.get("parallelism.precision") == "fp8"
    assert not rowwise.has("parallelism.fp8_recipe")
    assert any("recipe_name rowwise" in note for note in rowwise.notes)
    fp32 = _read("configs/llama_sft_tp.yaml --nproc-per-node 8 --model.torch_dtype=float32")
    for name in ("main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype"):
        assert fp32.get(f"parallelism.{name}") == "fp32"
        assert fp32.values[f"parallelism.{name}"].source == "override: --model.torch_dtype=float32"
    bf16 = _read("configs/llama_sft_tp.yaml --nproc-per-node 8")
    assert not bf16.has("parallelism.main_params_dtype")  # the profile's bf16 states
    emulated = _read(base + " --fp8.emulate")
    assert emulated.get("parallelism.precision") == "bf16"
    assert _read("configs/llama_sft_tp.yaml --nproc-per-node 8").get("parallelism.precision") == (
        "bf16"
    )


def test_the_cli_module_under_torchrun_runs_in_process() -> None:
    facts = _read(
        "configs/llama_sft_tp.yaml --nproc-per-node 2",
        program="nemo_automodel.cli.app",
        launcher="torchrun",
        launcher_args={"nproc_per_node": "8"},
    )
    assert facts.get("hardware.num_gpus") == 8  # torchrun's workers; the CLI's option unused
    assert facts.get("parallelism.data_parallel") == 4
    assert facts.get("training.mode") == "sft"


def test_compile_is_read_where_automodel_applies_it_and_the_loss_stays_eager() -> None:
    # ddp and megatron_fsdp: compile.enabled wraps the whole model, the loss outside it
    ddp = _read(
        "configs/qwen_lora.yaml --nproc-per-node 2 --compile.enabled true "
        "--distributed.strategy ddp"
    )
    assert ddp.get("training.compiled_loss") is False
    source = ddp.values["training.compiled_loss"].source
    assert "the whole model" in source
    assert "--compile.enabled true" in source
    assert "recipes/llm/train_ft.py" in source
    assert any("no scenario field says a compiled model" in n for n in ddp.notes)
    # fsdp2: compile.enabled is not applied; distributed.enable_compile compiles each layer
    ignored = _read("configs/qwen_lora.yaml --nproc-per-node 2 --compile.enabled true")
    assert not ignored.has("training.compiled_loss")
    assert any(
        "compile.enabled" in n and "not applied under fsdp2" in n and "2013a4dd6" in n
        for n in ignored.notes
    )
    layers = _read("configs/qwen_lora.yaml --nproc-per-node 2 --distributed.enable_compile true")
    assert layers.get("training.compiled_loss") is False
    assert "each decoder layer" in layers.values["training.compiled_loss"].source
    # async TP at TP > 1 compiles each layer too (FSDP2Manager.maybe_compile)
    async_tp = _read("configs/llama_sft_tp.yaml --nproc-per-node 8")
    assert "async TP" in async_tp.values["training.compiled_loss"].source
    # a pipeline compiles nothing
    piped = _read(
        "configs/qwen_lora.yaml --nproc-per-node 4 --distributed.pp_size 2 "
        "--distributed.enable_compile true --compile.enabled=true --distributed.strategy fsdp2"
    )
    assert not piped.has("training.compiled_loss")
    assert sum("pipeline parallelism (pp_size 2" in n for n in piped.notes) == 2
    eager = _read("configs/qwen_lora.yaml --nproc-per-node 2")
    assert not eager.has("training.compiled_loss")
    assert not any("compile" in n for n in eager.notes)


def test_the_optimizer_sections_foreach_and_fused_are_its_implementation() -> None:
    base = "configs/llama_sft_tp.yaml --nproc-per-node 8 --optimizer._target_=torch.optim.Adam"
    field = "parallelism.optimizer_implementation"
    assert not _read(base).has(field)  # the profile's: foreach at tensor_parallel 1 only
    loop = _read(base + " --optimizer.foreach=false")
    assert loop.get(field) == "for_loop"
    assert loop.values[field].source == "override: --optimizer.foreach=false"
    assert _read(base + " --optimizer.foreach=true").get(field) == "foreach"
    # the recipes that set fused also set foreach: false (torch refuses both true)
    fused = _read(base + " --optimizer.foreach=false --optimizer.fused=true")
    assert fused.get(field) == "fused"
    te = "--optimizer._target_=transformer_engine.pytorch.optimizers.fused_adam.FusedAdam"
    assert _read("configs/llama_sft_tp.yaml --nproc-per-node 8 " + te).get(field) == "fused"
    # another optimizer: nothing said about Adam's implementation
    other = _read(
        base.replace("torch.optim.Adam", "flashoptim.FlashAdamW") + " --optimizer.foreach=false"
    )
    assert not other.has(field)


@pytest.mark.parametrize(
    ("written", "stage"),
    [
        ("", 3),  # MegatronFSDPConfig's default
        (" --distributed.zero_dp_strategy 0", 0),
        (" --distributed.zero_dp_strategy=1", 1),
        (" --distributed.zero_dp_strategy 2", 2),
        (" --distributed.zero_dp_strategy optim_grads", 2),  # fully_shard takes the names too
        (" --distributed.zero_dp_strategy no_shard", 0),
    ],
)
def test_megatron_fsdp_states_itself_at_the_stage_of_its_zero_dp_strategy(
    written: str, stage: int
) -> None:
    facts = _read(
        "configs/qwen_lora.yaml --nproc-per-node 8 --distributed.strategy megatron_fsdp" + written
    )
    assert facts.get("parallelism.megatron_fsdp") is True
    assert (
        "--distributed.strategy megatron_fsdp" in facts.values["parallelism.megatron_fsdp"].source
    )
    assert facts.get("parallelism.zero_stage") == stage
    assert not any("zero_dp_strategy" in note for note in facts.notes)


def test_a_zero_dp_strategy_fully_shard_refuses_is_noted_and_other_strategies_are_not_fsdp() -> (
    None
):
    bad = _read(
        "configs/qwen_lora.yaml --nproc-per-node 8 --distributed.strategy megatron_fsdp "
        "--distributed.zero_dp_strategy 4"
    )
    assert bad.get("parallelism.zero_stage") == 3
    assert any("zero_dp_strategy 4" in note and "ValueError" in note for note in bad.notes)
    for strategy in ("fsdp2", "ddp"):
        other = _read(
            f"configs/qwen_lora.yaml --nproc-per-node 8 --distributed.strategy {strategy}"
        )
        assert not other.has("parallelism.megatron_fsdp")
