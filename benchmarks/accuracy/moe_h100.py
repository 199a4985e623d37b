"""The 2025 MoE runs on H100 (``moe_h100_2025.csv``) -> scenario documents with a measured time.

Four publishers (``tests/data/ground_truth/README.md``), each converted as it ran:

* **NeMo Automodel** (``am_*``, ``docs/performance-summary.mdx`` @ ``36044ad3d1``): PyTorch
  FSDP2 (``dp`` column = FSDP sharding size, ZeRO-3: one unit per block, reduced in fp32 by
  the MoE parallelizer's policy; the experts outside it, FSDP-sharded only over ``dp / ep``
  where that exceeds 1, the 1,024-GPU row; gradients reduced once per accumulation step or
  pipeline schedule run: the ``automodel`` profile's ``zero3_accumulate_unsharded``, sourced
  in ``planner.perf.frameworks``) + Transformer Engine + DeepEP, mock data
  and a *fake balanced gate* (``model.moe_router_round_robin``: token ``t`` to the ``k``
  consecutive experts from ``k·t``, every expert the same tokens). Every benchmark recipe of
  the published rows sets ``fake_balanced_gate: true`` (NVIDIA-NeMo/Automodel
  ``examples/benchmark/configs/{deepseek_v3,kimi_k2,qwen3_moe_30b,gptoss_20b}_te_deepep.yaml``
  @ ``89e3a9fdd6``; ``gptoss_120b_te_deepep.yaml`` @ ``2c236e081``, the first with the row's
  EP 64 and GBS 512; ``deepseek_v3_te_deepep_1024.yaml`` @ ``2c236e081``), and the doc says
  "Fake balanced gate is enabled to simulate ideal expert routing". Step time as published.
  Recompute: the recipe's ``activation_checkpointing`` (true = full recompute)
  as the row's notes quote it; GPT-OSS 20B's row does not quote it: full recompute, which its
  recipe sets (``gptoss_20b_te_deepep.yaml`` @ ``89e3a9fdd6`` and @ ``2c236e081``:
  ``activation_checkpointing: true``; the 120B's quoted recipe alone says false). Both GPT-OSS
  recipes run ``attn: flex`` (the only attention Automodel's GPT-OSS accepts: the preset's
  ``softmax_type``, ``planner.perf.frameworks``). GPT-OSS's
  expert-parallel column is ``-`` in the doc: its DeepEP recipes
  shard the experts over every GPU (``ep = num_gpus``; issue 13 names "GPT-OSS-120B with
  64-way expert parallel").
* **Megatron-MoE-ModelZoo** (``mz_*``, ``best_practice/qwen3/readme.md`` @ ``e8650517d6``):
  Megatron-Core, distributed optimizer (ZeRO-1) or Megatron-FSDP (ZeRO-3) as the table says,
  DeepEP (``flex`` dispatcher) unless it says A2A, expert tensor parallel and expert data
  parallel as stated (``ETP``/``EDP`` in the notes). Gradients are accumulated and reduced in
  fp32 (``parallelism.grad_reduce_in_fp32``): no ModelZoo script or model config at
  ``e8650517d6`` (nor the 2025-05 FSDP command, ``examples/qwen3/run_235b.sh`` @ ``31c5686128``)
  sets ``--grad-reduce-in-bf16``, and the stated code version (NVIDIA/Megatron-LM
  ``1e057005959b``) then turns ``accumulate_allreduce_grads_in_fp32`` on for bf16
  (``megatron/training/arguments.py``), which becomes the DDP and Megatron-FSDP config's
  ``grad_reduce_in_fp32`` (``training.py``; Megatron-FSDP's main-grad buffer is fp32 then,
  ``custom_fsdp/param_and_grad_buffer.py``). Main table: step time as published; the
  Megatron-FSDP row runs its launch command's tensor parallel 1, not the table's 2
  (``_LAUNCH_TENSOR_PARALLEL``).
  Long-context rows publish TFLOP/s per GPU only: time from Megatron-LM's
  ``num_floating_point_operations`` of 2025 (causal attention counted as half the square),
  which reproduces the main table's step time from its TFLOP/s within 0.5 % (test); micro-batch
  not stated (1, Megatron's default), ``dp = N/(tp·pp·cp)``, expert tensor parallel 1 (not
  stated: as every other ModelZoo Qwen3 row). ModelZoo's ``--recompute-modules`` ('norm' =
  ``layernorm``, 'act' = ``moe_act``) become ``parallelism.recompute_modules``. Qwen3-235B's 94
  layers over PP 8 x VPP 4 or PP 32 x VPP 3: Megatron-Core splits them only with the embedding
  and loss counted as layers (``--account-for-embedding/loss-in-pipeline-split``: 96 slots),
  the layouts' evident choice (not stated). The main table's launches
  (``examples/qwen3/run_235b.sh`` -> ``sbatch_benchmarking.sh`` with
  ``model_configs/benchmarking/Qwen3-235B-A22B.yaml`` @ ``31c5686128``) pass no
  ``--tp-comm-overlap`` (at that commit only ``Mixtral-8x22B.yaml`` sets it), off by default
  in Megatron-LM, and the README of that commit says it
  "currently only works for dense layer blocks ... and is not yet compatible with MoE layers":
  those rows state ``tp_comm_overlap: false``. The long-context rows' launches are not
  published (the later ``sbatch_benchmarking.sh`` @ ``e8650517d6`` adds ``--tp-comm-overlap``
  to every bf16 run): the profile's default stays.
* **Megatron-LM MoE README** (``mlm_moe_*``): Mixtral 8x7B 438 / 468 TFLOP/s with the README's
  best-mapping layout (low-medium confidence on the link); time from the 2024
  ``num_floating_point_operations`` (the full ``s x s`` square); distributed optimizer (the
  README's performance best practice), all-to-all dispatcher, dropless.
* **FlagPerf** (``flagperf_*``): Megatron-Core 0.6, TP8, ``--recompute-activations``
  (selective), time from tokens/s/GPU; the seq-8192 row publishes only an MFU with a FLOP count
  the source does not define (left out). The launch script passes
  ``--use-distributed-optimizer`` (ZeRO-1) in every commit of its history
  (FlagOpen/FlagPerf ``training/benchmarks/mixtral_8x7B/megatron/megatron_main.sh`` @
  ``68d2944f88``, ``VENDOR_ARGS``). It also passes ``--expert-model-parallel-size 8``, but
  Megatron-Core 0.6 refuses an expert-parallel size that does not divide the data-parallel size
  (``megatron/core/parallel_state.py`` @ ``core_v0.6.0``, ``initialize_model_parallel``), and
  this row's 32 GPUs at TP 8 PP 2 leave 2 data-parallel ranks: the README's ``PP2DP2EP1TP8``
  is the layout that ran (expert parallel 1). The script passes neither
  ``--overlap-grad-reduce`` nor ``--overlap-param-gather``, both ``store_true`` with
  ``default=False`` in that release (``megatron/training/arguments.py`` @ ``core_v0.6.0``), so
  the row states ``overlap_grad_reduce: false`` and ``overlap_param_gather: false``; nor does it
  pass ``--tp-comm-overlap`` (``store_true``, ``arguments.py`` @ ``core_v0.6.0``):
  ``tp_comm_overlap: false``.

Nemotron V3 (hybrid Mamba-2/attention MoE) and Qwen3-Next (hybrid Gated DeltaNet linear
attention) are left out: the planner does not model those layers.
"""

