"""The Megatron-Bridge runs of 2025 (``megatron_bridge_2025.csv``) -> scenarios with a measured
time.

Source: NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary-archive.md`` @ ``067f987df03b``,
the NeMo containers 25.09 and 25.11, pre-training on DGX-H100, DGX-B200, GB200 NVL72 and GB300
NVL72 (``../shared/data/ground_truth/README.md``). The file lives in the workplace's shared
data, not in the project: the benchmark reads it there (``runs.SHARED_DATA_DIR``); tests build
their rows inline.

How a row becomes a scenario:

* **model**: the catalog preset of the model name (``PRESETS``; the row's layers, hidden size
  and heads agree with it), the row's sequence length. DeepSeek-V3 "w/o MTP" trains no MTP
  module (``mtp_num_layers`` 0), "w/ MTP" one; the 25.09 rows do not say, the preset's one is
  kept.
* **routing**: the page's note: "expert routing force-balanced, token-dropless unless marked
  tokendrop". ``tokendrop`` rows drop beyond an expert's even share and pad every expert's
  input to it (``moe_expert_capacity_factor`` 1.0 with ``moe_pad_expert_input_to_capacity``:
  the defaults of Megatron-Bridge's ``apply_moe_token_drop``, which its performance scripts'
  ``use_tokendrop`` calls, NVIDIA-NeMo/Megatron-Bridge
  ``scripts/performance/utils/overrides.py`` @ ``9d7087463fe3``); ``dropless``
  rows route as trained (the model's default imbalance); the others are force-balanced.
* **precision**: BF16 -> ``bf16``; FP8-CS (current scaling) -> ``fp8`` with the ``tensorwise``
  recipe; FP8-MX -> ``mxfp8``. 25.09 states no precision column; what its FP8 cells ran is
  read in the performance scripts of its release (Megatron-Bridge ``v0.1.0rc3``,
  ``bf71eba07bae``), whose per-model ``perf_matrix`` (``scripts/performance/configs/*/*.yaml``)
  sets the layout per recipe key (``fp8_ds``, ``fp8_cs``, ``fp8_mx``, ``fp8_ss``;
  ``utils/helpers.py`` ``get_precision_config``: ``cs`` is ``bf16_with_fp8_current_scaling_mixed``
  with ``first_last_layers_bf16`` off, i.e. Megatron's ``tensorwise``). *Primary cells*:
  current scaling. The Qwen3 and DeepSeek-V3 matrices have no ``fp8_ds`` entry, only
  ``fp8_cs`` (with ``fp8_mx`` on B200/GB200, ``fp8_ss`` on H100), and the one dense cell whose
  layout tells the two apart, GB200 Llama3 70B, has the page's micro-batch 2 under ``fp8_cs``
  (``fp8_ds``: 1); the 25.11 page labels the same cells FP8-CS and its scripts default to
  ``cs`` (``v0.2.0`` ``scripts/performance/README.md``), where ``v0.1.0rc3``'s command line
  defaulted to ``ds``. *Cells in parentheses* ("different quantization granularities: ... GB200
  and B200 systems, 32x32 for both weights and activations. For H100 system, 128x128 for weights
  and 1x128 for activations", the page's note): on B200/GB200 ``fp8_mx``, MXFP8 (the GB200
  Llama3 70B and 405B alternates have the ``fp8_mx`` layouts, TP 2 PP 4 VP 5 and TP 4 PP 8 CP 2
  VP 8; the 25.11 page puts the same note under "FP8-CS (FP8-MX)"; and 25.09's Transformer
  Engine refuses block-scaled FP8 off Hopper: ``check_fp8_block_scaling_support``, "FP8 block
  scaled GEMM requires Hopper", NVIDIA/TransformerEngine ``transformer_engine/pytorch/fp8.py``
  @ ``v2.7``): ``mxfp8``; on H100
  ``fp8_ss``, subchannel (blockwise) scaling: ``fp8`` with ``blockwise``.
* **layout**: tp/pp/cp/ep/vp, micro-batch and global batch as stated, except the fields a row
  takes from its release's config (below) and an alternate cell's micro-batch where the page's
  GA column (the CSV's ``GA=`` note) gives it another: the page writes MBS once per row and an
  ``a (b)`` GA per cell, so ``global_batch / (dp · GA)`` is the alternate's (25.09 GB200 Llama3
  70B: GBS 128, DP 8, GA 16: micro-batch 1, the ``fp8_mx`` perf-matrix entry's ``mbs: 1`` at
  ``v0.1.0rc3``); sequence parallel when tp > 1; "DDP (FSDP=0)" is Megatron's distributed
  optimizer (``zero_stage`` 1, the recipes' ``use_distributed_optimizer``), Megatron-FSDP is
  ``megatron_fsdp`` at ``zero_stage`` 3 (the performance scripts'
  ``set_megatron_fsdp_overrides`` sets ``data_parallel_sharding_strategy =
  "optim_grads_params"``, ``scripts/performance/utils/helpers.py`` @ ``v0.1.0rc3`` and
  ``v0.2.0``). When the layers do not divide over ``pp·vp`` the embedding and the loss count as
  layers (the README's note on these recipes).
* **what each container's performance scripts set** (``RECIPE_KNOBS``, per release, preset and
  GPU): the token dispatcher, the selective-recompute modules, the 1F1B all-to-all overlap
  (``moe_a2a_overlap``: ``overlap_moe_expert_parallel_comm``) and whether the gradient
  reduction overlaps the backward, read in the Megatron-Bridge release each container ships
  (``docs/releases/software-versions.md`` @ ``v0.2.0``: 25.09 ships ``0.1.0rc3``, 25.11
  ``0.2.0``). 25.09, ``v0.1.0rc3`` (``bf71eba07bae``) ``scripts/performance/run_script.py``:
  DeepSeek-V3 on H100 runs DeepEP (``enable_deepep``, force-balanced), ``A2A_1F1B``
  (``overlap_moe_expert_parallel_comm``), recompute of ``mla_up_proj`` and ``mlp`` and no
  overlapped gradient reduction; on B200/GB200 ``use_tokendrop`` disables DeepEP (the
  all-to-all dispatcher); Qwen3 runs the all-to-all dispatcher with token drop and no
  recompute (``configs/qwen3/*.yaml``: ``recompute_granularity: null``). The Blackwell
  DeepSeek-V3 recompute (``mla_up_proj``) and layouts are those of the next commit of the
  scripts, ``47ff48829`` (2025-10-14, "dsv3 blackwell config update"), whose B200 / GB200
  layouts the 25.09 page shows (``v0.1.0rc3``'s B200 TP 2, GB200 VP 8 do not; its B200
  Qwen3-30B PP 8 VP 12 with EP 8 on 8 GPUs cannot be built). 25.11, ``v0.2.0``
  (``7af9601c9da7``) ``scripts/performance/configs/{deepseek,qwen3,gpt_oss}/``
  ``workload_base_configs.py``: the flex dispatcher over HybridEP on GB200/GB300 for
  DeepSeek-V3 and Qwen3, all-to-all elsewhere; ``moe_a2a_overlap`` for Qwen3 on H100 and for
  Qwen3-235B on B200; recompute ``mla_up_proj`` for DeepSeek-V3 on B200/GB200, ``moe_act`` on
  GB300; ``layernorm`` and ``moe_act`` for GPT-OSS-120B except on GB300. Every script
  reduces gradients in bf16 (``grad_reduce_in_fp32`` false) and force-balances dropless
  routing. Where the page's layout differs from the config's (the 25.11 GB300 / GB200 FP8-MX
  DeepSeek-V3, the GB300 Qwen3, the GPT-OSS rows, H100 Qwen3-30B VP 24 vs 12) the layout is the
  page's and the knobs the GPU's: the knobs are set per GPU in every version of these files
  (two GPT-OSS cells excepted, below).
* **FP8 weights and activation offloading** (both releases): every FP8-CS and FP8-MX recipe
  keeps the transformer weights in FP8 and gathers them so (``fp8_param_gather``: True in
  ``bf16_with_fp8_current_scaling_mixed`` and ``bf16_with_mxfp8_mixed``, False in the
  subchannel recipe of the H100 cells in parentheses; ``src/megatron/bridge/training/
  mixed_precision.py`` at both commits; the scripts' ``get_precision_config`` keeps it). The
  precision fields of each recipe are those the Megatron-Bridge launch reader reads from its
  table (``planner/launch/data/megatron_bridge_recipes.yaml`` ``mixed_precision_recipes``). The
  Megatron-FSDP layouts of the Llama FP8-CS configs run no recompute (the recipes set none)
  and offload the activations of some layers to the Grace CPU's memory
  (``cpu_offloading_num_layers``, with ``cpu_offloading_weights`` False; applied by
  ``set_recompute_overrides`` in ``scripts/performance/utils/helpers.py``): 25.09 GB200
  Llama3 70B 40 of 80 layers (micro-batch 2) and Llama3.1 405B 95 of 126 (TP 2)
  (``configs/llama3/llama3_70b_llm_pretrain.yaml``, ``configs/llama31/
  llama31_405b_llm_pretrain.yaml`` ``perf_matrix`` ``gb200`` ``fp8_cs``); 25.11 Llama3 70B
  40 on GB200 and 20 on GB300 (``configs/llama3/workload_base_configs.py``
  ``LLAMA3_70B_GB200_FP8_CS_BASE_CONFIG``, ``LLAMA3_70B_GB300_FP8_CS_BASE_CONFIG``; its GB200
  405B config offloads 92 layers of a TP 2 Megatron-FSDP layout, but the page's 25.11 GB200
  405B row is TP 4 PP 16, where Megatron-Core allows no offloading: none). What
  Megatron-FSDP holds per GPU (the ``nemo`` profile's ZeRO-3, ``planner.perf.frameworks``
  ``zero3_master_weight_bytes``, ``zero3_model_weight_shard``): the shards of the model
  weights (FP8 parameters), of the fp32 master (whole: the scripts turn the precision-aware
  optimizer off under FSDP), of the bf16 gradients and of the two fp32 moments. Both
  releases also set ``fsdp_double_buffer`` for these models: two persistent buffers each
  for a transformer layer's gathered weights and its unsharded gradients (Megatron-FSDP
  ``FixedPoolAllocator``); the model charges PyTorch FSDP2's gathered weights (the layers
  outside the blocks, one block and the larger of the two, in 16 bits) and no unsharded
  gradient buffer.
* **no overlapped parameter gather under FP8-MX** (25.11): the ``v0.2.0`` performance
  scripts turn ``overlap_param_gather`` off (``comm_overlap``, ``ddp`` and ``optimizer``;
  "keeping this eanbled causes NaN grad norm") for ``fp8_mx`` in ``llama3_70b_{gb300,gb200,
  b200}_config``, ``llama31_405b_{gb300,gb200,b200}_config`` and ``deepseek_v3_{gb300,gb200}
  _config`` (``scripts/performance/configs/{llama3/llama3,llama31/llama31,deepseek/deepseek}
  _llm_pretrain.py``): those FP8-MX rows set ``overlap_param_gather`` false, so the
  distributed optimizer's parameter all-gather runs exposed. ``v0.1.0rc3`` sets it nowhere
  (25.09 keeps the default).
* **full recompute of the first layers** (``recompute_num_layers``: Megatron-Core's
  ``recompute_granularity`` full, ``recompute_method`` block, applied by
  ``set_recompute_overrides`` in ``scripts/performance/utils/helpers.py``): 25.11 H100
  Llama3 8B, 5 of its 32 layers (``configs/llama3/workload_base_configs.py``
  ``LLAMA3_8B_H100_FP8_CS_BASE_CONFIG``, every FP8 precision on H100), and 25.09 B200
  Llama3 70B, 5 (``configs/llama3/llama3_70b_llm_pretrain.yaml`` ``perf_matrix`` ``b200``
  ``fp8_ds``, ``fp8_cs``; not ``fp8_mx``): those rows set ``recompute`` full with
  ``recompute_num_layers``.
* **layout fields from the release's config** (``CONFIG_LAYOUTS``): a row whose stated cells
  the release's own performance config contradicts takes the config's values for them, only
  while it states those cells (a row stating others keeps its own); these are the only fields
  of such a row not taken from the page.

  - 25.11 H100 GPT-OSS-120B, micro-batch: the row states MBS 4 and GA 2 on 16 data-parallel
    ranks, 128 sequences, not its GBS 512; its config runs micro-batch 1
    (``configs/gpt_oss/workload_base_configs.py`` ``BASE_GPT_OSS_120B_CONFIG``, not overridden
    for H100), which divides it.
  - 25.11 B200 GPT-OSS-120B, expert-parallel size: the row states EP 8, but the 25.11 config
    for that GPU sets ``expert_model_parallel_size=64`` (``GPT_OSS_120B_B200_BF16_BASE_CONFIG``,
    ``scripts/performance/configs/gpt_oss/workload_base_configs.py`` @ ``v0.2.0``; the row's
    micro-batch 4 is that override's too, the base config's is 1), so its experts' all-to-all
    crosses the eight DGX B200 nodes. The same config, unchanged in ``v0.3.0``
    (``GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_V1``, EP 64), measured 8047 tokens/s/GPU in the
    26.02 container at EP 64 against this row's 8213; EP 8 entered the B200 config only in
    ``7260d6214`` (2026-03-23, "perf optimizations- GPT-OSS 120B", with HybridEP), and the
    26.02.01 row at EP 8 then measured 13722 (``docs/performance-summary-archive.md`` @
    ``067f987df03b``).
  - 25.11 H100 Qwen3-30B, micro-batch and virtual pipeline: the row states MBS 2, VP 24 and
    GA 32, the 25.09 row's layout cell for cell (its release's perf matrix, ``v0.1.0rc3``
    ``configs/qwen3/qwen3_30b_a3b_llm_pretrain.yaml`` ``h100`` ``fp8_cs``: ``mbs: 2``,
    ``vp: 24``). No later config of that model on H100 has VP 24: ``47ff48829`` (2025-10-14)
    set VP 12 and every version kept it until ``f29a269f8`` (2026-02-23) dropped the
    pipeline. The release's config (``QWEN3_30B_A3B_H100_FP8_CS_BASE_CONFIG``, ``v0.2.0``)
    runs VP 12 with ``WorkloadBaseConfig``'s micro-batch 1 (``scripts/performance/utils/
    utils.py``) since ``8aed9a229`` (2025-11-21, the change that also turned
    ``moe_a2a_overlap`` on; micro-batch 2 before it), and the 26.02 row of the same archive,
    run with that layout (MBS 1, PP 2 VP 12 EP 8, GBS 1,024, DeepEP, ``v0.3.0``), reaches
    5,113 tokens/s/GPU against this row's 5,275.
* **not stated, assumed** (each case lists them): grouped-GEMM experts and, where
  ``RECIPE_KNOBS`` has no entry, no recompute except DeepSeek-V3's ``mla_up_proj``
  (selective), the flex dispatcher for DeepSeek-V3 and all-to-all for the others. CUDA
  graphs other than a whole iteration's and ``recompute_num_layers`` (full recompute of the
  first layers only) is stated where a config sets it (below).
* **measured time**: ``global_batch · seq_length / (tokens/s/GPU · GPUs)``.

The framework is ``nemo``, as the Megatron-Bridge launch reader describes these runs
(``planner.launch.readers.megatron_bridge``): Megatron-Bridge is released in the NeMo
Framework container, and its training loop on Megatron-Core overlaps the pipeline's send/recv
under a virtual pipeline and syncs gradients per model chunk, as the ``nemo`` profile models
(``planner.perf.frameworks``); its ``framework_version`` is the container (``25.09``,
``25.11``): the observed-runs calibration keeps its corrections per release.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from benchmarks.accuracy.cases import Case, document, layout, num
from benchmarks.accuracy.runs import PublishedRun
from planner.launch.readers.megatron_bridge import recipe_precision, scenario_precision

__all__ = ["SOURCE", "convert_bridge", "release_of"]

SOURCE: Final = "megatron_bridge_2025"

PRESETS: Final = (
    ("LLAMA3.1_405B", "llama3.1-405b"),
    ("LLAMA3_70B", "llama3-70b"),
    ("LLAMA3_8B", "llama3-8b"),
    ("DeepSeekV3", "deepseek-v3"),
    ("GPT OSS 120B", "gpt-oss-120b"),
    ("Qwen3_30B_a3B", "qwen3-30b-a3b"),
    ("Qwen3_235B_a22B", "qwen3-235b-a22b"),
)
"""Model name prefix in the CSV -> catalog preset (``planner/catalog/models.yaml``)."""

GPUS: Final = {"H100-SXM": "h100-sxm", "B200": "b200", "GB200": "gb200", "GB300": "gb300"}
"""The CSV's GPU column -> catalog key."""


