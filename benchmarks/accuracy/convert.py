"""Published runs -> scenario documents with a measured iteration time (and peak memory).

One converter per source turns a ``PublishedRun`` into a ``Case`` (a scenario document in the
``docs/scenario-format.md`` shape plus the measured ``iteration_time_s``) or an ``Unusable`` with
the reason. Every value the source does not state and the converter fills in is listed in the
case's ``assumptions``; the per-source rules are summarised in ``SOURCE_NOTES`` (printed into
``benchmarks/RESULTS.md``).

Measured iteration time, per source (conventions from ``tests/data/ground_truth/README.md``):

* ``sc21`` (Narayanan et al. 2021): ``F / (TFLOP/s per GPU · N)`` with the paper's
  ``F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))`` (counts the recompute forward).
* ``korthikanti2022``: ``iteration_time`` as published (Table 5, §6.3).
* ``megatron_h100`` (Megatron-LM README 2024): ``F / (TFLOP/s per GPU · N)`` with Megatron-LM's
  model FLOPs ``72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h))`` (``num_floating_point_operations`` for a
  4h-MLP MHA GPT; the table's TFLOP/s ÷ MFU = 989, the H100 dense BF16 peak, confirms model FLOPs).
* ``llm_foundry``: ``B·s / throughput_tokens_per_s`` (global tokens/s as published).
* ``nemo_24.07`` and ``torchtitan``: ``B·s / (tokens/s/GPU · N)``.
* ``moe_h100_2025``: see ``benchmarks.accuracy.moe_h100``.
* ``megatron_bridge_2025`` (in the workplace's shared data, read by the benchmark only): see
  ``benchmarks.accuracy.bridge``.

A converted case is then parsed as ``planner predict`` would: a scenario the planner refuses
is left out as ``REFUSED`` with the planner's message (``Unusable.detail``), after the
calibration split, so a row refused today keeps its place in the split.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from benchmarks.accuracy.bridge import convert_bridge
from benchmarks.accuracy.cases import (
    DUPLICATE,
    GIB,
    LAYOUT_NOT_STATED,
    NO_ARCHITECTURE,
    NO_TIMING,
    NOT_AN_ITERATION,
    PP_MICROBATCH_NOT_STATED,
    REASONS,
    REFUSED,
    SPLIT_NOT_STATED,
    Case,
    SkipError,
    Unusable,
)
from benchmarks.accuracy.cases import document as _document
from benchmarks.accuracy.cases import layout as _layout
from benchmarks.accuracy.cases import megatron_model_flops as _megatron_model_flops
from benchmarks.accuracy.cases import model_fields as _model
from benchmarks.accuracy.cases import num as _num
from benchmarks.accuracy.cases import time_from_tflops as _time_from_tflops
from benchmarks.accuracy.cases import tokens_per_iteration as _tokens_per_iteration
from benchmarks.accuracy.moe_h100 import convert_moe_h100
from benchmarks.accuracy.runs import SHARED_SOURCE_FILES, SOURCE_FILES, PublishedRun, load_runs
from planner.errors import SpecError
from planner.scenario import parse_scenario

__all__ = [
    "CALIBRATION_EVERY",
    "CALIBRATION_SOURCES",
    "DENSE_A100_H100_SOURCES",
    "MOE_SOURCES",
    "REASONS",
    "SOURCE_NOTES",
    "SPLIT_SOURCES",
    "Case",
    "Dataset",
    "Unusable",
    "build_dataset",
    "convert",
    "deduplicate",
    "mark_calibration",
    "scenario_key",
]

DENSE_A100_H100_SOURCES = ("sc21", "korthikanti2022", "megatron_h100", "llm_foundry", "nemo_24.07")
"""Sources run on catalog A100/H100 SKUs: the issue's accuracy targets apply to each of them."""

MOE_SOURCES = ("moe_h100_2025",)
"""Sources of mixture-of-experts runs (catalog H100s): issue 13's MoE targets apply."""

CALIBRATION_SOURCES = DENSE_A100_H100_SOURCES + MOE_SOURCES
"""Sources that contribute calibration rows. torchtitan ran on 96 GB / 500 W H100s whose peak
FLOP/s is not published (catalog ``h100-sxm-96gb`` takes the midpoint of the documented bounds),
so all its rows are held out."""

SHARED_SPLIT_SOURCES = tuple(SHARED_SOURCE_FILES)
"""Sources of the workplace's shared data with a calibration subset too (Megatron-Bridge 2025:
H100 and Blackwell); the benchmark reads them when they are there."""

SPLIT_SOURCES = CALIBRATION_SOURCES + SHARED_SPLIT_SOURCES
"""Every source with a declared calibration subset (``mark_calibration``)."""