from __future__ import annotations

import re
from typing import Any, Final

from benchmarks.accuracy.cases import (
    ARCHITECTURE_NOT_MODELLED_LINEAR_ATTENTION,
    ARCHITECTURE_NOT_MODELLED_MAMBA,
    MFU_ONLY,
    SUPERSEDED,
    Case,
    SkipError,
    document,
    layout,
    model_fields,
    num,
)
from benchmarks.accuracy.runs import PublishedRun

__all__ = ["SOURCE", "convert_moe_h100", "megatron_flops_per_token"]

SOURCE = "moe_h100_2025"

PRESETS = (
    ("DeepSeek V3", "deepseek-v3"),
    ("Kimi K2", "kimi-k2"),
    ("Qwen3 MoE 30B", "qwen3-30b-a3b"),
    ("Qwen3-235B-A22B", "qwen3-235b-a22b"),
    ("GPT-OSS 20B", "gpt-oss-20b"),
    ("GPT-OSS 120B", "gpt-oss-120b"),
    ("Mixtral 8x7B", "mixtral-8x7b"),
)
"""Model name prefix in the CSV -> catalog preset (``planner/catalog/models.yaml``)."""

_NOTE_INT = re.compile(r"(moe_ffn_hidden|shared_intermediate|kv_channels)=(\d+)")