DEEPSEEK_V3_LAYOUTS: Final = {
    8: "Et*8|(t*8|)*6t*5{m}L",
    16: "Et*4|(t*4|)*14t{m}L",
    32: "Et|(tt|)*30{m}L",
}
"""DeepSeek-V3's 61 layers over ``pp·vp`` model chunks as its recipes split them (Megatron
``--pipeline-model-parallel-layout``; ``{m}``: the MTP module, on the last chunk): NeMo's
``map_pp_vp_to_layout`` for 8 and 16 chunks (embedding + 8 or 4 layers first, 5 or 1 with the
loss last), Megatron-Bridge's H100 ``pp_layout`` ``Et|(tt|)*30mL`` for 32."""


@dataclass(frozen=True, slots=True)
class Knobs:
    """What a container's performance script sets for one model on one GPU (module
    docstring): ``dispatcher`` (``moe_token_dispatcher_type``, MoE models), ``recompute``
    (selective modules; empty: none), ``a2a_overlap`` (``overlap_moe_expert_parallel_comm``),
    ``overlap_grad_reduce``, ``offload_layers`` (``cpu_offloading_num_layers`` of the FP8-CS
    Megatron-FSDP layout, activations only), ``recompute_layers`` (``recompute_num_layers`` of
    the FP8 layouts but MXFP8's, full recompute of each chunk's first layers; 0: none) and
    ``source`` (where it is read)."""

    dispatcher: str = "alltoall"
    recompute: tuple[str, ...] = ()
    a2a_overlap: bool = False
    overlap_grad_reduce: bool = True
    offload_layers: int = 0
    recompute_layers: int = 0
    source: str = ""