CALIBRATION_EVERY = 3
"""Calibration rule: within each source of ``SPLIT_SOURCES``, the converted
configurations (a time derived, the architecture modelled, duplicates dropped: the rows the
planner refuses today included, so the split does not move when they become accepted; of the
MoE source only its high-confidence rows, ``calibration_eligible``) sorted by ``config_id``,
those at positions 0, 3, 6, ... (every third) are the calibration subset; all other rows are
held out. Deterministic, spread over each source's range."""


SOURCE_NOTES: Mapping[str, str] = {
    "sc21": (
        "Narayanan et al. SC21 Table 1 (layout, micro-batch, recompute from "
        "`examples/sc21/run_table_1.sh`) and Table 2 ZeRO-3 rows. A100-80GB, fp16, no "
        "distributed optimizer (zero_stage 0), no flash attention, gradients reduced after the "
        "backward (`overlap_grad_reduce` false; the option arrived in 2023). Assumed for Table 2 "
        "ZeRO-3 (DeepSpeed): full recompute (the source does not state it; 175B/530B at "
        "micro-batch 1-4 does not fit 80 GB without it). Time from TFLOP/s with the paper's "
        "96·B·s·l·h²·(1+s/6h+V/16lh)."
    ),
    "korthikanti2022": (
        "Korthikanti et al. 2022 Table 3/5 and §6.3: iteration time as published. A100-80GB, "
        "fp16, zero_stage 0, no flash attention, no gradient-reduction overlap (2022); sequence "
        "parallel and recompute (full / selective) as stated."
    ),
    "megatron_h100": (
        "Megatron-LM README 2024 H100 weak-scaling table. Not stated, assumed: micro-batch 1, "
        "selective recompute, sequence parallel when tp > 1, no interleaving, BF16 (inferred "
        "by the source), h100-sxm (DGX H100), ffn 4h, GeLU. Implied by the stated flags in "
        "Megatron-LM at the table's commit (`arguments.py` @ f2e5db402c): the distributed "
        "optimizer (zero_stage 1; --overlap-param-gather requires it) and gradients "
        "accumulated and reduce-scattered in fp32 (--bf16 forces it). Untied embeddings: the "
        "table's model sizes count a separate output layer. Time from TFLOP/s with "
        "Megatron-LM's model FLOPs 72·B·s·l·h²·(1+s/6h+V/12lh)."
    ),
    "llm_foundry": (
        "llm-foundry MPT benchmark tables: FSDP FULL_SHARD = zero_stage 3 (SHARD_GRAD_OP = 2), "
        "FSDP activation checkpointing = full recompute, amp_bf16/bf16 = bf16, amp_fp8 = fp8, "
        "FSDP mixed_precision PURE = gradients reduced in bf16 (DEFAULT: fp32), "
        "GeLU, tied embeddings. Attention: MPT's Triton FlashAttention kernel (attn_impl "
        "triton, the default of submit_benchmarks.py until 7f0fdae66; sweep.sh passes none) in "
        "the A100-40GB, A100-80GB, H100 BF16 and FP8 tables and the large-scale table's 13B/30B "
        "rows, FlashAttention-2 (attn_impl flash, flash-attn 2.x from the gpu-flash2 extra, "
        "sweep.py @ 5e85bd62d4) in its 1B/3B/7B/70B rows; all priced at the llm_foundry "
        "profile's flash_attention_v1 rate, fitted on these rows. "
        "Time from the published global tokens/s."
    ),
    "nemo_24.07": (
        "NeMo 24.07 DGX-H100 FP8 pretraining and fine-tuning tables (fine-tuning: SFT or LoRA "
        "with NeMo 24.07's default rank 32 on the QKV projection, SQuAD v1.1 packed to 4096 "
        "tokens, 256-token samples and the pretraining recipe's virtual pipeline assumed). "
        "Architecture from the row, or the catalog preset (GPT3-175B vocabulary from "
        "`gpt3-175b`, Nemotron-340B from `nemotron4-340b`). Not stated, assumed: no recompute, "
        "sequence parallel when tp > 1, distributed optimizer (zero_stage 1), SwiGLU + untied "
        "embeddings for Llama. Time from tokens/s/GPU."
    ),
    "moe_h100_2025": (
        "2025 MoE runs on H100 (`benchmarks/accuracy/moe_h100.py`). NeMo Automodel: FSDP2 "
        "(zero_stage 3) + TE + DeepEP, fake balanced gate (`moe_router_round_robin`: its "
        "recipes' `fake_balanced_gate: true`), recompute from "
        "the quoted recipe (`activation_checkpointing`), GPT-OSS expert parallel over every GPU "
        "(column '-'); step time as published. Megatron-MoE-ModelZoo: as stated (distributed "
        "optimizer or Megatron-FSDP, DeepEP or all-to-all, expert tensor parallel 1 where "
        "stated; gradients reduced in fp32: no script sets `--grad-reduce-in-bf16`; the main "
        "table's launch commands force load balancing); "
        "long-context rows' time from their TFLOP/s with Megatron-LM's 2025 FLOPs "
        "(micro-batch 1 assumed). Megatron-LM MoE README Mixtral: time from TFLOP/s with the "
        "2024 FLOPs, distributed optimizer assumed. FlagPerf Mixtral: time from tokens/s/GPU, "
        "distributed optimizer (zero_stage 1: its launch script's `--use-distributed-optimizer`), "
        "expert parallel 1 (the README's layout; Megatron-Core 0.6 refuses the script's EP 8 with "
        "2 data-parallel ranks). Nemotron V3 (hybrid Mamba) and Qwen3-Next (Gated "
        "DeltaNet) are not modelled."
    ),
    "torchtitan": (
        "torchtitan Llama 3.1 benchmarks. The H100s are 96 GB HBM2e (2.4 TB/s) at 500 W: "
        "catalog h100-sxm-96gb, whose peak (912 TFLOP/s bf16) is the midpoint of the "
        "documented bounds (H100 NVL 835, SXM 989); all rows held out. FSDP2 = zero_stage 3, "
        "op-level SAC = selective, Float8 linears = fp8 with torchao's tensorwise (current) "
        "scaling; async TP (torch.compile's micro-pipelined all-gather/reduce-scatter GEMMs) = "
        "tp_comm_overlap, vanilla TP = none; torch.compile in the 2025 benchmarks (torchtitan "
        "820504e, e7c0cae: the loss compiled with the model) = compiled_loss. Time from "
        "tokens/s/GPU; peak memory as published (GiB)."
    ),
    "megatron_bridge_2025": (
        "Megatron-Bridge performance summary, NeMo containers 25.09 and 25.11 "
        "(`benchmarks/accuracy/bridge.py`; read from the workplace's shared data): DGX-H100, "
        "DGX-B200, GB200 and GB300 NVL72; catalog presets; BF16, FP8 current scaling "
        "(tensorwise; 25.09's unlabelled FP8 cells as its release's scripts key them), MXFP8 "
        "(25.09's cells in parentheses on B200/GB200), FP8 blockwise (those on H100); "
        "distributed optimizer or Megatron-FSDP as stated; MoE force-balanced unless tokendrop "
        "(capacity factor 1) or dropless. Not stated, assumed: no recompute (DeepSeek-V3: "
        "selective mla_up_proj), flex dispatcher for DeepSeek-V3, all-to-all for the others. "
        "Each container is its own release (rows of the two containers are not duplicates). "
        "Time from tokens/s/GPU."
    ),
}
"""How each source is turned into scenarios: mappings, defaults, FLOP formula."""