def _notes_ints(run: PublishedRun) -> dict[str, int]:
    return {key: int(value) for key, value in _NOTE_INT.findall(run.notes)}


def megatron_flops_per_token(
    model: dict[str, Any], *, causal_half: bool, gated: bool = True
) -> float:
    """Megatron-LM ``num_floating_point_operations`` / (batch · seq) for an MoE GPT with GQA.

    ``model`` holds ``num_layers``, ``hidden_size``, ``num_attention_heads``,
    ``num_query_groups``, ``kv_channels``, ``seq_length``, ``vocab_size`` (padded),
    ``moe_ffn_hidden_size``, ``moe_router_topk`` and optionally ``num_dense_layers``,
    ``ffn_hidden_size``, ``moe_shared_expert_intermediate_size``. ``causal_half``: the 2025
    formula counts half the ``s x s`` attention square (``seq_length / hidden_size / 2``); the
    2024 one counts it whole. ``12 = 3 (fwd, wgrad, dgrad) x 2 (GEMMs per block) x 2 (FMA)``.
    """
    layers, h = model["num_layers"], model["hidden_size"]
    heads, groups = model["num_attention_heads"], model["num_query_groups"]
    seq = model["seq_length"]
    q_ratio = model["kv_channels"] * heads / h
    square = seq / h / (2.0 if causal_half else 1.0)
    attention = 12.0 * layers * h * h * (1.0 + groups / heads + square) * q_ratio
    glu = 1.5 if gated else 1.0
    dense = model.get("num_dense_layers", 0)
    moe = layers - dense
    mlp = (
        12.0
        * h
        * glu
        * (
            model.get("ffn_hidden_size", 0) * dense
            + model["moe_ffn_hidden_size"] * model["moe_router_topk"] * moe
            + model.get("moe_shared_expert_intermediate_size", 0) * moe
        )
    )
    logit = 6.0 * h * model["vocab_size"]
    return float(attention + mlp + logit)


def _preset(run: PublishedRun) -> str:
    name = run.text("model_name")
    if name.startswith("Nemotron V3"):
        raise SkipError(ARCHITECTURE_NOT_MODELLED_MAMBA)
    if name.startswith("Qwen3-Next"):
        raise SkipError(ARCHITECTURE_NOT_MODELLED_LINEAR_ATTENTION)
    for prefix, preset in PRESETS:
        if name.startswith(prefix):
            return preset
    raise ValueError(f"{run.config_id}: no preset for model {name!r}")


def _model(run: PublishedRun, preset: str, **moe: Any) -> dict[str, Any]:
    """The preset (its config.json agrees with the row's stated architecture: tests), the
    row's sequence length, and the MoE options it ran with (``moe``)."""
    model: dict[str, Any] = {"preset": preset, "seq_length": num(run, "seq_len"), **moe}
    return model


def _routing(run: PublishedRun) -> dict[str, Any]:
    """Automodel's fake balanced gate (a round-robin gate: every expert its even share, each
    token on consecutive experts), ModelZoo's forced-balance cells (Megatron's
    ``--moe-router-force-load-balancing``: random routing, even on average), else dropless
    (the model's default imbalance)."""
    if "fake balanced gate" in run.notes:
        return {"moe_router_round_robin": True}
    if "routing=forced_balance" in run.notes or run.config_id.startswith(_MODELZOO_MAIN):
        return {"moe_router_force_load_balancing": True}
    return {}


_MODELZOO_MAIN = "mz_qwen3_235b_256gpu_"
"""The ModelZoo main table's Qwen3-235B rows: their launch commands, added by the table's
author the same day (yanring/Megatron-MoE-ModelZoo ``examples/qwen3/run_235b.sh`` @
``31c5686128``, 2025-05-27, whose note reads "Add --moe-router-force-load-balancing for stable
benchmarking"), all five pass ``--moe-router-force-load-balancing``."""


