"""Dropless vs drop-and-pad twins of Megatron-Bridge's archive: the time per MoE layer and
micro-batch that the dropless path adds, measured and modelled.

The archive (NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary-archive.md`` @
``067f987df03b``, ``megatron_bridge_2025.csv`` in the shared ground truth) has 25.09 rows
marked ``tokendrop`` (capacity factor 1, padded: no device-to-host read of the per-expert
counts) and 25.11 rows of the same model, GPU and layout that route dropless (the read once
per MoE layer forward). A twin differs in container and routing together, so its gap is an
upper bound on what the read costs, not the read alone.

Per twin: both measured iteration times, the model's, and the gap per MoE layer and
micro-batch on one GPU, ``Δt / (n_mb · L_moe / pp)`` (``n_mb = gbs / (dp · mbs)`` micro-batches
per step; the pipeline bubble's share of the gap is not taken out). ``G`` is the model's
forward GPU time of one MoE layer and micro-batch (the floor off), ``H`` the model's host
issue time (``planner.perf.moe_mlp.moe_host_exposed_s``), ``exposed = max(0, H - G)``. The
last column, ``H implied``, is the measured gap plus ``G`` scaled by the padded twin's
measured / predicted time: the host time the twin asks for if the floor were the only
difference.

    .venv/bin/python -m benchmarks.moe_dropless_pairs    # Markdown table on stdout (~5 CPU-s)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from benchmarks.accuracy.convert import Case, build_dataset
from planner.perf import DefaultEfficiency, frameworks, predict
from planner.perf.batch import ScenarioArrays
from planner.perf.operators import operator_times
from planner.scenario import parse_scenario
from planner.specs.scenario import Framework

SOURCE = "megatron_bridge_2025"


def _layout(case: Case) -> tuple[Any, ...]:
    doc = case.document
    par = doc["parallelism"]
    return (
        doc["hardware"]["gpu"],
        doc["hardware"]["num_gpus"],
        doc["model"]["preset"],
        par.get("tensor_parallel", 1),
        par.get("pipeline_parallel", 1),
        par.get("expert_parallel", 1),
        par["micro_batch_size"],
        par["global_batch_size"],
    )


def twins(cases: list[Case]) -> Iterator[tuple[Case, Case]]:
    """(padded 25.09 row, dropless 25.11 row) of the same GPU, model and layout."""
    padded = [c for c in cases if c.document["model"].get("moe_pad_expert_input_to_capacity")]
    dropless = [
        c
        for c in cases
        if c.document["model"].get("moe_grouped_gemm")
        and not c.document["model"].get("moe_pad_expert_input_to_capacity")
        and c.document["model"].get("moe_token_dispatcher_type") == "alltoall"
    ]
    for p in padded:
        for d in dropless:
            if _layout(p) == _layout(d) and p.release != d.release:
                yield p, d


def _model(case: Case, profile: frameworks.FrameworkProfile) -> tuple[float, float, float]:
    """(iteration time s, MoE layer forward GPU time per micro-batch s, layers x micro-batches
    per GPU) with ``profile`` as the NeMo framework's (the profile is read per scenario from
    ``FRAMEWORK_PROFILES``; the shipped one is put back)."""
    saved = frameworks.FRAMEWORK_PROFILES
    frameworks.FRAMEWORK_PROFILES = {**saved, Framework.NEMO: profile}
    try:
        scenario = parse_scenario(case.document)
        a = ScenarioArrays.from_scenario(scenario)
        times = operator_times(a, DefaultEfficiency())
        it = predict(scenario).iteration_time_s
    finally:
        frameworks.FRAMEWORK_PROFILES = saved
    par = case.document["parallelism"]
    pp = par.get("pipeline_parallel", 1)
    dp = float(a.num_gpus) / (par.get("tensor_parallel", 1) * pp * par.get("context_parallel", 1))
    micro = par["global_batch_size"] / (dp * par["micro_batch_size"])
    return it, float(times.moe_forward_s), micro * float(a.num_moe_layers) / pp


def table() -> str:
    """The twins' Markdown table (module docstring)."""
    cases = build_dataset([SOURCE]).cases
    shipped = frameworks.FRAMEWORK_PROFILES[Framework.NEMO]
    off = dataclasses.replace(shipped, moe_host_forward_s=0.0, moe_host_expert_forward_s=0.0)
    rows = [
        "| GPU, model, layout | mbs | padded meas / model s | dropless meas / model s "
        "| gap per layer·mb, meas / model ms | G ms | H ms | H implied ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for p, d in twins(cases):
        p_pred, _, layer_mb = _model(p, shipped)
        d_pred, _, _ = _model(d, shipped)
        _, g, _ = _model(d, off)
        a = ScenarioArrays.from_scenario(parse_scenario(d.document))
        local = float(a.num_experts) / max(float(a.expert_parallel), 1.0)
        host = shipped.moe_host_forward_s + shipped.moe_host_expert_forward_s * local
        gap = (d.measured_iteration_time_s - p.measured_iteration_time_s) / layer_mb
        gap_model = (d_pred - p_pred) / layer_mb
        implied = gap + g * p.measured_iteration_time_s / p_pred
        name = p.config_id.split("DGX-")[1].replace("_(tokendrop)", "").rsplit("_", 1)[0]
        mbs = p.document["parallelism"]["micro_batch_size"]
        rows.append(
            f"| {name} | {mbs} | {p.measured_iteration_time_s:.2f} / {p_pred:.2f} "
            f"| {d.measured_iteration_time_s:.2f} / {d_pred:.2f} "
            f"| {gap * 1e3:+.2f} / {gap_model * 1e3:+.2f} | {g * 1e3:.2f} | {host * 1e3:.2f} "
            f"| {implied * 1e3:.1f} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