def _sc21_flops(run: PublishedRun) -> float:
    """Narayanan et al. 2021 FLOPs of one iteration (recompute counted), eq. 3."""
    b, s, layers = _num(run, "global_batch"), _num(run, "seq_len"), _num(run, "layers")
    h, v = _num(run, "hidden"), _num(run, "vocab")
    return 96.0 * b * s * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))


def _convert_sc21(run: PublishedRun) -> Case:
    table = run.text("table")
    if table.startswith("README table"):
        raise SkipError(SPLIT_NOT_STATED)
    if table.startswith("Table 2") and "ptdp" in run.config_id:
        raise SkipError(SPLIT_NOT_STATED)
    assumptions: list[str] = []
    zero3 = run.text("zero_stage") == "3"
    if zero3:
        recompute = "full"
        assumptions.append("recompute full (not stated; needed to fit in 80 GB)")
    else:
        recompute = "full" if run.text("recompute").startswith("full") else "none"
    par = _layout(
        run,
        sequence_parallel=False,
        recompute=recompute,
        zero_stage=3 if zero3 else 0,
        precision="fp16",
        flash_attention=False,
        overlap_grad_reduce=zero3,  # Megatron-LM of 2021 reduced gradients after the backward
    )
    doc = _document(
        run,
        _model(run, activation="gelu", untie=False),
        "a100-80gb",
        par,
        "deepspeed" if zero3 else "megatron",
    )
    return Case(
        source=run.source,
        config_id=run.config_id,
        document=doc,
        measured_iteration_time_s=_time_from_tflops(run, _sc21_flops(run)),
        derived_from="achieved_tflops_per_gpu (SC21 FLOPs formula)",
        assumptions=tuple(assumptions),
    )