_LAUNCH_TENSOR_PARALLEL: Final = {"mz_qwen3_235b_256gpu_intranodeEP8_fsdp": 1}
"""ModelZoo main-table rows whose launch command states another tensor-parallel size than the
table, and the launch's size. The Megatron-FSDP row's command (yanring/Megatron-MoE-ModelZoo
``examples/qwen3/run_235b.sh`` @ ``31c5686128``, "Intra-node EP + FSDP solution", committed
16 minutes before the table by the same author) runs ``TP=1 PP=1 VPP=1 EP=8 ... MBS=4``, which
``model_configs/benchmarking/Qwen3-235B-A22B.yaml`` passes on as
``--tensor-model-parallel-size: ${TP}``; the table row says TP 2, DP 128, GA 4. The table's
reading cannot give its own step time: Megatron-FSDP (``optim_grads_params``,
NVIDIA/Megatron-LM ``megatron/core/distributed/custom_fsdp/fully_sharded_data_parallel.py``
@ ``1e057005959b``) gathers each layer's parameters for the forward and again for the
backward and reduce-scatters its gradients after every backward ("grad_reduce_every_bprop"),
in fp32 (no ``--grad-reduce-in-bf16``); each GPU's expert parameters (28.4 B at EP 8) move over
an expert data-parallel group of 32 GPUs, one per node, so every microbatch sends and receives
31/32 of 8 bytes per expert parameter, 220 GB per GPU. At GA 4 that is 880 GB, 17.6 s at the
table's own 50 GB/s of InfiniBand per GPU: the published step with nothing else on the
critical path and the links at line rate (``tests/golden/test_moe_h100.py``). The launch's
TP 1 (DP 256, GA 2) halves it."""


def _recompute_automodel(run: PublishedRun) -> tuple[str, str | None]:
    """Full recompute when the quoted recipe sets ``activation_checkpointing: true`` or does
    not say (Automodel's benchmark recipes checkpoint unless they say false)."""
    if "activation_checkpointing: false" in run.notes:
        return "none", None
    if "activation_checkpointing: true" in run.notes:
        return "full", None
    return "full", "recompute full (recipe not quoted; Automodel's benchmark recipes checkpoint)"


def _local_batch_size(run: PublishedRun) -> int:
    """The row's ``LBS`` (Automodel's ``step_scheduler.local_batch_size``, quoted in the
    notes): under pipeline parallelism each gradient-accumulation step runs the schedule once
    over it, in microbatches of ``pp_microbatch_size`` (the ``micro_batch`` column)."""
    found = re.search(r"\bLBS=(\d+)", run.notes)
    if found is None:
        raise ValueError(f"{run.config_id}: the notes quote no LBS=<local batch size>")
    return int(found.group(1))


def _automodel(run: PublishedRun, preset: str) -> tuple[dict[str, Any], list[str]]:
    assumptions = ["zero_stage 3 (FSDP2)"]
    recompute, assumed = _recompute_automodel(run)
    if assumed:
        assumptions.append(assumed)
    ep = run.integer("ep")
    if ep is None:
        ep = num(run, "num_gpus") // (run.integer("pp") or 1)
        assumptions.append(f"expert_parallel {ep} (EP column '-'; DeepEP recipe over every GPU)")
    par = layout(
        run,
        expert_parallel=ep,
        data_parallel=num(run, "dp"),
        recompute=recompute,
        zero_stage=3,
        precision="bf16",
        sequence_parallel=False,
    )
    if (run.integer("pp") or 1) > 1:
        par["pipeline_batch_size"] = _local_batch_size(run)
    moe: dict[str, Any] = {
        "moe_token_dispatcher_type": "flex",  # DeepEP
        "moe_grouped_gemm": True,  # TE GroupedLinear experts
        **_routing(run),
    }
    if preset == "deepseek-v3":
        moe["mtp_num_layers"] = 0
        moe["moe_router_num_groups"] = moe["moe_router_group_topk"] = 0  # the gate is replaced
        assumptions.append("no MTP module (Automodel's DeepSeek-V3 trains the 61 layers)")
    doc = document(run, _model(run, preset, **moe), "h100-sxm", par, "automodel")
    return doc, assumptions


