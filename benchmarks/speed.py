"""Speed of the performance model: one scenario in-process, and 10,000 in one batch.

    .venv/bin/python -m benchmarks.speed            # prints a markdown table

Model time (``predict_batch`` on already-validated ``Scenario`` values, split into gathering the
arrays, the numpy engine, and building ``Prediction`` objects) is measured apart from parse
time (``parse_scenario`` on scenario documents) and from ``predict_documents`` end to end.
Targets (issue 3): one scenario well under 1 ms of model time; 10,000 in one batch under 2 s.
Run as a module from the checkout: it times that checkout's ``planner`` (run as a file, it
would import whichever ``planner`` the environment has installed, e.g. another worktree's).
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from planner.perf import DefaultEfficiency, predict, predict_batch
from planner.perf.batch import ScenarioArrays
from planner.perf.engine import evaluate
from planner.scenario import parse_scenario, predict_documents

PRESETS = ("llama3-8b", "llama3-70b", "gpt3-175b", "mixtral-8x7b", "llama2-13b")
GPUS = ("h100-sxm", "a100-80gb", "b200", "mi300x")


def documents(n: int) -> list[dict[str, Any]]:
    """``n`` valid, varied scenario documents (deterministic)."""
    rng = np.random.default_rng(0)
    out: list[dict[str, Any]] = []
    for i in range(n):
        tp = int(rng.choice([1, 2, 4, 8]))
        pp = int(rng.choice([1, 2, 4]))
        dp = int(rng.choice([1, 2, 4, 8, 16]))
        out.append(
            {
                "name": f"s{i}",
                "model": {"preset": PRESETS[i % len(PRESETS)]},
                "hardware": {"gpu": GPUS[i % len(GPUS)], "num_gpus": tp * pp * dp},
                "parallelism": {
                    "tensor_parallel": tp,
                    "pipeline_parallel": pp,
                    "global_batch_size": dp * int(rng.choice([8, 16, 32])),
                    "recompute": str(rng.choice(["none", "selective", "full"])),
                    "zero_stage": int(rng.integers(0, 4)),
                },
            }
        )
    return out


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Least wall time of ``repeat`` calls, seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    """Measure and print the markdown table."""
    docs = documents(10_000)
    scenarios = [parse_scenario(d) for d in docs]
    one, moe = scenarios[1], scenarios[3]  # llama3-70b (dense), mixtral-8x7b (MoE)
    eff = DefaultEfficiency()
    predict(one)  # warm caches (catalog, constants)
    rows: list[tuple[str, float, str]] = []
    rows.append(
        (
            "1 scenario: `predict` (model time, dense)",
            best_of(lambda: predict(one, eff), 200),
            "< 1 ms",
        )
    )
    rows.append(
        (
            "1 scenario: `predict` (model time, MoE)",
            best_of(lambda: predict(moe, eff), 200),
            "< 1 ms",
        )
    )
    rows.append(
        ("1 scenario: `parse_scenario`", best_of(lambda: parse_scenario(docs[1]), 200), "-")
    )
    rows.append(
        (
            "1 scenario: `predict_documents` (parse + model + JSON)",
            best_of(lambda: predict_documents(docs[1:2]), 200),
            "-",
        )
    )
    arrays = ScenarioArrays.from_scenarios(scenarios)
    rows.append(
        (
            "10,000: gather arrays (`ScenarioArrays.from_scenarios`)",
            best_of(lambda: ScenarioArrays.from_scenarios(scenarios), 3),
            "-",
        )
    )
    rows.append(
        ("10,000: numpy engine (`evaluate`)", best_of(lambda: evaluate(arrays, eff), 3), "-")
    )
    rows.append(
        (
            "10,000: `predict_batch` (model time: arrays + engine + Prediction objects)",
            best_of(lambda: predict_batch(scenarios, eff), 3),
            "< 2 s",
        )
    )
    rows.append(
        (
            "10,000: `parse_scenario` (parse time)",
            best_of(lambda: [parse_scenario(d) for d in docs], 1),
            "-",
        )
    )
    rows.append(
        (
            "10,000: `predict_documents` (parse + one batch + JSON)",
            best_of(lambda: predict_documents(docs), 1),
            "-",
        )
    )
    machine = platform.processor() or platform.machine()
    print(f"Machine: {machine}, Python {platform.python_version()}, numpy {np.__version__}")
    print()
    print("| what | best wall time | target |")
    print("| --- | ---: | --- |")
    for what, seconds, target in rows:
        shown = f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.2f} s"
        print(f"| {what} | {shown} | {target} |")


if __name__ == "__main__":
    main()