def _convert_korthikanti(run: PublishedRun) -> Case:
    if "iteration_time" not in run.metrics:
        raise SkipError(NOT_AN_ITERATION if run.integer("layers") == 1 else NO_TIMING)
    recompute_text = run.text("recompute")
    recompute = "selective" if recompute_text.startswith("selective") else recompute_text
    tp = run.integer("tp") or 1
    par = _layout(
        run,
        sequence_parallel=run.text("sp") == "yes" and tp > 1,
        recompute=recompute,
        zero_stage=0,
        precision="fp16",
        flash_attention=False,
        overlap_grad_reduce=False,  # Megatron-LM of 2022 reduced gradients after the backward
    )
    doc = _document(run, _model(run, activation="gelu", untie=False), "a100-80gb", par, "megatron")
    return Case(
        source=run.source,
        config_id=run.config_id,
        document=doc,
        measured_iteration_time_s=run.metrics["iteration_time"],
        derived_from="iteration_time",
    )


def _convert_megatron_h100(run: PublishedRun) -> Case:
    if run.integer("tp") is None:
        raise SkipError(LAYOUT_NOT_STATED)
    tp = _num(run, "tp")
    par = _layout(
        run,
        micro_batch_size=1,
        sequence_parallel=tp > 1,
        recompute="selective",
        # the stated --overlap-param-gather requires the distributed optimizer
        # (megatron/training/arguments.py:279-281 @ f2e5db402c, the table's commit)
        zero_stage=1,
        precision="bf16",
        # --bf16 forced accumulate_allreduce_grads_in_fp32 (arguments.py:300-305 @ f2e5db402c;
        # --grad-reduce-in-bf16 arrived in d165a8548b, 2025-02): fp32 gradient reduce-scatter
        grad_reduce_in_fp32=True,
    )
    # the table's model sizes (1.7B, 7.1B, 16B, ..., 177B) count a separate output layer:
    # 12·l·h² + 2·V·h gives 1.745B / 7.12B / 16.1B / 177.2B, tied embeddings 1.48B / 6.58B /
    # 15.3B / 175.6B, so the runs untied them (Megatron-LM --untie-embeddings-and-output-weights)
    untied = _model(run, activation="gelu", untie=True)
    doc = _document(run, untied, "h100-sxm", par, "megatron")
    return Case(
        source=run.source,
        config_id=run.config_id,
        document=doc,
        measured_iteration_time_s=_time_from_tflops(run, _megatron_model_flops(run)),
        derived_from="achieved_tflops_per_gpu (Megatron model FLOPs)",
        assumptions=(
            "micro_batch_size 1",
            "recompute selective",
            "sequence_parallel when tp > 1",
            "virtual_pipeline 1",
            "ffn_hidden_size 4h, gelu",
        ),
    )


_FOUNDRY_GPUS = {"40": "a100-40gb", "80": "a100-80gb"}

_FOUNDRY_TABLES_BEFORE_TORCH_2_1 = ("A100 40GB",)
"""llm-foundry tables measured before PyTorch 2.1, whose activation checkpointing recomputes
the whole layer (no early stop, ``parallelism.recompute_early_stop`` false): the A100-40GB
table stands unchanged in ``scripts/train/benchmarking/README.md`` since ``300cc5c58``
(2023-05-03), five months before torch 2.1.0 (2023-10-04); early stop became the default of
non-reentrant ``torch.utils.checkpoint`` in pytorch/pytorch#96866 (opened 2023-03-15, the day
torch 2.0.0 shipped without it). The A100-80GB table was re-measured in ``b2a43a147``
(2023-10-19) and the H100 tables added there and in ``5e85bd62d4``, by ``sweep.sh`` with the
``mosaicml/pytorch:2.1.0_cu121`` image and llm-foundry v0.3.0, whose MPT yamls set
``activation_checkpointing_reentrant: false``: the framework's default (early stop) holds,
except in the FP8 table (``_FOUNDRY_FP8_RECOMPUTES_EVERY_GEMM``)."""

_FOUNDRY_FP8_RECOMPUTES_EVERY_GEMM = "FP8"
"""The llm-foundry FP8 rows build every linear as Transformer Engine's ``te.Linear``
(``submit_benchmarks.py`` sets ``fc_type: te`` for ``fp8`` on ``h100_80gb`` @ ``5e85bd62d4``;
``llmfoundry/models/layers/fc.py``), an ``autograd.Function`` whose saved tensors are packed
after its GEMM has run, so the checkpoint's early stop comes after the down projection's GEMM
(a custom ``autograd.Function`` linear under ``torch.utils.checkpoint(use_reentrant=False)``
re-runs every GEMM, checked with torch 2.13 on the CPU): they state
``recompute_early_stop: false``."""


