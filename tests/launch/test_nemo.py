"""The NeMo 2.0 and NeMo 1.0 readers, on launch files written for these tests
(tests/data/launch/nemo/)."""

from __future__ import annotations

import pytest

from planner.errors import SourceError
from planner.launch.configs import load_config
from planner.launch.describe import LaunchDescription, describe_launch
from planner.launch.models import model_fields_from_hf_config
from planner.launch.reader import LaunchReader
from planner.launch.readers.nemo import NEMO1_READER, NEMO2_READER
from planner.launch.readers.nemo2 import parse_factory
from planner.launch.readers.nemo_hydra import HydraConfig, split_override
from planner.launch.types import Facts, Invocation, Launch, MemoryFiles
from tests.launch import reader_support as support

ROOT = "/job"


def _files() -> MemoryFiles:
    return support.data_files("nemo", ROOT)


def _read(reader: LaunchReader, invocation: Invocation, files: MemoryFiles | None = None) -> Facts:
    files = files if files is not None else _files()
    return support.finished(support.read(reader, invocation, files, work_dir=ROOT))


def _nemo(*args: str) -> Invocation:
    return Invocation(program="nemo", args=("llm", *args), cwd=ROOT)


# NeMo 2.0


def test_factory_call_is_parsed_not_run() -> None:
    assert parse_factory("llama3_8b") == ("llama3_8b", {}, [])
    name, arguments, problems = parse_factory("llama3_70b(num_nodes=128, name='x')")
    assert (name, arguments, problems) == ("llama3_70b", {"num_nodes": 128, "name": "x"}, [])
    name, arguments, problems = parse_factory("llama3_8b(num_nodes=__import__('os'))")
    assert name == "llama3_8b"
    assert arguments == {}
    assert problems
    assert parse_factory("1 +")[0] == ""


def test_nemo2_recognises_only_llm_train_commands() -> None:
    assert NEMO2_READER.recognises(_nemo("pretrain", "--factory", "llama3_8b"))
    assert NEMO2_READER.recognises(_nemo("finetune", "-f", "llama3_8b"))
    assert not NEMO2_READER.recognises(_nemo("import", "llama3_8b"))
    assert not NEMO2_READER.recognises(Invocation(program="tune", args=("run",)))


def test_recipe_defaults_factory_args_then_overrides() -> None:
    facts = _read(
        NEMO2_READER,
        _nemo(
            "pretrain",
            "-y",
            "--factory",
            "llama3_8b(num_nodes=2)",
            "trainer.strategy.tensor_model_parallel_size=4",
            "trainer.strategy.context_parallel_size=1",
            "data.global_batch_size=256",
            "data.seq_length=4096",
            "trainer.max_steps=5000",
        ),
    )
    assert facts.get("model.num_layers") == 32
    assert facts.get("model.num_query_groups") == 8
    assert facts.get("hardware.num_gpus") == 16
    assert facts.values["hardware.num_gpus"].source.startswith("derived:")
    assert facts.get("launch.num_nodes") == 2
    assert facts.get("parallelism.tensor_parallel") == 4
    assert facts.get("parallelism.context_parallel") == 1
    assert facts.get("parallelism.data_parallel") == 4
    assert facts.get("parallelism.global_batch_size") == 256
    assert facts.get("launch.gradient_accumulation") == 64
    assert facts.get("model.seq_length") == 4096
    assert facts.get("training.train_iters") == 5000
    assert facts.values["training.train_iters"].source == "override: trainer.max_steps=5000"
    assert facts.get("parallelism.precision") == "bf16"
    # mock data -> GPT-2 BPE, padded to 128 x TP 4
    assert facts.get("model.vocab_size") == 50257
    assert facts.get("launch.padded_vocab_size") == 50688


