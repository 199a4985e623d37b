"""The scenario format (``docs/scenario-format.md``) as pydantic models, one per section.

``ScenarioSchema`` and its sections ``ModelSection``, ``HardwareSection``,
``ParallelismSection`` and ``TrainingSection`` state every field of the format with its type,
meaning and unit; they are the API's request model for scenarios (``/openapi.json``) and the
source of the field tables in ``docs/scenario-format.md``. Unknown fields are refused
(``extra="forbid"``). ``parse_scenario`` validates every scenario document with them, by the
format's rules:

- a numeric field takes a number or text holding a decimal or scientific literal
  (``planner.scenario.numbers.number_or_value``); an integer field also takes an integral
  float (``1e3``); ``true``/``false`` are never numbers;
- an enumerated field takes its value whatever the case, with ``-`` for ``_``;
- an absent field (or ``null``) is ``None``: the parser fills the documented default.

The models check each field on its own; the defaults and the rules across fields
(``tp·pp·cp·dp = num_gpus``, a preset or the model's sizes, ...) are ``parse_scenario``'s and
the specs'.

The doc's tables are written by ``planner.scenario.schema_doc``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, WithJsonSchema

from planner.scenario.numbers import (
    LITERAL_PATTERN,
    MAX_LITERAL_CHARS,
    integer_or_value,
    number_or_value,
)
from planner.specs.hardware import Precision
from planner.specs.model import Activation, MoETokenDispatcher, RopeType, SoftmaxType
from planner.specs.parallelism import (
    Fp8Recipe,
    MainParamsDtype,
    OptimizerDtype,
    OptimizerImplementation,
    Recompute,
    RecomputeModule,
)
from planner.specs.scenario import CudaGraphs, Framework, LoraTarget, TrainingMode

__all__ = [
    "NUMBER_TEXT_PATTERN",
    "SECTIONS",
    "HardwareSection",
    "ModelSection",
    "ParallelismSection",
    "ScenarioSchema",
    "TrainingSection",
    "choice_text",
]

NUMBER_TEXT_PATTERN = rf"^\s*{LITERAL_PATTERN}\s*$"
"""Text a numeric field takes (``planner.scenario.numbers``: blanks around are ignored)."""
_NUMBER_TEXT = {"type": "string", "pattern": NUMBER_TEXT_PATTERN, "maxLength": MAX_LITERAL_CHARS}


def _whole_number(value: object) -> object:
    """A list item of an integer field: ``integer_or_value`` for numbers (an integral float
    within ``±MAX_INTEGER`` as its ``int``, an integer beyond it as a float, which the field
    refuses); text unchanged (list items take no numeric text)."""
    return value if isinstance(value, str) else integer_or_value(value)


Integer = Annotated[
    int,
    Strict(),
    BeforeValidator(integer_or_value),
    WithJsonSchema({"anyOf": [{"type": "integer"}, _NUMBER_TEXT]}),
]
"""An integer field: an integer, an integral float, or text holding one."""
WholeNumber = Annotated[int, Strict(), BeforeValidator(_whole_number)]
"""An integer inside a list (``moe_layer_freq``, ``pipeline_layout``): a number, not text."""
Number = Annotated[
    float,
    Strict(),
    BeforeValidator(number_or_value),
    WithJsonSchema({"anyOf": [{"type": "number"}, _NUMBER_TEXT]}),
]
"""A real-valued field: a number or text holding one."""
Flag = Annotated[bool, Strict()]
"""``true`` or ``false`` (not ``1``, not ``"yes"``)."""


def _name_text(value: object) -> object:
    """A scenario's name as text: a number (or ``true``/``false``) as Python writes it."""
    return str(value) if isinstance(value, int | float) else value


Name = Annotated[
    str,
    BeforeValidator(_name_text),
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "number"}]}),
]
"""A scenario's name: text, or a number taken as its text."""


def choice_text(value: object) -> object:
    """Text as an enumeration takes it: blanks stripped, lower case, ``-`` as ``_`` (the
    values are lower-case ``snake_case``); anything else unchanged."""
    if isinstance(value, str):
        return value.strip().lower().replace("-", "_")
    return value