def _convert_llm_foundry(run: PublishedRun) -> Case:
    h100 = run.text("gpu").startswith("H100")
    gpu = "h100-sxm" if h100 else _FOUNDRY_GPUS[run.text("gpu_mem_gb")]
    zero = run.text("zero_stage")
    par = _layout(
        run,
        recompute="full" if run.text("recompute").startswith("full") else "none",
        zero_stage=2 if "SHARD_GRAD_OP" in zero else 3,
        precision="fp8" if "fp8" in run.text("precision") else "bf16",
        # FSDP mixed_precision PURE reduces gradients in bf16, DEFAULT in fp32 (Composer)
        grad_reduce_in_fp32="mixed_precision=PURE" not in run.text("precision"),
    )
    if run.text("table").startswith(_FOUNDRY_TABLES_BEFORE_TORCH_2_1) or run.text("table").endswith(
        _FOUNDRY_FP8_RECOMPUTES_EVERY_GEMM
    ):
        par["recompute_early_stop"] = False
    doc = _document(run, _model(run, activation="gelu", untie=False), gpu, par, "llm_foundry")
    return Case(
        source=run.source,
        config_id=run.config_id,
        document=doc,
        measured_iteration_time_s=_tokens_per_iteration(run)
        / run.metrics["throughput_tokens_per_s"],
        derived_from="throughput_tokens_per_s",
    )


_NEMO_PRESETS = {"GPT3-175B": "gpt3-175b", "Nemotron-340B": "nemotron4-340b"}


SQUAD_PACKED_SAMPLE_LENGTH = 256
"""Mean tokens per SQuAD v1.1 sample (context paragraph, question and answer in NeMo's SFT
prompt, Llama-2 tokenizer) packed into the 4096-token sequences: not stated by the source;
any value from 128 to 512 moves the fine-tuning predictions by less than 2 % (test)."""


_NEMO_VIRTUAL_PIPELINE = {"LLAMA2-13B": 10, "LLAMA2-70B": 20}
"""Virtual pipeline of NeMo 24.07's pretraining recipes (the table's pretraining rows); the
fine-tuning table does not state it, so its pipelined rows take their model's."""


def _fine_tuning(run: PublishedRun) -> dict[str, Any]:
    """The ``training`` fields of a NeMo fine-tuning row: SFT or LoRA (NeMo 24.07's
    ``megatron_gpt_finetuning_config.yaml`` defaults: ``adapter_dim`` 32 on
    ``target_modules: ['attention_qkv']``), SQuAD packed to 4096 tokens."""
    out: dict[str, Any] = {"packed_sample_length": SQUAD_PACKED_SAMPLE_LENGTH}
    if "_LoRA_" in run.config_id:
        out.update(mode="lora", lora_rank=32, lora_targets=["linear_qkv"])
    else:
        out["mode"] = "sft"
    return out


def _convert_nemo(run: PublishedRun) -> Case:
    tuning = run.text("table") != "Pretraining"
    name = run.text("model_name")
    assumptions = ["recompute none", "sequence_parallel when tp > 1", "zero_stage 1"]
    if tuning:
        assumptions += [
            f"packed_sample_length {SQUAD_PACKED_SAMPLE_LENGTH} (SQuAD samples; not stated)",
            "LoRA: NeMo 24.07's default rank 32 on the QKV projection",
        ]
    model: dict[str, Any]
    if run.integer("layers") is None or run.integer("vocab") is None:
        preset = _NEMO_PRESETS.get(name)
        if preset is None:
            raise SkipError(NO_ARCHITECTURE)
        stated = {
            key: run.integer(column)
            for key, column in _ARCHITECTURE_COLUMNS.items()
            if run.integer(column) is not None
        }
        model = {"preset": preset, **stated}
        assumptions.append(f"architecture values missing from the row taken from preset {preset}")
    else:
        llama = name.upper().startswith("LLAMA")
        model = _model(run, activation="swiglu" if llama else "gelu", untie=llama)
    tp = run.integer("tp") or 1
    par = _layout(run, sequence_parallel=tp > 1, recompute="none", zero_stage=1, precision="fp8")
    vp = _NEMO_VIRTUAL_PIPELINE.get(name)
    if tuning and vp and (run.integer("pp") or 1) > 1 and run.integer("vp") is None:
        par["virtual_pipeline"] = vp
        assumptions.append(f"virtual_pipeline {vp} (not stated; NeMo's pretraining recipe)")
    document = _document(run, model, "h100-sxm", par, "nemo")
    if tuning:
        document["training"].update(_fine_tuning(run))
    return Case(
        source=run.source,
        config_id=run.config_id,
        document=document,
        measured_iteration_time_s=_tokens_per_iteration(run)
        / (run.metrics["tokens_per_s_per_gpu"] * _num(run, "num_gpus")),
        derived_from="tokens_per_s_per_gpu",
        assumptions=tuple(assumptions),
    )


_ARCHITECTURE_COLUMNS = {
    "num_layers": "layers",
    "hidden_size": "hidden",
    "num_attention_heads": "heads",
    "num_query_groups": "kv_heads",
    "ffn_hidden_size": "ffn_hidden",
    "vocab_size": "vocab",
    "seq_length": "seq_len",
}
"""Scenario model field -> CSV column."""