def test_recipe_values_without_overrides_cite_the_catalog() -> None:
    facts = _read(NEMO2_READER, _nemo("pretrain", "--factory", "mixtral_8x7b"))
    assert facts.get("hardware.num_gpus") == 64
    assert facts.get("parallelism.pipeline_parallel") == 4
    assert facts.get("parallelism.virtual_pipeline") == 8
    assert facts.get("parallelism.expert_parallel") == 8
    assert facts.get("model.num_experts") == 8
    assert facts.get("model.moe_ffn_hidden_size") == 14336
    assert "mixtral_8x7b.py@8cfedd7" in facts.values["parallelism.pipeline_parallel"].source
    # the model config class's MoE defaults: MixtralConfig sets the dispatcher, not the GEMM
    assert facts.get("model.moe_token_dispatcher_type") == "alltoall"
    assert "mixtral.py@8cfedd7" in facts.values["model.moe_token_dispatcher_type"].source
    assert not facts.has("model.moe_grouped_gemm")
    qwen = _read(NEMO2_READER, _nemo("pretrain", "--factory", "qwen3_30b_a3b"))
    assert qwen.get("model.moe_grouped_gemm") is True
    assert qwen.get("model.moe_token_dispatcher_type") == "alltoall"
    # Qwen3Config's per-head QK-norm, inherited by every Qwen3 config class
    assert qwen.get("model.qk_layernorm") is True
    assert "qwen3.py@8cfedd7" in qwen.values["model.qk_layernorm"].source
    assert not facts.has("model.qk_layernorm")


def test_arithmetic_override_and_plugin_factory() -> None:
    facts = _read(
        NEMO2_READER,
        _nemo(
            "pretrain",
            "--factory=llama3_8b",
            "data.global_batch_size*=2",
            "trainer.plugins=bf16_with_fp8_mixed",
        ),
    )
    assert facts.get("parallelism.global_batch_size") == 1024
    assert facts.get("parallelism.precision") == "fp8"


@pytest.mark.parametrize(
    ("plugin", "precision", "recipe", "gather", "reduce_fp32"),
    [
        ("bf16_with_fp8_mixed", "fp8", "delayed", True, True),
        ("bf16_with_fp8_current_scaling_mixed", "fp8", "tensorwise", True, True),
        ("nanov2_bf16_with_fp8_current_scaling_mixed", "fp8", "blockwise", True, True),
        ("bf16_with_fp8_subchannel_scaling_mixed", "fp8", "blockwise", False, True),
        ("fp16_with_fp8_subchannel_scaling_mixed", "fp8", "blockwise", False, False),
        ("fp16_with_mxfp8_mixed", "mxfp8", "mxfp8", True, False),
    ],
)
def test_a_precision_plugin_factory_sets_its_recipe_and_weight_gather(
    plugin: str, precision: str, recipe: str, gather: bool, reduce_fp32: bool
) -> None:
    facts = _read(NEMO2_READER, _nemo("pretrain", "-f", "llama3_8b", f"trainer.plugins={plugin}"))
    assert facts.get("parallelism.precision") == precision
    assert facts.get("parallelism.fp8_recipe") == recipe
    assert facts.get("parallelism.fp8_param_gather") is gather
    assert facts.get("parallelism.grad_reduce_in_fp32") is reduce_fp32
    assert plugin in facts.values["parallelism.fp8_recipe"].source
    assert "recipes/precision/mixed_precision.py" in facts.values["parallelism.fp8_recipe"].source
    fp16_base = [n for n in facts.notes if "fp16 parameters and activations" in n]
    assert len(fp16_base) == (1 if plugin.startswith("fp16") else 0)