ActivationChoice = Annotated[Activation, BeforeValidator(choice_text)]
DispatcherChoice = Annotated[MoETokenDispatcher, BeforeValidator(choice_text)]
SoftmaxChoice = Annotated[SoftmaxType, BeforeValidator(choice_text)]
RopeChoice = Annotated[RopeType, BeforeValidator(choice_text)]
RecomputeChoice = Annotated[Recompute, BeforeValidator(choice_text)]
RecomputeModuleChoice = Annotated[RecomputeModule, BeforeValidator(choice_text)]
PrecisionChoice = Annotated[Precision, BeforeValidator(choice_text)]
Fp8RecipeChoice = Annotated[Fp8Recipe, BeforeValidator(choice_text)]
OptimizerDtypeChoice = Annotated[OptimizerDtype, BeforeValidator(choice_text)]
MainParamsDtypeChoice = Annotated[MainParamsDtype, BeforeValidator(choice_text)]
OptimizerImplementationChoice = Annotated[OptimizerImplementation, BeforeValidator(choice_text)]
FrameworkChoice = Annotated[Framework, BeforeValidator(choice_text)]
ModeChoice = Annotated[TrainingMode, BeforeValidator(choice_text)]
CudaGraphsChoice = Annotated[CudaGraphs, BeforeValidator(choice_text)]
LoraTargetChoice = Annotated[LoraTarget, BeforeValidator(choice_text)]
"""Fields holding one of an enumeration's values (case and ``-``/``_`` free)."""