def _titan_async_tp(run: PublishedRun) -> bool:
    """Whether a torchtitan row ran async tensor parallelism: its techniques name "AsyncTP"
    (benchmarks/llama3_h100_202412_torchtitan.md @ 820504e20, Tables 4-6) or "async TP" (the
    async-TP benchmark's table, benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md @ 5ecb74e5,
    whose commands add ``--parallelism.enable_async_tensor_parallel``; its "vanilla TP" rows do
    not). Async TP is torch._inductor's ``micro_pipeline_tp`` pass over torch.compile'd graphs
    (torchtitan refuses it without compile): each sequence-parallel all-gather before the
    column-parallel linears (wq/wk/wv, w1/w3) and reduce-scatter after the row-parallel ones
    (wo, w2) becomes SymmetricMemory chunks interleaved with the partial GEMMs, the mechanism the
    scenario's ``tp_comm_overlap`` states (the Transformer Engine userbuffers of Megatron's
    ``--tp-comm-overlap`` decompose the same collectives under the same GEMMs)."""
    return "asynctp" in run.notes.lower().replace(" ", "")


_TITAN_COMPILES_LOSS = frozenset({"820504e", "e7c0cae"})
"""torchtitan commits of the benchmark runs whose ``training.compile`` also compiles the loss:
``build_cross_entropy_loss`` wraps ``cross_entropy_loss`` in ``torch.compile`` when it is set
(``torchtitan/components/loss.py`` @ ``820504e2`` and @ ``e7c0cae9``). At ``9dec370a`` (the
Dec-2024 benchmark) ``train.py`` leaves the loss eager (its ``torch.compile(loss_fn)`` is
commented out)."""
_TITAN_COMMIT = re.compile(r"torchtitan ([0-9a-f]{7})")


def _titan_compiled_loss(run: PublishedRun) -> bool:
    """Whether a torchtitan row's loss ran under torch.compile: the row names torch.compile
    and its benchmark ran a torchtitan commit that compiles the loss with the model."""
    commit = _TITAN_COMMIT.search(run.text("source"))
    compiled = "torch.compile" in run.notes
    return compiled and commit is not None and commit.group(1) in _TITAN_COMPILES_LOSS


_TITAN_FUSED_ADAMW = frozenset({"820504e", "e7c0cae"})
"""torchtitan commits of the benchmark runs whose AdamW ran the fused implementation: both come
after pytorch/torchtitan@6e4988550 (2025-02-24), which made ``optimizer.implementation`` default
to ``fused`` (``build_optimizers``: ``fused=implementation == "fused"``,
``foreach=implementation == "foreach"``), and their configs leave it unset
(``torchtitan/models/llama3/train_configs/llama3_8b.toml`` / ``llama3_70b.toml`` @ ``820504e2``
and @ ``e7c0cae9``; the Trainy benchmark's command and the async-TP benchmark set no optimizer
flag). The Dec-2024 benchmark's ``9dec370a`` builds ``AdamW`` with ``"foreach": not fused`` and
``--optimizer.fused`` off by default (``torchtitan/optimizer.py``, ``config_manager.py``;
``train_configs/llama3_*.toml`` set no ``fused``): foreach."""


def _titan_optimizer_implementation(run: PublishedRun) -> str:
    """``parallelism.optimizer_implementation`` of a torchtitan row: ``fused`` for the commits
    of ``_TITAN_FUSED_ADAMW``, ``foreach`` otherwise (the Dec-2024 benchmark)."""
    commit = _TITAN_COMMIT.search(run.text("source"))
    return "fused" if commit is not None and commit.group(1) in _TITAN_FUSED_ADAMW else "foreach"


_TITAN_FULL_AC_STOPS_EARLY = True
"""torchtitan's full activation checkpointing at the benchmark commits (``9dec370a``,
2024-12-26; ``e7c0cae9`` / ``820504e2``, June 2025) wraps each block in
``ptd_checkpoint_wrapper(module, preserve_rng_state=False)``
(``torchtitan/parallelisms/parallelize_llama.py`` @ ``9dec370a``,
``torchtitan/models/llama3/infra/parallelize.py`` @ ``42b0beb4b``), whose ``checkpoint_impl``
defaults to ``NO_REENTRANT`` (torch 2.2 and later, pytorch/pytorch#108435), so torch's default
early stop holds (``parallelism.recompute_early_stop`` true). pytorch/torchtitan@25413d224
(2025-08-29) turned it off by default (``early_stop: bool = False``), which the ``torchtitan``
profile, describing the current code, keeps. The compiled rows reach the same: AOTAutograd's
partitioner re-runs only what the backward reads, and the down projection's output is not
read by it."""