def test_an_fp16_base_and_16_bit_end_layers_of_a_plugin_are_noted() -> None:
    facts = _read(
        NEMO2_READER,
        _nemo("pretrain", "-f", "llama3_8b", "trainer.plugins=fp16_with_fp8_current_scaling_mixed"),
    )
    assert facts.get("parallelism.precision") == "fp8"
    assert any(
        "with fp8 GEMMs" in n and "loss scaling" in n and "fp16_with_fp8_current" in n
        for n in facts.notes
    )
    assert any("first 1 and last 1 transformer layers run in 16 bits" in n for n in facts.notes)
    # a bf16 recipe with fp8 switched on by an override: the plugin's default recipe
    facts = _read(NEMO2_READER, _nemo("pretrain", "-f", "llama3_8b", "trainer.plugins.fp8=hybrid"))
    assert facts.get("parallelism.precision") == "fp8"
    assert not facts.has("parallelism.fp8_recipe")
    assert not any("fp16 parameters" in n or "16 bits" in n for n in facts.notes)
    unknown = _read(
        NEMO2_READER, _nemo("pretrain", "-f", "llama3_8b", "trainer.plugins=fp16_with_fp6_mixed")
    )
    assert unknown.get("parallelism.precision") == "bf16"
    assert any("not a precision plugin the catalog knows" in n for n in unknown.notes)


def test_gradient_reduction_dtype_follows_the_precision_plugin() -> None:
    # the recipe's bf16_mixed(): MegatronMixedPrecision reduces in fp32 (the nemo profile's
    # default is 16-bit)
    recipe = _read(NEMO2_READER, _nemo("pretrain", "--factory=llama3_8b"))
    assert recipe.get("parallelism.grad_reduce_in_fp32") is True
    fp16 = _read(NEMO2_READER, _nemo("pretrain", "-f", "llama3_8b", "trainer.plugins=fp16_mixed"))
    assert fp16.get("parallelism.grad_reduce_in_fp32") is False
    # what NeMo's performance scripts set
    override = _read(
        NEMO2_READER,
        _nemo("pretrain", "-f", "llama3_8b", "trainer.plugins.grad_reduce_in_fp32=false"),
    )
    assert override.get("parallelism.grad_reduce_in_fp32") is False


def test_model_factory_override_swaps_the_shape() -> None:
    facts = _read(NEMO2_READER, _nemo("pretrain", "--factory", "llama3_8b", "model=qwen3_8b"))
    assert facts.get("model.num_layers") == 36
    assert facts.get("model.vocab_size") == 151936  # preset in the config: not padded
    assert facts.get("launch.padded_vocab_size") == 151936


def test_unknown_recipe_and_argument_are_noted_not_guessed() -> None:
    facts = _read(NEMO2_READER, _nemo("pretrain", "--factory", "not_a_recipe"))
    assert not facts.has("model.num_layers")
    assert any("not_a_recipe" in note for note in facts.notes)
    assert "model.num_layers" in facts.unknown
    facts = _read(NEMO2_READER, _nemo("pretrain", "--factory", "llama3_8b(tensor_parallelism=8)"))
    assert facts.get("parallelism.tensor_parallel") == 1
    assert any("tensor_parallelism" in note for note in facts.notes)


def test_moe_routing_overrides_reach_the_scenario() -> None:
    facts = _read(
        NEMO2_READER,
        _nemo(
            "pretrain",
            "--factory",
            "mixtral_8x7b",
            "model.config.moe_expert_capacity_factor=1.0",
            "model.config.moe_pad_expert_input_to_capacity=True",
            "model.config.moe_token_dispatcher_type=alltoall",
            "model.config.moe_grouped_gemm=true",
        ),
    )
    assert facts.get("model.moe_expert_capacity_factor") == 1.0
    assert facts.get("model.moe_pad_expert_input_to_capacity") is True
    assert facts.get("model.moe_token_dispatcher_type") == "alltoall"
    assert facts.get("model.moe_grouped_gemm") is True
    assert not facts.has("model.moe_router_force_load_balancing")
    source = facts.values["model.moe_expert_capacity_factor"].source
    assert source == "override: model.config.moe_expert_capacity_factor=1.0"