class _Section(BaseModel):
    """A section of a scenario: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _field(meaning: str, default: str | None = None) -> Any:
    """An optional field (absent: ``None``) described by ``meaning`` and, when the parser
    fills one, its documented ``default``."""
    text = meaning if default is None else f"{meaning}. Default: {default}"
    return Field(default=None, description=text)


class ModelSection(_Section):
    """``model``: the transformer (Megatron-LM argument names). Either ``preset`` or the five
    sizes ``num_layers``, ``hidden_size``, ``num_attention_heads``, ``vocab_size`` and
    ``seq_length`` are required; fields given override the preset's."""

    preset: str | None = _field(
        "Catalog model to start from (see Model presets); the fields given override its values"
    )
    num_layers: Integer | None = _field("Transformer layers", "the preset's; required without")
    hidden_size: Integer | None = _field("Model width", "the preset's; required without")
    num_attention_heads: Integer | None = _field(
        "Attention (query) heads", "the preset's; required without"
    )
    num_query_groups: Integer | None = _field("Key/value heads (GQA/MQA)", "`num_attention_heads`")
    kv_channels: Integer | None = _field("Per-head width", "`hidden_size / num_attention_heads`")
    ffn_hidden_size: Integer | None = _field(
        "Dense MLP width (per expert for MoE when `moe_ffn_hidden_size` is absent)",
        "`4 · hidden_size`",
    )
    vocab_size: Integer | None = _field("Vocabulary size, tokens", "the preset's; required without")
    seq_length: Integer | None = _field("Tokens per sequence", "the preset's; required without")
    activation: ActivationChoice | None = _field("MLP activation", "`gelu`")
    untie_embeddings: Flag | None = _field(
        "Input embedding and output layer are separate weights", "`true`"
    )
    num_experts: Integer | None = _field("MoE: routed experts; 0 = dense", "`0`")
    moe_router_topk: Integer | None = _field("MoE: experts per token", "`2` for MoE")
    moe_ffn_hidden_size: Integer | None = _field(
        "MoE: width of one routed expert", "`ffn_hidden_size`"
    )
    num_shared_experts: Integer | None = _field("MoE: always-active experts", "`0`")
    num_dense_layers: Integer | None = _field("MoE: leading layers that are dense", "`0`")
    moe_layer_freq: WholeNumber | list[WholeNumber] | None = _field(
        "Megatron `--moe-layer-freq`: an int `N` (every `N`-th layer is MoE) or one 0/1 per layer",
        "`1`",
    )
    moe_shared_expert_intermediate_size: Integer | None = _field(
        "Total width of the shared experts", "`num_shared_experts · moe_ffn_hidden_size`"
    )
    moe_router_num_groups: Integer | None = _field(
        "Group-limited routing (DeepSeek-V3 node-limited routing): expert groups",
        "`0` (unrestricted)",
    )
    moe_router_group_topk: Integer | None = _field(
        "Group-limited routing: groups each token's experts come from", "`0` (unrestricted)"
    )
    moe_token_dispatcher_type: DispatcherChoice | None = _field(
        "MoE token dispatcher (`flex`: DeepEP)", "`alltoall`"
    )
    moe_expert_capacity_factor: Number | None = _field(
        "Tokens beyond `factor ×` an expert's even share are dropped", "none (dropless)"
    )
    moe_pad_expert_input_to_capacity: Flag | None = _field(
        "Drop-and-pad: each expert's input padded to its capacity (needs a capacity factor)",
        "`false`",
    )
    moe_imbalance_factor: Number | None = _field(
        "Tokens on the busiest expert rank over the average (dropless), ratio",
        "the efficiency model's documented default",
    )
    moe_grouped_gemm: Flag | None = _field("Local experts in one grouped GEMM", "`false`")
    moe_router_force_load_balancing: Flag | None = _field(
        "Every expert gets its even share (benchmarks' balanced gates)", "`false`"
    )
    moe_router_round_robin: Flag | None = _field(
        "No learned router: token `t` goes to the `k` consecutive experts from `k·t` "
        "(NeMo Automodel's fake balanced gate); every expert its even share",
        "`false`",
    )
    overlap_moe_expert_parallel_comm: Flag | None = _field(
        "The token exchange hides behind another microbatch's compute", "`false`"
    )
    moe_expert_bias: Flag | None = _field(
        "The routed experts' up and down projections carry bias vectors (GPT-OSS); under "
        "Megatron-LM and NeMo they need `parallelism.expert_tensor_parallel` 1 (Megatron-Core "
        "refuses biased experts split by expert tensor parallelism, whose degree defaults to "
        "`tensor_parallel`)",
        "`false`",
    )
    activation_func_clamp_value: Number | None = _field(
        "The gated activation's inputs clamped to this value (GPT-OSS: 7.0); 0 = none", "`0`"
    )
    multi_latent_attention: Flag | None = _field(
        "DeepSeek-V2/V3 multi-latent attention (with the five fields below)", "`false`"
    )
    q_lora_rank: Integer | None = _field("MLA: query latent rank; 0 = no query latent", "`0`")
    kv_lora_rank: Integer | None = _field("MLA: key/value latent rank", "`32` with MLA")
    qk_head_dim: Integer | None = _field("MLA: query/key head width", "`128` with MLA")
    qk_pos_emb_head_dim: Integer | None = _field(
        "MLA: rotary part of the query/key head width", "`64` with MLA"
    )
    v_head_dim: Integer | None = _field("MLA: value head width", "`128` with MLA")
    window_size: Integer | None = _field("Sliding-window attention, tokens; 0 = full causal", "`0`")
    window_attn_skip_freq: Integer | None = _field(
        "One full-attention layer per `N` sliding-window layers; 0 = all sliding", "`0`"
    )
    rope_type: RopeChoice | None = _field(
        "Rotary embedding: `rope`, or `yarn` (YaRN-scaled, GPT-OSS)", "`rope`"
    )
    softmax_type: SoftmaxChoice | None = _field(
        "Attention softmax: `vanilla`, `off_by_one` or `learnable` (a learnt sink logit per "
        "head, GPT-OSS)",
        "`vanilla`",
    )
    qk_layernorm: Flag | None = _field(
        "Each query and key head normalised before the rotary embedding (Qwen3's QK-norm); "
        "under MLA, the latent norms MLA always has",
        "`false`",
    )
    mtp_num_layers: Integer | None = _field("Multi-token-prediction modules (DeepSeek-V3)", "`0`")


class HardwareSection(_Section):
    """``hardware``: the GPUs the job runs on."""

    gpu: str = Field(
        description="GPU catalog key or alias (see GPU catalog keys), e.g. `h100-sxm`. Required"
    )
    num_gpus: Integer = Field(description="GPUs of the job. Required")
    gpus_per_node: Integer | None = _field("GPUs per node", "from the catalog")
    nvlink_domain_size: Integer | None = _field(
        "GPUs in one scale-up (NVLink) domain; 72 for GB200/GB300 NVL72", "from the catalog"
    )
    inter_node_bandwidth_gbit_per_s: Number | None = _field(
        "Scale-out bandwidth per GPU, one direction, Gbit/s", "from the catalog"
    )
    memory_headroom_gib: Number | None = _field(
        "Memory a layout must leave free beyond its predicted peak to count as fitting "
        "(allocator fragmentation, NCCL buffers, CUDA context), GiB",
        "1 GiB",
    )