_TITAN_SEPARATE_QKV = True
"""torchtitan's Llama at the benchmark commits (``9dec370a``, 2024-12-26; ``e7c0cae9`` /
``820504e2``, June 2025) projects query, key and value with three linears, ``wq`` / ``wk`` /
``wv`` (``Attention``, ``torchtitan/models/llama/model.py`` @ ``9dec370a``,
``torchtitan/models/llama3/model.py`` @ ``820504e2`` and @ ``e7c0cae9``), each sharded as its
own ``ColwiseParallel`` linear (``apply_tp``), so every row states
``parallelism.separate_qkv_projections`` true. pytorch/torchtitan@3396a4b37 (2026-06-24)
fused them into one ``wqkv`` by default, which the ``torchtitan`` profile, describing the
current code, keeps. The MLP's ``w1`` / ``w3`` were separate then and still are: the
profile's ``separate_gate_up_projections`` holds for the rows as it stands."""


_TITAN_FP8_TP_ALL_GATHER = True
"""``parallelism.fp8_tp_all_gather`` of the torchtitan FP8 rows with tensor parallelism: at
the benchmark commits ``apply_tp`` all-gathers FP8 through torchao's float8 tensor-parallel
styles under tensorwise float8 (``enable_float8_tensorwise_tp``,
``torchtitan/models/llama3/parallelize_llama.py`` @ ``820504e2`` and @ ``e7c0cae9``; at
``9dec370a`` float8 was tensorwise only, ``torchtitan/parallelisms/parallelize_llama.py``),
which current torchtitan no longer does (the ``torchtitan`` profile). Every FP8 row is
converted with the tensorwise recipe, the async-TP benchmark's rowwise ones too (whose
``apply_tp`` used regular 16-bit TP): they stay the tensorwise twins they collapse into, and
the slower twin is dropped (RESULTS.md), so they state the tensorwise runs' gathers."""


def _convert_torchtitan(run: PublishedRun) -> Case:
    if run.integer("micro_batch") is None:
        raise SkipError(PP_MICROBATCH_NOT_STATED)
    # the H100 rows ran on Meta Grand Teton's 96 GB HBM2e, 500 W H100s (both benchmark docs'
    # "Hardware" sections): the catalog's h100-sxm-96gb, not the 80 GB, 700 W h100-sxm
    gpu = "h200" if run.text("gpu").startswith("H200") else "h100-sxm-96gb"
    recompute = run.text("recompute")
    fp8 = run.text("precision").startswith("FP8")
    tp = run.integer("tp") or 1
    par = _layout(
        run,
        recompute="full" if recompute.startswith("full") else "selective",
        zero_stage=3,
        precision="fp8" if fp8 else "bf16",
        # torchao float8 linears: dynamic per-tensor (current) scaling
        **({"fp8_recipe": "tensorwise"} if fp8 else {}),
        # async TP splits the layers' all-gathers and reduce-scatters under their GEMMs
        **({"tp_comm_overlap": _titan_async_tp(run)} if tp > 1 else {}),
        **({"fp8_tp_all_gather": _TITAN_FP8_TP_ALL_GATHER} if fp8 and tp > 1 else {}),
        optimizer_implementation=_titan_optimizer_implementation(run),
        separate_qkv_projections=_TITAN_SEPARATE_QKV,
    )
    if recompute.startswith("full"):
        par["recompute_early_stop"] = _TITAN_FULL_AC_STOPS_EARLY
    memory = run.metrics.get("peak_memory")
    assumptions = ["sequence_parallel when tp > 1"]
    if gpu == "h100-sxm-96gb":
        assumptions.append("peak FLOP/s of the 96 GB / 500 W H100: midpoint of H100 NVL and SXM")
    document = _document(run, _model(run, activation="swiglu", untie=True), gpu, par, "torchtitan")
    if _titan_compiled_loss(run):
        document["training"]["compiled_loss"] = True
    return Case(
        source=run.source,
        config_id=run.config_id,
        document=document,
        measured_iteration_time_s=_tokens_per_iteration(run)
        / (run.metrics["tokens_per_s_per_gpu"] * _num(run, "num_gpus")),
        derived_from="tokens_per_s_per_gpu",
        measured_peak_memory_bytes=None if memory is None else memory * GIB,
        assumptions=tuple(assumptions),
    )


CONVERTERS: Mapping[str, Callable[[PublishedRun], Case]] = {
    "sc21": _convert_sc21,
    "korthikanti2022": _convert_korthikanti,
    "megatron_h100": _convert_megatron_h100,
    "llm_foundry": _convert_llm_foundry,
    "nemo_24.07": _convert_nemo,
    "torchtitan": _convert_torchtitan,
    "moe_h100_2025": convert_moe_h100,
    "megatron_bridge_2025": convert_bridge,
}