_RC3 = "Megatron-Bridge v0.1.0rc3 scripts/performance/run_script.py"
_RC3_NEXT = "Megatron-Bridge 47ff48829 scripts/performance/run_script.py"
_V020 = "Megatron-Bridge v0.2.0 scripts/performance/configs/{}/workload_base_configs.py"
_TOKENDROP_2509 = Knobs("alltoall", ("mla_up_proj",), source=f"{_RC3} (tokendrop), {_RC3_NEXT}")
_QWEN3_2509 = Knobs("alltoall", source=f"{_RC3}, configs/qwen3/*.yaml")
_GPT_OSS_2511 = Knobs("alltoall", ("layernorm", "moe_act"), source=_V020.format("gpt_oss"))
_RC3_YAML = "Megatron-Bridge v0.1.0rc3 scripts/performance/configs/{} perf_matrix {} fp8_cs"

RECIPE_KNOBS: Final[dict[tuple[str, str, str], Knobs]] = {
    ("25.09", "deepseek-v3", "h100-sxm"): Knobs(
        "flex", ("mla_up_proj", "mlp"), a2a_overlap=True, overlap_grad_reduce=False, source=_RC3
    ),
    ("25.09", "deepseek-v3", "b200"): _TOKENDROP_2509,
    ("25.09", "deepseek-v3", "gb200"): _TOKENDROP_2509,
    **{
        ("25.09", q, g): _QWEN3_2509
        for q in ("qwen3-30b-a3b", "qwen3-235b-a22b")
        for g in GPUS.values()
    },
    ("25.11", "deepseek-v3", "b200"): Knobs(
        "alltoall", ("mla_up_proj",), source=_V020.format("deepseek")
    ),
    ("25.11", "deepseek-v3", "gb200"): Knobs(
        "flex", ("mla_up_proj",), source=_V020.format("deepseek")
    ),
    ("25.11", "deepseek-v3", "gb300"): Knobs("flex", ("moe_act",), source=_V020.format("deepseek")),
    ("25.11", "qwen3-30b-a3b", "gb300"): Knobs("flex", source=_V020.format("qwen3")),
    ("25.11", "qwen3-30b-a3b", "gb200"): Knobs("flex", source=_V020.format("qwen3")),
    ("25.11", "qwen3-30b-a3b", "b200"): Knobs("alltoall", source=_V020.format("qwen3")),
    ("25.11", "qwen3-30b-a3b", "h100-sxm"): Knobs(
        "alltoall", a2a_overlap=True, source=_V020.format("qwen3")
    ),
    ("25.11", "qwen3-235b-a22b", "gb300"): Knobs("flex", source=_V020.format("qwen3")),
    ("25.11", "qwen3-235b-a22b", "gb200"): Knobs("flex", source=_V020.format("qwen3")),
    ("25.11", "qwen3-235b-a22b", "b200"): Knobs(
        "alltoall", a2a_overlap=True, source=_V020.format("qwen3")
    ),
    ("25.11", "qwen3-235b-a22b", "h100-sxm"): Knobs(
        "alltoall", a2a_overlap=True, source=_V020.format("qwen3")
    ),
    **{("25.11", "gpt-oss-120b", g): _GPT_OSS_2511 for g in ("b200", "gb200", "h100-sxm")},
    ("25.11", "gpt-oss-120b", "gb300"): Knobs("alltoall", source=_V020.format("gpt_oss")),
    ("25.09", "llama3-70b", "gb200"): Knobs(
        offload_layers=40, source=_RC3_YAML.format("llama3/llama3_70b_llm_pretrain.yaml", "gb200")
    ),
    ("25.09", "llama3.1-405b", "gb200"): Knobs(
        offload_layers=95,
        source=_RC3_YAML.format("llama31/llama31_405b_llm_pretrain.yaml", "gb200"),
    ),
    ("25.11", "llama3-70b", "gb200"): Knobs(
        offload_layers=40, source=_V020.format("llama3") + " LLAMA3_70B_GB200_FP8_CS_BASE_CONFIG"
    ),
    ("25.09", "llama3-70b", "b200"): Knobs(
        recompute_layers=5, source=_RC3_YAML.format("llama3/llama3_70b_llm_pretrain.yaml", "b200")
    ),
    ("25.11", "llama3-8b", "h100-sxm"): Knobs(
        recompute_layers=5, source=_V020.format("llama3") + " LLAMA3_8B_H100_FP8_CS_BASE_CONFIG"
    ),
    ("25.11", "llama3-70b", "gb300"): Knobs(
        offload_layers=20, source=_V020.format("llama3") + " LLAMA3_70B_GB300_FP8_CS_BASE_CONFIG"
    ),
}
"""(container, preset, GPU) -> what its performance script sets (module docstring)."""