def test_a_factory_with_parallel_arguments_takes_them() -> None:
    facts = _read(NEMO2_READER, _nemo("pretrain", "--factory", "qwen3_8b(tensor_parallelism=2)"))
    assert facts.get("parallelism.tensor_parallel") == 2
    assert facts.get("parallelism.micro_batch_size") == 2
    assert facts.get("training.train_iters") == 300000


def test_finetune_lora_recipe() -> None:
    facts = _read(
        NEMO2_READER,
        _nemo(
            "finetune",
            "--factory",
            "llama3_70b(peft_scheme='lora', seq_length=4096)",
            "trainer.max_steps=300",
        ),
    )
    assert facts.get("training.mode") == "lora"
    assert facts.get("training.lora_rank") == 16
    assert facts.get("parallelism.tensor_parallel") == 8
    assert facts.get("hardware.num_gpus") == 8
    assert facts.get("model.seq_length") == 4096
    assert facts.get("parallelism.global_batch_size") == 128
    assert facts.get("training.train_iters") == 300
    assert facts.get("model.vocab_size") == 128256  # the model's own tokenizer
    full = _read(NEMO2_READER, _nemo("finetune", "--factory", "llama3_70b(peft_scheme=None)"))
    assert full.get("training.mode") == "sft"
    assert full.get("hardware.num_gpus") == 32
    assert full.get("parallelism.pipeline_parallel") == 4


def test_nemo2_batch_script_end_to_end() -> None:
    launch = Launch(
        batch_script=(support.DATA / "nemo" / "pretrain.sbatch").read_text(), work_dir=ROOT
    )
    description = describe_launch(launch, _files(), gpu="h100-sxm", predict=False)
    assert description.described_by == "nemo2"
    assert description.scenario["parallelism"]["tensor_parallel"] == 4
    assert description.scenario["hardware"]["num_gpus"] == 16


_GPT_OSS_FIELDS = (
    "moe_expert_bias",
    "window_size",
    "window_attn_skip_freq",
    "rope_type",
    "softmax_type",
    "activation_func_clamp_value",
)
"""GPT-OSS's expert biases and attention / activation variants, as scenario fields."""


def _model(description: LaunchDescription) -> dict[str, object]:
    model = description.scenario["model"]
    assert isinstance(model, dict)
    return model


def _gpt_oss(*overrides: str) -> LaunchDescription:
    script = (support.DATA / "nemo" / "gpt_oss.sbatch").read_text()
    extra = "".join(f" \\\n    {o}" for o in overrides)
    launch = Launch(batch_script=script.rstrip("\n") + extra + "\n", work_dir=ROOT)
    return describe_launch(launch, _files(), gpu="h100-sxm", predict=True)


def test_nemo2_gpt_oss_keeps_its_expert_biases_and_attention_variants() -> None:
    """NeMo 2's GPTOSSConfig (add_bias_linear True, learnable softmax, (128, 0) windows every
    other layer, YaRN, clamp 7) reads as the Hugging Face config of the same model does; its
    biased experts then need expert tensor parallelism 1, as Megatron-Core asserts."""
    hf = model_fields_from_hf_config(
        {
            "model_type": "gpt_oss",
            "num_hidden_layers": 24,
            "hidden_size": 2880,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "head_dim": 64,
            "intermediate_size": 2880,
            "num_local_experts": 32,
            "experts_per_token": 4,
            "vocab_size": 201088,
            "sliding_window": 128,
            "layer_types": ["sliding_attention", "full_attention"] * 12,
            "swiglu_limit": 7.0,
            "rope_scaling": {"rope_type": "yarn", "factor": 32.0},
        }
    )
    refused = _gpt_oss()
    model = _model(refused)
    assert {k: model.get(k) for k in _GPT_OSS_FIELDS} == {k: hf[k] for k in _GPT_OSS_FIELDS}
    assert "gpt_oss.py@8cfedd7" in refused.provenance["model.moe_expert_bias"]
    assert refused.predicted is not None
    assert "expert_tensor_parallel to 1" in str(refused.predicted.get("error"))
    timed = _gpt_oss("trainer.strategy.expert_tensor_parallel_size=1")
    parallelism = timed.scenario["parallelism"]
    assert isinstance(parallelism, dict)
    assert parallelism["expert_tensor_parallel"] == 1
    assert timed.predicted is not None
    assert "error" not in timed.predicted
    assert (timed.predicted.get("iteration_time_s") or 0) > 0
    # the config fields under Megatron-Core's names
    plain = _gpt_oss(
        "model.config.add_bias_linear=False",
        "model.config.window_size=None",
        "model.config.position_embedding_type=rope",
        "model.config.softmax_type=off-by-one",
    )
    model = _model(plain)
    assert model["moe_expert_bias"] is False
    assert model.get("window_size", 0) == 0
    assert (model["rope_type"], model["softmax_type"]) == ("rope", "off_by_one")
    assert plain.predicted is not None
    assert "error" not in plain.predicted