def convert(run: PublishedRun) -> Case | Unusable:
    """One published run as a ``Case``, or an ``Unusable`` naming the reason."""
    try:
        return CONVERTERS[run.source](run)
    except SkipError as skip:
        return Unusable(source=run.source, config_id=run.config_id, reason=skip.reason)


def scenario_key(case: Case) -> str:
    """The case's scenario without its name, as canonical JSON (equal scenarios, equal keys)."""
    doc = {k: v for k, v in case.document.items() if k != "name"}
    return json.dumps(doc, sort_keys=True)


def deduplicate(cases: Iterable[Case]) -> tuple[list[Case], list[Unusable]]:
    """Keep one case per (source, release, scenario): the fastest measured one (the best-tuned
    run of options the format cannot express). Returns the kept cases (input order) and the
    dropped."""
    best: dict[tuple[str, str, str], Case] = {}
    for case in cases:
        key = (case.source, case.release, scenario_key(case))
        held = best.get(key)
        if held is None or case.measured_iteration_time_s < held.measured_iteration_time_s:
            best[key] = case
    winners = {id(c) for c in best.values()}
    kept, dropped = [], []
    for case in cases:
        if id(case) in winners:
            kept.append(case)
        else:
            dropped.append(Unusable(source=case.source, config_id=case.config_id, reason=DUPLICATE))
    return kept, dropped


def calibration_eligible(source: str, config_id: str) -> bool:
    """True when the configuration may be a calibration row: every row of the dense sources; of
    ``moe_h100_2025`` the rows its README rates high confidence (NeMo Automodel and the main
    table of Megatron-MoE-ModelZoo; its long-context rows, the Megatron-LM MoE README and
    FlagPerf rows are medium or low confidence and always held out)."""
    if source != "moe_h100_2025":
        return True
    return config_id.startswith("am_") or (
        config_id.startswith("mz_") and "longctx" not in config_id
    )


def mark_calibration(cases: Iterable[Case]) -> list[Case]:
    """Set ``calibration`` by the declared rule (``CALIBRATION_EVERY`` over the
    ``calibration_eligible`` cases of each of ``SPLIT_SOURCES``); keeps the order."""
    cases = list(cases)
    chosen: set[tuple[str, str]] = set()
    for source in SPLIT_SOURCES:
        ids = sorted(
            c.config_id
            for c in cases
            if c.source == source and calibration_eligible(source, c.config_id)
        )
        chosen.update((source, cid) for cid in ids[::CALIBRATION_EVERY])
    return [replace(c, calibration=c.key in chosen) for c in cases]


@dataclass(frozen=True, slots=True, kw_only=True)
class Dataset:
    """Everything the harness evaluates.

    ``cases``: usable, de-duplicated, calibration marked (timing). ``memory_cases``: every
    converted case with a published peak memory, duplicates included (torch.compile changes
    memory, so each row is its own check). ``unusable``: the rest with reasons. ``num_configs``:
    configurations per source in the CSVs.
    """

    cases: list[Case]
    memory_cases: list[Case]
    unusable: list[Unusable]
    num_configs: dict[str, int] = field(default_factory=dict)


def build_dataset(sources: Iterable[str] = tuple(SOURCE_FILES), **kwargs: Any) -> Dataset:
    """Load, convert, de-duplicate and split every source (``kwargs`` go to ``load_runs``)."""
    converted: list[Case] = []
    unusable: list[Unusable] = []
    num_configs: dict[str, int] = {}
    for source in sources:
        runs = load_runs(source, **kwargs)
        num_configs[source] = len(runs)
        for run in runs:
            result = convert(run)
            if isinstance(result, Case):
                converted.append(result)
            else:
                unusable.append(result)
    kept, dropped = deduplicate(converted)
    accepted, refused = accept(mark_calibration(kept))
    refused_keys = {(u.source, u.config_id) for u in refused}
    return Dataset(
        cases=accepted,
        memory_cases=[
            c
            for c in converted
            if c.measured_peak_memory_bytes is not None and c.key not in refused_keys
        ],
        unusable=unusable + dropped + refused,
        num_configs=num_configs,
    )


def accept(cases: Iterable[Case]) -> tuple[list[Case], list[Unusable]]:
    """Split ``cases`` into those ``parse_scenario`` accepts and those it refuses (``REFUSED``,
    the planner's message as ``detail``)."""
    accepted: list[Case] = []
    refused: list[Unusable] = []
    for case in cases:
        try:
            parse_scenario(case.document)
        except SpecError as err:
            refused.append(
                Unusable(
                    source=case.source,
                    config_id=case.config_id,
                    reason=REFUSED,
                    detail=str(err),
                )
            )
        else:
            accepted.append(case)
    return accepted, refused