class ParallelismSection(_Section):
    """``parallelism``: the layout and the batch."""

    tensor_parallel: Integer | None = _field("Tensor-parallel degree", "`1`")
    pipeline_parallel: Integer | None = _field("Pipeline-parallel degree", "`1`")
    context_parallel: Integer | None = _field("Context-parallel degree", "`1`")
    expert_parallel: Integer | None = _field("Expert-parallel degree (MoE)", "`1`")
    data_parallel: Integer | None = _field(
        "Data-parallel degree", "`num_gpus / (tensor · pipeline · context)`"
    )
    virtual_pipeline: Integer | None = _field(
        "Interleaved 1F1B chunks per pipeline rank", "`1`, or from `pipeline_layout`"
    )
    sequence_parallel: Flag | None = _field(
        "Megatron sequence parallelism",
        "`true` when `tensor_parallel` > 1; `false` under NeMo Automodel (its own default, "
        "for every model; its MoE plan refuses it)",
    )
    micro_batch_size: Integer | None = _field("Sequences per microbatch", "`1`")
    global_batch_size: Integer = Field(description="Sequences per iteration. Required")
    recompute: RecomputeChoice | None = _field("Activation recompute", "`none`")
    recompute_modules: RecomputeModuleChoice | list[RecomputeModuleChoice] | None = _field(
        "Megatron `--recompute-modules` with `recompute: selective` (one name or a list)",
        "the attention core",
    )
    recompute_num_layers: Integer | None = _field(
        "With `recompute: full`, only the first `N` transformer layers of each pipeline model "
        "chunk are recomputed; the others keep their activations (Megatron `--recompute-method "
        "block --recompute-num-layers N`)",
        "every layer",
    )
    zero_stage: Integer | None = _field("0 none, 1 distributed optimizer, 2, 3 = FSDP", "`1`")
    precision: PrecisionChoice | None = _field("Training precision", "`bf16`")
    fp8_recipe: Fp8RecipeChoice | None = _field("Megatron `--fp8-recipe`", "the precision's recipe")
    flash_attention: Flag | None = _field("The `s × s` attention scores are never stored", "`true`")
    grad_reduce_in_fp32: Flag | None = _field(
        "Gradients accumulated and reduced in fp32", "the framework's default for the precision"
    )
    overlap_grad_reduce: Flag | None = _field(
        "The data-parallel reduction hides under the backward (`false`: exposed, as "
        "Megatron-LM without `--overlap-grad-reduce`)",
        "`true`",
    )
    overlap_param_gather: Flag | None = _field(
        "The data-parallel parameter gather hides under the forward", "`true`"
    )
    tp_comm_overlap: Flag | None = _field(
        "Tensor-parallel collectives split into chunks under the GEMMs (Megatron "
        "`--tp-comm-overlap`, Transformer Engine userbuffers; torchtitan "
        "`enable_async_tensor_parallel`, torch.compile's micro-pipelined TP, as NeMo "
        "Automodel's, which refuses it for MoE models with `tensor_parallel` > 1 and needs "
        "`sequence_parallel` with it for dense ones; Megatron-LM needs `sequence_parallel` "
        "with it, so never at `tensor_parallel` 1; Hopper and later)",
        "the framework's default",
    )
    recompute_early_stop: Flag | None = _field(
        "With `recompute: full`, the recomputation stops once the tensors the backward needs "
        "are rebuilt, skipping each layer's last GEMM (non-reentrant `torch.utils.checkpoint`, "
        "PyTorch 2.1 and later)",
        "the framework's default",
    )
    separate_qkv_projections: Flag | None = _field(
        "The attention's query, key and value projections are three GEMMs of the layer's "
        "input, not one fused QKV GEMM (torchtitan `wq` / `wk` / `wv`, before "
        "pytorch/torchtitan@3396a4b37 made `fuse_qkv` the default for Llama 3, Qwen3 and "
        "GPT-OSS); not under multi-latent attention",
        "the framework's: `false` (fused) for every framework",
    )
    separate_gate_up_projections: Flag | None = _field(
        "A gated MLP's gate and up projections are two GEMMs of the same input, not one fused "
        "GEMM (torchtitan `FeedForward.w1` / `w3`)",
        "the framework's: `true` for torchtitan, `false` (fused) for the others",
    )
    fp8_tp_all_gather: Flag | None = _field(
        "Under `fp8_recipe: tensorwise` with `sequence_parallel`, the tensor-parallel layers' "
        "all-gathers move FP8, one byte per element (torchao's float8 tensor-parallel styles, "
        "which torchtitan applied before pytorch/torchtitan@1786292db, 2026-04-27); the "
        "reduce-scatters stay 16-bit",
        "the framework's: `false` for every framework",
    )
    fp8_param_gather: Flag | None = _field(
        "The transformer weights are kept in the low-precision recipe's format, the optimizer "
        "keeping the master (Megatron `--fp8-param-gather`); precision `fp8` or `mxfp8`",
        "`false`",
    )
    main_params_dtype: MainParamsDtypeChoice | None = _field(
        "The parameters Adam updates: `fp32` a 4-byte fp32 master beside the 16-bit weights "
        "(under PyTorch FSDP the fp32 shard itself), `fp16` a 2-byte fp16 master beside them "
        "(Megatron `--use-precision-aware-optimizer --main-params-dtype fp16`), `bf16` no "
        "master: the bf16 weights themselves (pure bf16: LLaMA-Factory `pure_bf16`, torchtune "
        "`dtype: bf16`)",
        "the framework's",
    )
    exp_avg_dtype: OptimizerDtypeChoice | None = _field(
        "Storage dtype of Adam's first moment (Megatron `--exp-avg-dtype`)", "the framework's"
    )
    exp_avg_sq_dtype: OptimizerDtypeChoice | None = _field(
        "Storage dtype of Adam's second moment (Megatron `--exp-avg-sq-dtype`)",
        "the framework's",
    )
    store_param_remainders: Flag | None = _field(
        "An fp32 master of bf16 weights is kept as its low 16 bits, the bf16 weight holding the "
        "rest (Megatron-Core `OptimizerConfig.store_param_remainders` under the precision-aware "
        "optimizer, NeMo's distributed Adam); not under ZeRO-3",
        "the framework's",
    )
    optimizer_implementation: OptimizerImplementationChoice | None = _field(
        "How PyTorch's Adam/AdamW runs its step (`torch.optim.AdamW(foreach=, fused=)`, "
        "torchtitan `optimizer.implementation`): `foreach` allocates `sqrt(exp_avg_sq)` for "
        "every owned parameter at once (one second moment's bytes each, counted at the "
        "optimizer step), `fused` and `for_loop` no such list",
        "the framework's: `foreach` for NeMo Automodel at `tensor_parallel` 1; no list for "
        "the others (torchtitan: `fused`, its default since pytorch/torchtitan@6e4988550, "
        "2025-02-24)",
    )
    megatron_fsdp: Flag | None = _field(
        "The data-parallel sharding (`zero_stage`) is Megatron-FSDP's (Megatron-LM "
        "`--use-megatron-fsdp` at a `--data-parallel-sharding-strategy`, Megatron-Bridge "
        "`ddp.use_megatron_fsdp`): Megatron-LM then takes `fp8_param_gather`, and "
        "Megatron-Core's optimizer the precision-aware dtypes and a bf16 master, at every stage",
        "`false`",
    )
    activation_offload_layers: Integer | None = _field(
        "The first `N` transformer layers' saved activations go to host memory during the "
        "forward and come back for the backward (Megatron-Core `cpu_offloading_num_layers`, "
        "activations only); below the model's layers, without pipeline parallelism or recompute",
        "`0`",
    )
    expert_tensor_parallel: Integer | None = _field(
        "Ranks each expert's FFN is split over (MoE parallel folding: the expert groups fold "
        "into the stage's `tensor · context · data` ranks)",
        "`tensor_parallel` (or the largest divisor of it that fits); 1 under NeMo Automodel, "
        "which keeps the routed experts whole (a larger value is refused)",
    )
    pipeline_layout: str | list[WholeNumber] | list[str] | None = _field(
        'Megatron `--pipeline-model-parallel-layout` string (`"Et*3|(tt|)*29,m|L"`, or a list '
        "of stage strings) or the transformer layers per virtual stage",
        "an even split",
    )
    decoder_first_pipeline_num_layers: Integer | None = _field(
        "Layers of the first pipeline rank", "an even split"
    )
    decoder_last_pipeline_num_layers: Integer | None = _field(
        "Layers of the last pipeline rank", "an even split"
    )
    account_for_embedding_in_pipeline_split: Flag | None = _field(
        "The embedding takes one layer's place in the pipeline split", "`false`"
    )
    account_for_loss_in_pipeline_split: Flag | None = _field(
        "The loss takes one layer's place in the pipeline split", "`false`"
    )
    pipeline_batch_size: Integer | None = _field(
        "Sequences per data-parallel rank in one run of the pipeline schedule, each run with its "
        "own fill and drain (NeMo Automodel: `step_scheduler.local_batch_size`; torchtitan "
        "under pipeline parallelism: `training.local_batch_size`; each runs one schedule per "
        "gradient-accumulation step)",
        "`global_batch_size / data_parallel` (one schedule per iteration, as Megatron)",
    )