@dataclass(frozen=True, slots=True)
class ConfigLayout:
    """Layout fields a row takes from its release's performance config (module docstring):
    ``stated``, the row's cells (CSV column -> value) the config contradicts, the override
    holds only while the row states them; ``fields``, the ``parallelism`` fields -> the
    config's values; ``source``, the config; ``evidence``, why the config's values hold."""

    stated: dict[str, int]
    fields: dict[str, int]
    source: str
    evidence: str


CONFIG_LAYOUTS: Final[dict[tuple[str, str, str], ConfigLayout]] = {
    ("25.11", "gpt-oss-120b", "h100-sxm"): ConfigLayout(
        {"micro_batch": 4},
        {"micro_batch_size": 1},
        _V020.format("gpt_oss") + " BASE_GPT_OSS_120B_CONFIG",
        "the row's MBS 4 and GA 2 on 16 data-parallel ranks make 128 sequences, not its GBS 512",
    ),
    ("25.11", "gpt-oss-120b", "b200"): ConfigLayout(
        {"ep": 8},
        {"expert_parallel": 64},
        _V020.format("gpt_oss") + " GPT_OSS_120B_B200_BF16_BASE_CONFIG",
        "EP 8 entered the B200 config in 7260d6214 (2026-03-23); EP 64 measured 8047 in 26.02",
    ),
    ("25.11", "qwen3-30b-a3b", "h100-sxm"): ConfigLayout(
        {"micro_batch": 2, "vp": 24},
        {"micro_batch_size": 1, "virtual_pipeline": 12},
        _V020.format("qwen3") + " QWEN3_30B_A3B_H100_FP8_CS_BASE_CONFIG",
        "the row repeats the previous release's layout",
    ),
}
"""(container, preset, GPU) -> the release config's layout fields for a row stating cells the
config contradicts (module docstring)."""