def test_nemo2_gpt_oss_runs_megatron_core_local_attention() -> None:
    """NeMo 2's GPTOSSConfig sets attention_backend local ("currently only local is
    supported", gpt_oss.py @ 8cfedd7), which builds Megatron-Core's DotProductAttention: the
    scenario states flash_attention false, cited; an override to a Transformer Engine backend
    reads as flash attention, and a config without the field keeps the default."""
    local = _gpt_oss("trainer.strategy.expert_tensor_parallel_size=1")
    parallelism = local.scenario["parallelism"]
    assert isinstance(parallelism, dict)
    assert parallelism["flash_attention"] is False
    assert "gpt_oss.py@8cfedd7" in local.provenance["parallelism.flash_attention"]
    for backend in ("flash", "AttnBackend.fused", "auto"):
        fused = _gpt_oss(
            "trainer.strategy.expert_tensor_parallel_size=1",
            f"model.config.attention_backend={backend}",
        )
        assert fused.scenario["parallelism"]["flash_attention"] is True  # type: ignore[index]
        assert local.predicted is not None
        assert fused.predicted is not None
        # the stored s x s scores cost memory and time
        assert local.predicted["memory_per_gpu_bytes"] > fused.predicted["memory_per_gpu_bytes"]
        assert local.predicted["iteration_time_s"] > fused.predicted["iteration_time_s"]
    llama = _gpt_oss("model=llama3_8b", "trainer.strategy.expert_model_parallel_size=1")
    assert "flash_attention" not in llama.scenario["parallelism"]  # type: ignore[operator]


def test_nemo2_add_bias_linear_of_a_dense_model_biases_no_expert() -> None:
    """``add_bias_linear`` reads as the experts' biases only where the model has experts: a
    dense config keeps no ``moe_expert_bias`` (the scenario field of routed experts)."""
    args = ("pretrain", "-y", "--factory", "llama3_8b", "model.config.add_bias_linear=true")
    assert not _read(NEMO2_READER, _nemo(*args)).has("model.moe_expert_bias")
    moe = ("pretrain", "-y", "--factory", "mixtral_8x7b", "model.config.add_bias_linear=true")
    assert _read(NEMO2_READER, _nemo(*moe)).get("model.moe_expert_bias") is True


# NeMo 1.0 (Hydra)


def test_hydra_overrides_and_interpolations() -> None:
    tree = load_config("a:\n  b: 1\n  c: ${.b}\n  d: x${a.b}y\nn: ${oc.env:HOME}\n", "c.yaml")
    config = HydraConfig.from_tree(tree)
    assert config.value("a.c") == 1
    assert config.value("a.d") == "x1y"
    assert config.lookup("n") is None
    assert "n" in config.unknown
    config.apply_override("a.b=5")
    assert config.value("a.c") == 5
    assert config.lookup("a.c") is not None
    assert "override: a.b=5" in config.lookup("a.c").source  # type: ignore[union-attr]
    config.apply_override("~a.d")
    assert not config.has("a.d")
    config.apply_override("++z.q=[1,2]")
    assert config.value("z.q") == [1, 2]
    assert split_override("--flag") is None
    assert split_override("+x=null") == ("add", "x", None)