def _megatron_zero(run: PublishedRun) -> int:
    return 3 if run.text("zero_stage").startswith("FSDP") else 1


def _modelzoo(run: PublishedRun, preset: str) -> tuple[dict[str, Any], list[str]]:
    assumptions: list[str] = []
    tp = run.integer("tp") or 1
    extra: dict[str, Any] = {}
    launch_tp = _LAUNCH_TENSOR_PARALLEL.get(run.config_id)
    if launch_tp is not None and launch_tp != tp:
        assumptions.append(
            f"tensor_parallel {launch_tp} (the launch command's TP={launch_tp}; the table's "
            f"TP {tp} exceeds the InfiniBand time of its own step)"
        )
        tp = extra["tensor_parallel"] = launch_tp
    recompute_text = run.text("recompute")
    if recompute_text == "full":
        recompute = "full"
    elif recompute_text:
        # ModelZoo's --recompute-modules: 'norm' = layernorm, 'act' = moe_act
        recompute = "selective"
        names = {"norm": "layernorm", "act": "moe_act", "shared_expert": "shared_experts"}
        listed = recompute_text.removeprefix("selective:").split(",")
        extra["recompute_modules"] = [names.get(m.strip(), m.strip()) for m in listed]
    else:
        recompute = "none"
    if run.integer("micro_batch") is None:
        assumptions.append("micro_batch_size 1 (not stated; Megatron default)")
    if tp > 1 and ("ETP=1" in run.notes or "longctx" in run.config_id):
        extra["expert_tensor_parallel"] = 1
        if "ETP=1" not in run.notes:
            assumptions.append("expert_tensor_parallel 1 (as every other ModelZoo Qwen3 row)")
    chunks = (run.integer("pp") or 1) * (run.integer("vp") or 1)
    if chunks > 1 and num(run, "layers") % chunks:
        # 94 layers + the embedding and loss slots = 96 = pp·vp·k: the split ModelZoo's PP 8 x
        # VPP 4 (3 slots per chunk) and PP 32 x VPP 3 (1 per chunk) layouts give
        extra["account_for_embedding_in_pipeline_split"] = True
        extra["account_for_loss_in_pipeline_split"] = True
        assumptions.append("account_for_embedding/loss_in_pipeline_split (94 + 2 = 96 slots)")
    par = layout(
        run,
        expert_parallel=num(run, "ep"),
        sequence_parallel=tp > 1,
        recompute=recompute,
        zero_stage=_megatron_zero(run),
        precision="bf16",
        grad_reduce_in_fp32=True,  # no --grad-reduce-in-bf16 (module docstring)
        **extra,
    )
    moe: dict[str, Any] = {
        "moe_token_dispatcher_type": "alltoall" if "dispatcher=A2A" in run.notes else "flex",
        "moe_grouped_gemm": True,  # the ModelZoo recipes' --moe-grouped-gemm
        **_routing(run),
    }
    if "1f1b overlap" in run.notes:
        moe["overlap_moe_expert_parallel_comm"] = True
    if run.config_id.startswith(_MODELZOO_MAIN):  # no --tp-comm-overlap (module docstring)
        par["tp_comm_overlap"] = False
    doc = document(run, _model(run, preset, **moe), "h100-sxm", par, "megatron")
    return doc, assumptions