def _config_layout(run: PublishedRun, preset: str, gpu: str) -> tuple[dict[str, int], str | None]:
    """The ``CONFIG_LAYOUTS`` fields of the row, and the assumption that says so, while it
    states the cells its entry names; empty (and None) otherwise."""
    config = CONFIG_LAYOUTS.get((release_of(run), preset, gpu))
    if config is None or any(run.integer(k) != v for k, v in config.stated.items()):
        return {}, None
    values = ", ".join(f"{field} {value}" for field, value in config.fields.items())
    return config.fields, f"{values} of {config.source}: {config.evidence}"


FP8_MX_NO_PARAM_GATHER_OVERLAP: Final = {
    "25.11": frozenset(
        {
            *((m, g) for m in ("llama3-70b", "llama3.1-405b") for g in ("b200", "gb200", "gb300")),
            ("deepseek-v3", "gb200"),
            ("deepseek-v3", "gb300"),
        }
    ),
}
"""Container -> (preset, GPU) whose ``fp8_mx`` config turns ``overlap_param_gather`` off
(Megatron-Bridge ``v0.2.0`` ``scripts/performance/configs/*/*_llm_pretrain.py``, module
docstring)."""


def release_of(run: PublishedRun) -> str:
    """The NeMo container of the row (``25.09``, ``25.11``), from its config id."""
    return run.config_id.split("_")[1]