def test_nemo1_hydra_config_defaults_group_and_overrides() -> None:
    invocation = Invocation(
        program="scripts/megatron_gpt_pretraining.py",
        args=(
            "--config-path=conf",
            "--config-name=small_gpt",
            "trainer.num_nodes=2",
            "model.tensor_model_parallel_size=2",
            "model.global_batch_size=64",
            "+model.context_parallel_size=1",
            "~model.nsys_profile",
        ),
        cwd=ROOT,
        launcher="srun",
    )
    facts = _read(NEMO1_READER, invocation)
    assert facts.get("hardware.num_gpus") == 8
    assert facts.get("hardware.gpus_per_node") == 4
    assert facts.get("parallelism.tensor_parallel") == 2
    assert facts.get("parallelism.data_parallel") == 4
    assert facts.get("launch.gradient_accumulation") == 8
    assert facts.get("model.ffn_hidden_size") == 4096  # null -> 4 x hidden
    assert facts.get("model.num_query_groups") == 4
    assert facts.get("model.activation") == "swiglu"
    assert facts.get("model.untie_embeddings") is True
    assert facts.get("parallelism.sequence_parallel") is True  # from the defaults group
    assert facts.get("parallelism.precision") == "bf16"
    assert facts.get("parallelism.zero_stage") == 1
    assert facts.get("launch.padded_vocab_size") == 50432
    assert facts.get("training.train_iters") == 2000
    assert facts.values["model.seq_length"].source == "small_gpt.yaml:17"


def test_nemo1_falls_back_to_published_defaults() -> None:
    invocation = Invocation(
        program="examples/nlp/language_modeling/megatron_gpt_pretraining.py",
        args=("trainer.devices=2", "model.encoder_seq_length=1024"),
        cwd=ROOT,
    )
    facts = _read(NEMO1_READER, invocation)
    assert facts.get("model.num_layers") == 12
    assert facts.get("model.seq_length") == 1024
    assert facts.get("parallelism.precision") == "fp16"
    assert facts.get("hardware.num_gpus") == 2
    assert "9d86acd" in facts.values["model.num_layers"].source
    assert any("published defaults" in note for note in facts.notes)


def test_nemo1_moe_routing_keys_added_to_the_model_config() -> None:
    invocation = Invocation(
        program="examples/nlp/language_modeling/megatron_gpt_pretraining.py",
        args=(
            "+model.num_moe_experts=8",
            "+model.moe_router_topk=2",
            "+model.moe_expert_capacity_factor=1.25",
            "+model.moe_pad_expert_input_to_capacity=true",
            "+model.moe_router_force_load_balancing=true",
        ),
        cwd=ROOT,
    )
    facts = _read(NEMO1_READER, invocation)
    assert facts.get("model.num_experts") == 8
    assert facts.get("model.moe_expert_capacity_factor") == 1.25
    assert facts.get("model.moe_pad_expert_input_to_capacity") is True
    assert facts.get("model.moe_router_force_load_balancing") is True


def test_nemo1_overrides_hydra_refuses_are_noted_and_read() -> None:
    invocation = Invocation(
        program="scripts/megatron_gpt_pretraining.py",
        args=(
            "--config-path=conf",
            "--config-name=small_gpt",
            "model.num_moe_experts=8",  # not in the config: Hydra asks for +
            "+model.global_batch_size=64",  # in the config: Hydra refuses to add it
            "+model.moe_router_topk=2",
            "model.tensor_model_parallel_size=2",
        ),
        cwd=ROOT,
    )
    facts = _read(NEMO1_READER, invocation)
    refused = [note for note in facts.notes if "Hydra refuses" in note]
    assert len(refused) == 2, facts.notes
    assert "write +model.num_moe_experts=8" in refused[0]
    assert "write model.global_batch_size=64" in refused[1]
    assert facts.get("model.num_experts") == 8
    assert facts.get("parallelism.global_batch_size") == 64


