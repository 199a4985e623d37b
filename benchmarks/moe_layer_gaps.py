"""What the MoE rows' measured step leaves per MoE layer and micro-batch, against the model's
terms: the check of "which term is too small" before a mechanism is proposed.

For every usable MoE row of ``megatron_bridge_2025`` and ``moe_h100_2025``
(``benchmarks.accuracy``): the measured and predicted iteration time per MoE layer and
micro-batch on one GPU, ``t / (n_mb · L / pp)`` (``n_mb = gbs / (dp · mbs)``; the whole step
is divided, so the embedding, loss, bubble and optimizer ride along), the gap (measured -
predicted), the model's own MoE layer (forward + backward + what selective recompute repeats,
``planner.perf.operators.operator_times``; the host floor of the dropless forward,
``moe_host_exposed_s``, shown apart) and its exposed expert-parallel exchange
(``breakdown_s.ep_comm_exposed`` per layer and micro-batch). ``gap / layer`` is the factor the
model's MoE layer would have to grow by to close the row alone.

A second table predicts the same models and layouts as a later container ran them (26.06,
``LATER_RUNS``): as shipped (no CUDA-graph or overlap knob stated), and with what that
release's performance configs state and the scenario can say (``training.cuda_graphs:
full_iteration``, ``model.overlap_moe_expert_parallel_comm``). The row's other changes (the
fused CuTe DSL grouped MLP, FP8 attention) are not in the scenario.

    .venv/bin/python -m benchmarks.moe_layer_gaps    # Markdown tables on stdout (~5 CPU-s)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from benchmarks.accuracy.convert import Case, build_dataset
from planner.perf import DefaultEfficiency, predict
from planner.perf.batch import ScenarioArrays
from planner.perf.moe_mlp import moe_host_exposed_s
from planner.perf.operators import operator_times
from planner.scenario import parse_scenario

SOURCES = ("megatron_bridge_2025", "moe_h100_2025")

LATER_SOURCE = (
    "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @ 067f987df03b (26.06 "
    "NeMo container, MXFP8, force-balanced dropless MoE); knobs: scripts/performance/configs/"
    "qwen/qwen3_workload_base_configs.py @ v0.5.0 (QWEN3_30B_A3B_PRETRAIN_CONFIG_<GPU>_FP8_MX_V1,"
    " QWEN3_235B_A22B_PRETRAIN_CONFIG_<GPU>_FP8_MX_V2: moe_a2a_overlap, cuda_graph_impl "
    "full_iteration, HybridEP, cutedsl_fused_grouped_mlp, fp8_dot_product_attention)"
)
"""Where ``LATER_RUNS`` come from."""

LATER_RUNS: tuple[tuple[str, str, int, int, int, int, int, int, float], ...] = (
    # preset, GPU, GPUs, global batch, micro-batch, PP, VP (1: none), EP; tokens/s/GPU
    ("qwen3-30b-a3b", "gb200", 8, 512, 4, 1, 1, 8, 40706.0),
    ("qwen3-30b-a3b", "gb300", 8, 512, 8, 1, 1, 8, 45275.0),
    ("qwen3-235b-a22b", "gb200", 256, 8192, 1, 8, 3, 32, 7376.0),
    ("qwen3-235b-a22b", "gb300", 256, 8192, 2, 4, 12, 32, 9015.0),
)
"""26.06 runs of ``LATER_SOURCE`` (sequence 4096, TP 1, CP 1) at the layouts of the 25.11 rows
of the same model and GPU (the GB300 Qwen3-235B row's EP 32, not 25.11's 16)."""


def _row(case: Case) -> tuple[str, float, str] | None:
    """(GPU name, signed error, Markdown row) of one MoE case; None for a dense one."""
    scenario = parse_scenario(case.document)
    a = ScenarioArrays.from_scenario(scenario)
    if float(a.num_moe_layers) == 0.0:
        return None
    eff = DefaultEfficiency()
    times = operator_times(a, eff)
    prediction = predict(scenario, eff)
    par = scenario.parallelism
    pp = par.pipeline_parallel
    dp = scenario.hardware.num_gpus / (par.tensor_parallel * pp * par.context_parallel)
    layer_mb = par.global_batch_size / (dp * par.micro_batch_size) * scenario.model.num_layers / pp
    measured = case.measured_iteration_time_s / layer_mb
    predicted = prediction.iteration_time_s / layer_mb
    # the forward's GPU time: the same operators with the host floor off
    no_floor = dataclasses.replace(a, moe_host_forward_s=0.0, moe_host_expert_forward_s=0.0)
    gpu_forward = float(operator_times(no_floor, eff).moe_forward_s)
    host = float(moe_host_exposed_s(a, gpu_forward))
    layer = gpu_forward + float(times.moe_backward_s) + float(times.moe_module_recompute_s)
    ep = prediction.breakdown.ep_comm_exposed_s / layer_mb
    gap = measured - predicted
    error = prediction.iteration_time_s / case.measured_iteration_time_s - 1.0
    gpu = scenario.hardware.gpu.name
    local = float(a.num_experts) / max(float(a.expert_parallel), 1.0)
    name = case.config_id.replace("Pre-Training_DGX-", "")
    return (
        gpu,
        error,
        f"| {name} | {gpu} | {par.micro_batch_size} | {local:.0f} | {measured * 1e3:.2f} "
        f"| {predicted * 1e3:.2f} | {gap * 1e3:+.2f} | {layer * 1e3:.2f} | {host * 1e3:.2f} "
        f"| {ep * 1e3:.2f} | {gap / layer:+.2f} | {error * 100:+.1f} |",
    )


def table() -> str:
    """Every MoE row, by GPU, worst first within a GPU (module docstring)."""
    rows = []
    for case in build_dataset(list(SOURCES)).cases:
        row = _row(case)
        if row is not None:
            rows.append(row)
    rows.sort(key=lambda r: (r[0], r[1]))
    head = [
        "| row | GPU | mbs | local experts | measured ms | predicted ms | gap ms "
        "| model MoE layer ms | host floor ms | EP exposed ms | gap / layer | error % |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    return "\n".join(head + [r[2] for r in rows])


def _later_document(
    run: tuple[str, str, int, int, int, int, int, int, float], *, stated: bool
) -> dict[str, Any]:
    """A ``LATER_RUNS`` entry as the 25.11 rows' documents state such a run
    (``benchmarks.accuracy.bridge``), with the 26.06 knobs when ``stated``."""
    preset, gpu, gpus, gbs, mbs, pp, vp, ep, _ = run
    parallelism: dict[str, Any] = {
        "tensor_parallel": 1,
        "pipeline_parallel": pp,
        "micro_batch_size": mbs,
        "global_batch_size": gbs,
        "expert_parallel": ep,
        "zero_stage": 1,
        "precision": "mxfp8",
        "recompute": "none",
        "grad_reduce_in_fp32": False,
    }
    if vp > 1:
        parallelism.update(
            virtual_pipeline=vp,
            account_for_embedding_in_pipeline_split=True,
            account_for_loss_in_pipeline_split=True,
        )
    model: dict[str, Any] = {
        "preset": preset,
        "seq_length": 4096,
        "moe_grouped_gemm": True,
        "moe_router_force_load_balancing": True,
        "moe_token_dispatcher_type": "flex",
    }
    training: dict[str, Any] = {"framework": "nemo", "framework_version": "26.06"}
    if stated:
        model["overlap_moe_expert_parallel_comm"] = True
        training["cuda_graphs"] = "full_iteration"
    return {
        "model": model,
        "hardware": {"gpu": gpu, "num_gpus": gpus},
        "parallelism": parallelism,
        "training": training,
    }


def later_table() -> str:
    """``LATER_RUNS``: measured, predicted as shipped and with the stated knobs (docstring)."""
    rows = [
        "| model | GPU | mbs | PP / VP / EP | measured s | shipped s (error %) "
        "| full-iteration graph + 1F1B overlap s (error %) |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for run in LATER_RUNS:
        preset, gpu, gpus, gbs, mbs, pp, vp, ep, per_gpu = run
        measured = gbs * 4096 / (gpus * per_gpu)
        cells = []
        for stated in (False, True):
            predicted = predict(parse_scenario(_later_document(run, stated=stated)))
            t = predicted.iteration_time_s
            cells.append(f"{t:.2f} ({(t / measured - 1.0) * 100:+.1f})")
        rows.append(
            f"| {preset} | {gpu} | {mbs} | {pp} / {vp} / {ep} | {measured:.2f} "
            f"| {cells[0]} | {cells[1]} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
    print()
    print(f"Later container ({LATER_SOURCE}):")
    print()
    print(later_table())