class TrainingSection(_Section):
    """``training`` (optional): the framework and the run."""

    framework: FrameworkChoice | None = _field("Training framework", "`megatron`")
    total_tokens: Number | None = _field("Tokens to train on, for `time_to_train_s`", "none")
    train_iters: Integer | None = _field(
        "Optimizer steps (Megatron `--train-iters`); with the global batch gives "
        "`time_to_train_s` (`total_tokens` wins when both are given)",
        "none",
    )
    mode: ModeChoice | None = _field(
        "Training mode: `sft` is full fine-tuning, `lora` a frozen base with adapters",
        "`pretrain`",
    )
    lora_rank: Integer | None = _field("LoRA adapter rank", "`32` (NeMo's LoRA recipe)")
    lora_targets: LoraTargetChoice | list[LoraTargetChoice] | None = _field(
        "Linear layers LoRA adapts (one name or a list)", "all four (NeMo's LoRA recipe)"
    )
    packed_sample_length: Integer | None = _field(
        "Mean tokens of the samples packed into one sequence (each attends only within itself)",
        "one sample per sequence",
    )
    framework_version: Annotated[str, Strict()] | None = _field(
        "The framework's release, as text (a NeMo container tag such as `'25.11'`, a package "
        "version such as `'0.2.0'`; quoted, since a number drops trailing zeros). The model "
        "does not read it; observed runs are calibrated per release",
        "not stated",
    )
    cuda_graphs: CudaGraphsChoice | None = _field(
        "What the training loop replays as CUDA graphs (Megatron `--cuda-graph-impl` / "
        "`--cuda-graph-scope`): `per_layer` graphs of layers or parts of them (`attn`, "
        "`moe_router`, ...), `full_iteration` one graph of the whole forward and backward. Only "
        "`full_iteration` changes the prediction: a dropless MoE layer no longer waits for the "
        "host to issue its experts",
        "`none`",
    )
    compiled_loss: Flag | None = _field(
        "The cross-entropy runs under torch.compile (torchtitan `compile.components` with "
        "`loss`; `training.compile` from April to August 2025): it keeps the 16-bit logits "
        "instead of an fp32 log-softmax and moves fewer bytes",
        "`false`",
    )


class ScenarioSchema(BaseModel):
    """A scenario document: ``model``, ``hardware`` and ``parallelism`` are required,
    ``training`` and ``name`` optional; no other top-level field."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="Scenario")

    name: Name | None = Field(default=None, description="Free text, echoed back in the output")
    model: ModelSection
    hardware: HardwareSection
    parallelism: ParallelismSection
    training: TrainingSection | None = None


SECTIONS: dict[str, type[BaseModel]] = {
    "model": ModelSection,
    "hardware": HardwareSection,
    "parallelism": ParallelismSection,
    "training": TrainingSection,
}
"""The section models by their key in a scenario document."""