def test_nemo1_unknown_config_is_an_error_naming_the_file() -> None:
    invocation = Invocation(
        program="scripts/megatron_gpt_pretraining.py",
        args=("--config-name", "nowhere"),
        cwd=ROOT,
    )
    with pytest.raises(SourceError, match=r"nowhere\.yaml"):
        _read(NEMO1_READER, invocation)


def test_nemo1_batch_script_end_to_end() -> None:
    launch = Launch(batch_script=(support.DATA / "nemo" / "gpt1.sbatch").read_text(), work_dir=ROOT)
    description = describe_launch(launch, _files(), gpu="h100-sxm", predict=False)
    assert description.described_by == "nemo1"
    assert description.scenario["model"]["num_layers"] == 16
    assert description.launch["gradient_accumulation"] == 8


@pytest.mark.parametrize(("strategy", "stage"), support.MEGATRON_FSDP_STRATEGY_STAGES)
def test_nemo2_megatron_fsdp_runs_the_zero_stage_of_its_sharding_strategy(
    strategy: str, stage: int
) -> None:
    override = f"trainer.strategy.ddp.data_parallel_sharding_strategy={strategy}"
    for flag in ("trainer.strategy.fsdp=megatron", "trainer.strategy.ddp.use_megatron_fsdp=True"):
        facts = _read(NEMO2_READER, _nemo("pretrain", "--factory", "mixtral_8x7b", flag, override))
        assert facts.get("parallelism.zero_stage") == stage
        assert facts.get("parallelism.megatron_fsdp") is True
        assert facts.values["parallelism.zero_stage"].source == f"override: {override}"
    # the strategy alone, without Megatron-FSDP, leaves the distributed optimizer's stage
    alone = _read(NEMO2_READER, _nemo("pretrain", "--factory", "mixtral_8x7b", override))
    assert not alone.has("parallelism.zero_stage")
    assert not alone.has("parallelism.megatron_fsdp")


def test_nemo2_megatron_fsdp_takes_the_recipes_strategy_else_megatron_cores_default() -> None:
    fsdp = "trainer.strategy.fsdp=megatron"
    # llama3_8b's trainer() (and the 16k one, which calls it) sets optim_grads_params
    for recipe in ("llama3_8b", "llama3_8b_16k", "qwen3_8b"):
        facts = _read(NEMO2_READER, _nemo("pretrain", "--factory", recipe, fsdp))
        assert facts.get("parallelism.zero_stage") == 3
        assert f"catalog:{recipe}" in facts.values["parallelism.zero_stage"].source
    # mixtral_8x7b's sets none, nor does finetune_default.py: Megatron-Core's no_shard
    for command, recipe in (("pretrain", "mixtral_8x7b"), ("finetune", "llama3_8b")):
        facts = _read(NEMO2_READER, _nemo(command, "--factory", recipe, fsdp))
        assert facts.get("parallelism.zero_stage") == 0
        assert "parallelism.zero_stage" in facts.assumed
        assert (
            "distributed_data_parallel_config.py" in facts.values["parallelism.zero_stage"].source
        )
        assert any("default no_shard assumed (ZeRO 0)" in note for note in facts.notes)
    torch_fsdp = _read(
        NEMO2_READER, _nemo("pretrain", "-f", "llama3_8b", "trainer.strategy.fsdp=pytorch")
    )
    assert not torch_fsdp.has("parallelism.megatron_fsdp")
    assert any("NotImplementedError" in note for note in torch_fsdp.notes)
