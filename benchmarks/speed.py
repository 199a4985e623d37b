"""Speed of the performance model: one scenario in-process, and 10,000 in one batch; and of
the observed-runs calibration: learning from 1,000 runs, predicting with it.

    .venv/bin/python -m benchmarks.speed            # prints a markdown table

Model time (``predict_batch`` on already-validated ``Scenario`` values, split into gathering the
arrays, the numpy engine, and building ``Prediction`` objects) is measured apart from parse
time (``parse_scenario`` on scenario documents) and from ``predict_documents`` end to end.
Targets: one scenario well under 1 ms of model time; 10,000 in one batch under 2 s.
Observed-runs calibration: ``planner calibrate observe`` of 1,000 runs under 10 s (in-process
and as the command, interpreter start included); ``planner predict`` of one scenario with a
calibration under 1 ms (``predict_documents`` with it: parse, model, calibration, JSON).
Run as a module from the checkout: it times that checkout's ``planner`` (run as a file, it
would import whichever ``planner`` the environment has installed, e.g. another worktree's).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from planner.calibration.files import load_calibration_file, observe_files
from planner.calibration.observed_runs import run_document
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


CLUSTERS = ("east", "west", "lab", "cloud")
FRAMEWORKS = ("megatron", "nemo", "torchtitan")


def observed_runs(n: int) -> str:
    """``n`` observed runs as JSON lines (deterministic): ``documents(n)`` on four clusters and
    three frameworks, fp8 on the H100/B200 half, each measured as the model's time times a
    factor per cluster and GPU and a 5 % log-normal spread."""
    rng = np.random.default_rng(1)
    docs = documents(n)
    for i, doc in enumerate(docs):
        doc["training"] = {"framework": FRAMEWORKS[i % len(FRAMEWORKS)]}
        if doc["hardware"]["gpu"] in ("h100-sxm", "b200") and i % 2:
            doc["parallelism"]["precision"] = "fp8"
    predicted = predict_documents(docs)
    bias = {(c, g): float(rng.normal(0, 0.1)) for c in CLUSTERS for g in GPUS}
    lines = []
    for i, (doc, result) in enumerate(zip(docs, predicted, strict=True)):
        cluster = CLUSTERS[i % len(CLUSTERS)]
        noise = bias[(cluster, doc["hardware"]["gpu"])] + float(rng.normal(0, 0.05))
        measured = result["iteration_time_s"] * float(np.exp(noise))
        lines.append(json.dumps(run_document(doc, measured, cluster=cluster)))
    return "\n".join(lines) + "\n"


def calibration_rows(docs: list[dict[str, Any]]) -> list[tuple[str, float, str]]:
    """The observed-runs calibration: learning from 1,000 runs (in-process and as the
    command), and one prediction with it."""
    text = observed_runs(1000)
    rows: list[tuple[str, float, str]] = []
    report = observe_files(["runs.jsonl"], lambda _: text)
    rows.append(
        (
            "calibrate observe: 1,000 runs in-process (`observe_files`: read, parse, model, "
            "fit, 5-fold cross-validation)",
            best_of(lambda: observe_files(["runs.jsonl"], lambda _: text), 3),
            "< 10 s",
        )
    )
    with tempfile.TemporaryDirectory() as tmp:
        runs, out = Path(tmp) / "runs.jsonl", Path(tmp) / "observed.json"
        runs.write_text(text, encoding="utf-8")
        command = [sys.executable, "-m", "planner", "calibrate", "observe", str(runs)]

        def cli() -> None:
            subprocess.run([*command, "--out", str(out)], check=True, capture_output=True)

        rows.append(
            (
                "`planner calibrate observe` of 1,000 runs (the command, interpreter start "
                "included)",
                best_of(cli, 2),
                "< 10 s",
            )
        )
        _, observed = load_calibration_file(out.read_text(encoding="utf-8"), source=str(out))
    assert observed is not None
    one = [docs[1]]
    predict_documents(one, calibration=observed, cluster="east")  # warm
    rows.append(
        (
            "1 scenario: `predict_documents` with an observed-runs calibration (parse + model "
            "+ calibration + JSON; `planner predict --calibration`)",
            best_of(lambda: predict_documents(one, calibration=observed, cluster="east"), 200),
            "< 1 ms",
        )
    )
    scenario = parse_scenario(docs[1])
    result = predict_documents(one)[0]
    rows.append(
        (
            "1 scenario: `ObservedCalibration.apply` alone",
            best_of(lambda: observed.apply(result, scenario, cluster="east"), 200),
            "-",
        )
    )
    del report
    return rows


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Least wall time of ``repeat`` calls, seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> None:
    """Measure and print the markdown table (``argv``: the command line; ``--help`` only
    describes it)."""
    argparse.ArgumentParser(
        prog="python -m benchmarks.speed", description=" ".join(__doc__.split("\n\n")[0].split())
    ).parse_args(argv)
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
    rows += calibration_rows(docs)
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