def _preset(run: PublishedRun) -> str:
    name = run.text("model_name")
    for prefix, preset in PRESETS:
        if name.startswith(prefix):
            return preset
    raise ValueError(f"{run.config_id}: no preset for model {name!r}")


def _precision_recipe(run: PublishedRun) -> str:
    """The Megatron-Bridge precision recipe the row's performance script ran
    (``get_precision_config``, module docstring)."""
    text = run.text("precision")
    if text == "BF16":
        return "bf16_mixed"
    if text == "FP8-MX":
        return "bf16_with_mxfp8_mixed"
    if text.startswith("FP8 blockwise"):  # 25.09's cells in parentheses (module docstring)
        if GPUS[run.text("gpu")] == "h100-sxm":
            return "bf16_with_fp8_subchannel_scaling_mixed"
        return "bf16_with_mxfp8_mixed"
    if text.startswith("FP8"):  # FP8-CS, and 25.09's primary cells (module docstring)
        return "bf16_with_fp8_current_scaling_mixed"
    raise ValueError(f"{run.config_id}: unknown precision {text!r}")


def _precision(run: PublishedRun) -> dict[str, Any]:
    """The ``parallelism`` precision fields of the row: those of its recipe as the Megatron-
    Bridge launch reader reads them (``recipe_precision``, ``scenario_precision``), but
    ``grad_reduce_in_fp32``, which the performance scripts set false."""
    name = _precision_recipe(run)
    values = recipe_precision(name)
    if values is None:
        raise ValueError(f"{run.config_id}: precision recipe {name!r} is not catalogued")
    settings = scenario_precision(values)
    return {k: value for k, (value, _) in settings.items() if k != "grad_reduce_in_fp32"}


