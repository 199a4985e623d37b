"""The scenario format (``docs/scenario-format.md``) as pydantic models, one per section.

``ScenarioSchema`` and its sections ``ModelSection``, ``HardwareSection``,
``ParallelismSection`` and ``TrainingSection`` state every field of the format with its type,
meaning and unit; they are the API's request model for scenarios (``/openapi.json``) and the
source of the field tables in ``docs/scenario-format.md``. Unknown fields are refused
(``extra="forbid"``). Values are read by the format's rules, as ``parse_scenario`` reads them:

- a numeric field takes a number or text holding a decimal or scientific literal
  (``planner.scenario.numbers.number_or_value``); an integer field also takes an integral
  float (``1e3``); ``true``/``false`` are never numbers;
- an enumerated field takes its value whatever the case, with ``-`` for ``_``;
- an absent field (or ``null``) is ``None``: the parser fills the documented default.

The models check each field on its own; rules across fields (``tp·pp·cp·dp = num_gpus``, a
preset or the model's sizes, ...) and the defaults are ``parse_scenario``'s.

    python -m planner.scenario.schema --markdown          # rewrite the doc's field tables
    python -m planner.scenario.schema --markdown --check  # exit 1 when the doc is stale
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, WithJsonSchema

from planner.scenario.numbers import (
    LITERAL_PATTERN,
    MAX_LITERAL_CHARS,
    integer_or_value,
    number_or_value,
)
from planner.specs.hardware import Precision
from planner.specs.model import Activation, MoETokenDispatcher
from planner.specs.parallelism import Fp8Recipe, Recompute, RecomputeModule
from planner.specs.scenario import Framework, LoraTarget, TrainingMode

__all__ = [
    "COMMAND",
    "DOC_PATH",
    "NUMBER_TEXT_PATTERN",
    "SECTIONS",
    "HardwareSection",
    "ModelSection",
    "ParallelismSection",
    "ScenarioSchema",
    "TrainingSection",
    "markdown_tables",
    "render_doc",
]

NUMBER_TEXT_PATTERN = rf"^\s*{LITERAL_PATTERN}\s*$"
"""Text a numeric field takes (``planner.scenario.numbers``: blanks around are ignored)."""
_NUMBER_TEXT = {"type": "string", "pattern": NUMBER_TEXT_PATTERN, "maxLength": MAX_LITERAL_CHARS}


def _integer(value: object) -> object:
    """An integral float as its ``int`` (``1e3``); anything else unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Integer = Annotated[
    int,
    Strict(),
    BeforeValidator(integer_or_value),
    WithJsonSchema({"anyOf": [{"type": "integer"}, _NUMBER_TEXT]}),
]
"""An integer field: an integer, an integral float, or text holding one."""
WholeNumber = Annotated[int, Strict(), BeforeValidator(_integer)]
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


def _enum_value(value: object) -> object:
    """Text as an enumeration takes it: blanks stripped, lower case, ``-`` as ``_`` (the
    values are lower-case ``snake_case``)."""
    if isinstance(value, str):
        return value.strip().lower().replace("-", "_")
    return value