def _mixtral_megatron(run: PublishedRun, preset: str) -> tuple[dict[str, Any], list[str]]:
    tp = run.integer("tp") or 1
    flagperf = run.config_id.startswith("flagperf_")
    recompute = "selective" if run.text("recompute") == "recompute-activations" else "none"
    # FlagPerf's megatron_main.sh passes --use-distributed-optimizer (module docstring)
    assumptions = [
        "zero_stage 1 (the launch script's --use-distributed-optimizer)"
        if flagperf
        else "zero_stage 1 (distributed optimizer, the MoE README's best practice)",
        "sequence_parallel when tp > 1",
    ]
    # FlagPerf's megatron_main.sh passes none of --overlap-grad-reduce, --overlap-param-gather
    # and --tp-comm-overlap, all off by default in Megatron-LM core_v0.6.0 (module docstring)
    overlap = (
        {"overlap_grad_reduce": False, "overlap_param_gather": False, "tp_comm_overlap": False}
        if flagperf
        else {}
    )
    par = layout(
        run,
        expert_parallel=run.integer("ep") or 1,
        sequence_parallel=tp > 1,
        recompute=recompute,
        zero_stage=1,
        precision="bf16",
        **overlap,
    )
    moe = {
        # FlagPerf ran Megatron-Core 0.6 (default all-gather dispatcher) with
        # --moe-grouped-gemm; the README's best mapping: all-to-all, grouped GEMM
        "moe_token_dispatcher_type": "allgather" if flagperf else "alltoall",
        "moe_grouped_gemm": True,
    }
    doc = document(run, _model(run, preset, **moe), "h100-sxm", par, "megatron")
    return doc, assumptions


def _flops_model(run: PublishedRun) -> dict[str, Any]:
    """The architecture Megatron's FLOP formula reads, from the row and its notes."""
    notes = _notes_ints(run)
    model = model_fields(run, activation="swiglu", untie=True)
    return {
        **model,
        "kv_channels": notes.get(
            "kv_channels", model["hidden_size"] // model["num_attention_heads"]
        ),
        "moe_ffn_hidden_size": notes.get("moe_ffn_hidden", model["ffn_hidden_size"]),
        "moe_router_topk": num(run, "moe_topk"),
    }


def _measured(run: PublishedRun) -> tuple[float, str]:
    """Measured seconds per iteration and what they were derived from."""
    metrics = run.metrics
    if "step_time" in metrics:
        return metrics["step_time"], "step_time"
    gpus = num(run, "num_gpus")
    tokens = num(run, "global_batch") * num(run, "seq_len")
    if "tokens_per_sec_per_gpu" in metrics:
        return tokens / (metrics["tokens_per_sec_per_gpu"] * gpus), "tokens_per_sec_per_gpu"
    if "model_tflops_per_gpu" in metrics:
        causal_half = run.config_id.startswith("mz_")
        flops = tokens * megatron_flops_per_token(_flops_model(run), causal_half=causal_half)
        year = "2025" if causal_half else "2024"
        seconds = flops / (metrics["model_tflops_per_gpu"] * 1e12 * gpus)
        return seconds, f"model_tflops_per_gpu (Megatron-LM {year} FLOPs)"
    raise SkipError(MFU_ONLY)


PUBLISHERS: Final = (
    ("am_", "NVIDIA-NeMo/Automodel"),
    ("mz_", "yanring/Megatron-MoE-ModelZoo"),
    ("mlm_", "NVIDIA/Megatron-LM"),
    ("flagperf_", "FlagOpen/FlagPerf"),
)
"""Config id prefix -> the publisher (the CSV's ``source`` repository) whose machines and
stack measured the row: four clusters, not one (``Case.cluster``)."""


def publisher_of(config_id: str) -> str:
    """The publisher of a ``moe_h100_2025`` row (``PUBLISHERS``); raises ``ValueError`` for an
    id with none of the prefixes."""
    for prefix, publisher in PUBLISHERS:
        if config_id.startswith(prefix):
            return publisher
    raise ValueError(f"{config_id}: no publisher for this config id prefix")


def convert_moe_h100(run: PublishedRun) -> Case:
    """One ``moe_h100_2025`` configuration as a ``Case`` (module docstring); raises
    ``SkipError`` for rows left out."""
    if "SUPERSEDED" in run.notes:
        raise SkipError(SUPERSEDED)
    preset = _preset(run)
    measured, derived_from = _measured(run)
    if run.config_id.startswith("am_"):
        doc, assumptions = _automodel(run, preset)
    elif run.config_id.startswith("mz_"):
        doc, assumptions = _modelzoo(run, preset)
    else:
        doc, assumptions = _mixtral_megatron(run, preset)
    return Case(
        source=run.source,
        config_id=run.config_id,
        document=doc,
        measured_iteration_time_s=measured,
        derived_from=derived_from,
        assumptions=tuple(assumptions),
        cluster=publisher_of(run.config_id),
    )