def _data_parallel(run: PublishedRun) -> int:
    """The row's data-parallel size, ``num_gpus / (tp · pp · cp)``."""
    return num(run, "num_gpus") // (
        (run.integer("tp") or 1) * (run.integer("pp") or 1) * (run.integer("cp") or 1)
    )


def _micro_batch(run: PublishedRun) -> dict[str, Any]:
    """``micro_batch_size`` of an ``_alt`` row whose data-parallel size, stated micro-batch and
    the GA its note states do not multiply to its global batch: the micro-batch its GA implies
    (module docstring, layout); empty otherwise."""
    ga = re.search(r"\bGA=(\d+)", run.notes)
    if ga is None or not run.config_id.endswith("_alt"):
        return {}
    dp, steps, batch = _data_parallel(run), int(ga.group(1)), num(run, "global_batch")
    if dp * (run.integer("micro_batch") or 1) * steps == batch:
        return {}
    micro, left = divmod(batch, dp * steps)
    return {"micro_batch_size": micro} if not left and micro >= 1 else {}


def _moe(
    run: PublishedRun, preset: str, knobs: Knobs | None
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """Model fields, extra parallelism fields and assumptions of an MoE row (``knobs``: its
    ``RECIPE_KNOBS`` entry, if any)."""
    name = run.text("model_name")
    model: dict[str, Any] = {"moe_grouped_gemm": True}
    extra: dict[str, Any] = {}
    assumptions = ["grouped-GEMM experts"]
    if "(tokendrop)" in name:
        model["moe_expert_capacity_factor"] = 1.0
        model["moe_pad_expert_input_to_capacity"] = True
        assumptions.append("token drop at capacity factor 1.0, padded to capacity")
    elif "(dropless)" not in name:
        model["moe_router_force_load_balancing"] = True
    if preset == "deepseek-v3":
        if "w/o MTP" in name:
            model["mtp_num_layers"] = 0
        elif "w/ MTP" in name:
            model["mtp_num_layers"] = 1
        mtp = model.get("mtp_num_layers", 1) > 0
        chunks = (run.integer("pp") or 1) * (run.integer("vp") or 1)
        if chunks in DEEPSEEK_V3_LAYOUTS:
            extra["pipeline_layout"] = DEEPSEEK_V3_LAYOUTS[chunks].format(m="m" if mtp else "")
            assumptions.append("the recipes' DeepSeek-V3 pipeline layout")
    if knobs is None:
        deepseek = preset == "deepseek-v3"
        knobs = Knobs("flex" if deepseek else "alltoall", ("mla_up_proj",) if deepseek else ())
        assumptions.append(f"{knobs.dispatcher} dispatcher")
        if deepseek:
            assumptions.append("selective recompute of mla_up_proj")
    else:
        assumptions.append(f"dispatcher, recompute and overlap as {knobs.source} sets them")
    model["moe_token_dispatcher_type"] = knobs.dispatcher
    if knobs.recompute:
        extra["recompute"] = "selective"
        extra["recompute_modules"] = list(knobs.recompute)
    if knobs.a2a_overlap:
        model["overlap_moe_expert_parallel_comm"] = True
    if not knobs.overlap_grad_reduce:
        extra["overlap_grad_reduce"] = False
    extra["expert_parallel"] = run.integer("ep") or 1
    if (run.integer("tp") or 1) > 1:
        extra["expert_tensor_parallel"] = 1
        assumptions.append("expert_tensor_parallel 1")
    return model, extra, assumptions


def convert_bridge(run: PublishedRun) -> Case:
    """One ``megatron_bridge_2025`` configuration as a ``Case`` (module docstring)."""
    preset = _preset(run)
    model: dict[str, Any] = {"preset": preset, "seq_length": num(run, "seq_len")}
    precision = _precision(run)
    assumptions: list[str] = []
    extra: dict[str, Any] = {"recompute": "none"}
    gpu = GPUS[run.text("gpu")]
    knobs = RECIPE_KNOBS.get((release_of(run), preset, gpu))
    if run.text("moe_experts"):
        moe_model, moe_extra, moe_assumed = _moe(run, preset, knobs)
        model.update(moe_model)
        extra.update(moe_extra)
        assumptions += moe_assumed
    elif knobs is not None and knobs.recompute_layers and precision["precision"] == "fp8":
        extra["recompute"] = "full"
        extra["recompute_num_layers"] = knobs.recompute_layers
        assumptions.append(
            f"full recompute of the first {knobs.recompute_layers} layers as {knobs.source} sets it"
        )
    else:
        assumptions.append("no recompute")
    fsdp = run.text("zero_stage").startswith("Megatron-FSDP")
    if knobs is not None and knobs.offload_layers and fsdp and (run.integer("pp") or 1) == 1:
        extra["activation_offload_layers"] = knobs.offload_layers
        assumptions.append(
            f"activations of {knobs.offload_layers} layers offloaded as {knobs.source} sets it"
        )
    if run.text("precision") == "FP8-MX" and (preset, gpu) in FP8_MX_NO_PARAM_GATHER_OVERLAP.get(
        release_of(run), ()
    ):
        extra["overlap_param_gather"] = False
        assumptions.append("no overlapped parameter gather, as the release's fp8_mx config sets")
    config, config_assumption = _config_layout(run, preset, gpu)
    if config_assumption is not None:
        assumptions.append(config_assumption)
    tp = run.integer("tp") or 1
    vp = config.get("virtual_pipeline", run.integer("vp") or 1)
    chunks = (run.integer("pp") or 1) * vp
    if chunks > 1 and num(run, "layers") % chunks and "pipeline_layout" not in extra:
        extra["account_for_embedding_in_pipeline_split"] = True
        extra["account_for_loss_in_pipeline_split"] = True
    par = layout(
        run,
        sequence_parallel=tp > 1,
        zero_stage=3 if fsdp else 1,
        **({"megatron_fsdp": True} if fsdp else {}),
        **precision,
        **{**extra, **_micro_batch(run), **config},
    )
    measured = (num(run, "global_batch") * num(run, "seq_len")) / (
        run.metrics["tokens_per_s_per_gpu"] * num(run, "num_gpus")
    )
    par["grad_reduce_in_fp32"] = False  # every performance script (module docstring)
    doc = document(run, model, gpu, par, "nemo")
    doc["training"]["framework_version"] = release_of(run)
    return Case(
        source=run.source,
        config_id=run.config_id,
        document=doc,
        measured_iteration_time_s=measured,
        derived_from="tokens_per_s_per_gpu",
        assumptions=tuple(assumptions),
        release=release_of(run),
    )