ActivationChoice = Annotated[Activation, BeforeValidator(_enum_value)]
DispatcherChoice = Annotated[MoETokenDispatcher, BeforeValidator(_enum_value)]
RecomputeChoice = Annotated[Recompute, BeforeValidator(_enum_value)]
RecomputeModuleChoice = Annotated[RecomputeModule, BeforeValidator(_enum_value)]
PrecisionChoice = Annotated[Precision, BeforeValidator(_enum_value)]
Fp8RecipeChoice = Annotated[Fp8Recipe, BeforeValidator(_enum_value)]
FrameworkChoice = Annotated[Framework, BeforeValidator(_enum_value)]
ModeChoice = Annotated[TrainingMode, BeforeValidator(_enum_value)]
LoraTargetChoice = Annotated[LoraTarget, BeforeValidator(_enum_value)]
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
    moe_imbalance_factor: Number | None = _field(
        "Tokens on the busiest expert rank over the average (dropless), ratio",
        "the efficiency model's documented default",
    )
    moe_grouped_gemm: Flag | None = _field("Local experts in one grouped GEMM", "`false`")
    moe_router_force_load_balancing: Flag | None = _field(
        "Every expert gets its even share (benchmarks' balanced gates)", "`false`"
    )
    overlap_moe_expert_parallel_comm: Flag | None = _field(
        "The token exchange hides behind another microbatch's compute", "`false`"
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
        "Megatron sequence parallelism", "`true` when `tensor_parallel` > 1"
    )
    micro_batch_size: Integer | None = _field("Sequences per microbatch", "`1`")
    global_batch_size: Integer = Field(description="Sequences per iteration. Required")
    recompute: RecomputeChoice | None = _field("Activation recompute", "`none`")
    recompute_modules: RecomputeModuleChoice | list[RecomputeModuleChoice] | None = _field(
        "Megatron `--recompute-modules` with `recompute: selective` (one name or a list)",
        "the attention core",
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
    expert_tensor_parallel: Integer | None = _field(
        "Ranks each expert's FFN is split over (MoE parallel folding: the expert groups fold "
        "into the stage's `tensor · context · data` ranks)",
        "`tensor_parallel` (or the largest divisor of it that fits)",
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


class ScenarioSchema(BaseModel):
    """A scenario document: ``model``, ``hardware`` and ``parallelism`` are required,
    ``training`` and ``name`` optional; no other top-level field."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="Scenario")

    name: str | int | float | None = Field(
        default=None, description="Free text, echoed back in the output"
    )
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

# ---------------------------------------------------------------------------- the doc's tables

DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "scenario-format.md"
"""The public contract whose field tables come from these models."""
BEGIN = "<!-- BEGIN field tables: python -m planner.scenario.schema --markdown -->"
END = "<!-- END field tables -->"
COMMAND = "python -m planner.scenario.schema --markdown"


def _type_text(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    """A JSON-schema property as the doc's type column (numeric text is the format's rule for
    every number, stated once in the doc's prose, so it is not repeated per field)."""
    if "$ref" in prop:
        return _type_text(defs[prop["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in prop:
        parts = [
            p
            for p in prop["anyOf"]
            if p.get("type") != "null" and p.get("pattern") != NUMBER_TEXT_PATTERN
        ]
        texts = list(dict.fromkeys(_type_text(p, defs) for p in parts))
        lists = [t for t in texts if f"list of ({t})" in texts]
        return " or ".join(
            f"{t} (or a list of them)" if t in lists else t
            for t in texts
            if not any(t == f"list of ({one})" for one in lists)
        )
    if "enum" in prop:
        return "one of " + ", ".join(f"`{v}`" for v in prop["enum"])
    kind = prop.get("type")
    if kind == "array":
        return f"list of ({_type_text(prop['items'], defs)})"
    return {"integer": "integer", "number": "number", "boolean": "true/false"}.get(
        str(kind), "text"
    )


def markdown_tables() -> str:
    """The field tables of ``docs/scenario-format.md``: one per section, every field with its
    type, meaning, unit and default, from the models' JSON schema."""
    lines: list[str] = []
    for key, model in SECTIONS.items():
        schema = model.model_json_schema()
        defs = schema.get("$defs", {})
        doc = " ".join(str(model.__doc__).split()).replace("``", "`")
        lines += [f"### `{key}`", "", doc, ""]
        lines += ["| field | type | meaning |", "| --- | --- | --- |"]
        for name, prop in schema["properties"].items():
            meaning = str(prop.get("description", "")).replace("|", "\\|")
            lines.append(f"| `{name}` | {_type_text(prop, defs)} | {meaning} |")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def render_doc(text: str) -> str:
    """``text`` (the doc) with the tables between its ``BEGIN``/``END`` markers replaced."""
    pattern = re.compile(re.escape(BEGIN) + r"\n.*?" + re.escape(END), re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"{DOC_PATH.name} lacks the markers {BEGIN!r} ... {END!r}")
    return pattern.sub(lambda _: f"{BEGIN}\n\n{markdown_tables()}\n{END}", text, count=1)


def main(argv: list[str] | None = None) -> int:
    """``--markdown``: rewrite the doc's field tables; with ``--check``: exit 1 when they are
    stale, naming the command that updates them."""
    parser = argparse.ArgumentParser(prog="python -m planner.scenario.schema")
    parser.add_argument("--markdown", action="store_true", help="the doc's field tables")
    parser.add_argument("--check", action="store_true", help="exit 1 when the doc is stale")
    args = parser.parse_args(argv)
    if not args.markdown:
        parser.error("say what to generate: --markdown")
    text = DOC_PATH.read_text(encoding="utf-8")
    try:
        fresh = render_doc(text)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if fresh != text:
            print(f"{DOC_PATH} is stale: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    if fresh != text:
        DOC_PATH.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
