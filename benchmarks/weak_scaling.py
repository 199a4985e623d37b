"""What the published runs lose to scale beyond what the model loses: the check behind any
"slowest of N" or ring-size term (``benchmarks/RESULTS.md``, "Large runs slower than their
GPUs").

Table 1, every dense row of 128 GPUs or more (``benchmarks.accuracy``, all sources): GPU
count, the data-parallel group (the ranks the data-parallel collectives span), ZeRO stage,
signed error of the prior and subset. Megatron-LM's and SC21's sweeps hold the data-parallel
group while the GPU count grows; llm-foundry's FSDP grows it with the GPUs.

Table 2, llm-foundry's weak-scaling series (same GPU, model, sequence and micro-batch at fixed
work per GPU, runs of 16 GPUs or more, i.e. across nodes; the smallest as the base): published
and modelled growth of the step, and the difference ("missing") per layer and micro-batch, over
the layer's modelled compute and over the layer's 16-bit parameter bytes (what each FSDP
all-gather of the layer moves). A slowest-of-N GPU stretches compute (a constant share of
compute); a ring that slows stretches the collectives (a constant time per byte).

    .venv/bin/python -m benchmarks.weak_scaling    # Markdown tables on stdout (~2 CPU-s)
"""

from __future__ import annotations

import re
from collections import defaultdict

from benchmarks.accuracy.convert import Case, build_dataset
from benchmarks.accuracy.report import is_moe_case
from benchmarks.accuracy.runs import available_sources
from planner.perf import Prediction, predict_batch
from planner.scenario import parse_scenario
from planner.specs.scenario import Scenario

LARGE_GPUS = 128
"""Rows from this many GPUs on are "large" (llm-foundry's published sweeps reach 512)."""

SERIES_MIN_GPUS = 16
"""llm-foundry series start at their smallest run across nodes (8 GPUs fill one node)."""

_FOUNDRY = re.compile(
    r"foundry_\w+?_(?P<gpu>.+)_(?P<size>\w+)_s(?P<seq>\d+)_g(?P<n>\d+)_gbs(?P<gbs>\d+)_mbs(?P<mbs>\d+)"
)


def layer_parameter_bytes(scenario: Scenario) -> float:
    """16-bit bytes of one transformer layer's weight matrices (attention with grouped KV,
    MLP with three matrices under a gated activation, two otherwise)."""
    m = scenario.model
    kv = m.num_query_groups * (m.hidden_size // m.num_attention_heads)
    matrices = 3 if "glu" in str(m.activation).lower() else 2
    params = (
        2 * m.hidden_size**2 + 2 * m.hidden_size * kv + matrices * m.hidden_size * m.ffn_hidden_size
    )
    return 2.0 * params


def large_rows(cases: list[Case], scenarios: list[Scenario], predictions: list[Prediction]) -> str:
    """Markdown: Table 1 (module docstring)."""
    lines = [
        "| source | config | GPUs | data-parallel group | ZeRO | error % | subset |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    rows = sorted(
        zip(cases, scenarios, predictions, strict=True),
        key=lambda t: (t[0].source, t[1].hardware.num_gpus, t[0].config_id),
    )
    for case, s, p in rows:
        if is_moe_case(case) or s.hardware.num_gpus < LARGE_GPUS:
            continue
        error = 100.0 * (p.iteration_time_s / case.measured_iteration_time_s - 1.0)
        lines.append(
            f"| {case.source} | {case.config_id} | {s.hardware.num_gpus} | "
            f"{s.parallelism.data_parallel} | {s.parallelism.zero_stage} | {error:+.1f} | "
            f"{'calib.' if case.calibration else 'held-out'} |"
        )
    return "\n".join(lines)


def foundry_series(
    cases: list[Case], scenarios: list[Scenario], predictions: list[Prediction]
) -> str:
    """Markdown: Table 2 (module docstring)."""
    series: dict[tuple[str, ...], list[tuple[int, Case, Scenario, Prediction]]] = defaultdict(list)
    for case, s, p in zip(cases, scenarios, predictions, strict=True):
        found = _FOUNDRY.fullmatch(case.config_id) if case.source == "llm_foundry" else None
        if found is None or int(found["n"]) < SERIES_MIN_GPUS:
            continue
        per_gpu = str(int(found["gbs"]) // int(found["n"]))  # sequences per GPU and step
        key = (found["gpu"], found["size"], found["seq"], found["mbs"], per_gpu)
        series[key].append((int(found["n"]), case, s, p))
    lines = [
        "| GPU | model | GPUs | published growth | modelled growth | missing ms / layer "
        "| / layer compute % | / layer bytes ps/B |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for (gpu, size, *_), runs in sorted(series.items()):
        if len(runs) < 2:
            continue
        runs.sort(key=lambda r: r[0])
        n0, c0, s0, p0 = runs[0]
        layers = s0.model.num_layers
        microbatches = s0.parallelism.global_batch_size // (
            s0.parallelism.data_parallel * s0.parallelism.micro_batch_size
        )
        per_layer = layers * microbatches
        for n, case, _, p in runs[1:]:
            measured = case.measured_iteration_time_s / c0.measured_iteration_time_s
            modelled = p.iteration_time_s / p0.iteration_time_s
            missing = (case.measured_iteration_time_s - c0.measured_iteration_time_s) - (
                p.iteration_time_s - p0.iteration_time_s
            )
            lines.append(
                f"| {gpu} | {size} | {n0} -> {n} | {measured:.3f}x | {modelled:.3f}x | "
                f"{1e3 * missing / per_layer:.2f} | {100 * missing / p0.breakdown.compute_s:.1f} | "
                f"{1e12 * missing / per_layer / layer_parameter_bytes(s0):.1f} |"
            )
    return "\n".join(lines)


def main() -> None:
    """Print both tables."""
    cases = build_dataset(available_sources()).cases
    scenarios = [parse_scenario(c.document) for c in cases]
    predictions = predict_batch(scenarios)
    print(large_rows(cases, scenarios, predictions))
    print()
    print(foundry_series(cases, scenarios, predictions))


if __name__ == "__main__":
    main()
