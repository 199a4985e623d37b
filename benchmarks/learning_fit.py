"""CPU time of one cluster's refit from its finished jobs (``planner.service.learning``).

A real SQLite store holds ``N`` observed runs of one cluster: dense scenarios of 2-32 layers,
hidden 1024-8192, 8-64 GPUs of three GPU types, tensor and data parallel layouts, each
"measured" at the model's step times a factor per GPU type times a log-normal spread of 0.1
(``numpy.random.default_rng(0)``; synthetic: what is timed is the fit, not its accuracy). The
learner fits the cluster once (``Learner.run``: read the newest ``max_runs`` runs, parse and
predict them in one batch, fit, 5-fold held-out error when the budget allows, store); the CPU
time of its thread is reported per ``N``.

    .venv/bin/python -m benchmarks.learning_fit   # N = 100, 500, 2000 (the default max_runs)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.learning_outliers import observed_run_row
from planner.scenario import predict_documents
from planner.service.learning import Learner, LearningConfig, calibration_name
from planner.service.models import ObservedRunRow
from planner.service.store.sql import SqlStore

GPUS = {"h100-sxm": 1.15, "a100-80gb": 1.05, "b200": 0.8}


def scenario(rng: np.random.Generator, gpu: str) -> dict[str, Any]:
    hidden = int(rng.choice([1024, 2048, 4096, 8192]))
    gpus = int(rng.choice([8, 16, 32, 64]))
    tp = int(rng.choice([1, 2, 4, 8]))
    return {
        "name": "run",
        "model": {
            "num_layers": int(rng.choice([2, 8, 16, 32])),
            "hidden_size": hidden,
            "num_attention_heads": hidden // 128,
            "seq_length": 4096,
            "vocab_size": 32000,
        },
        "hardware": {"gpu": gpu, "num_gpus": gpus},
        "parallelism": {
            "tensor_parallel": tp,
            "micro_batch_size": 1,
            "global_batch_size": 4 * gpus // tp,
        },
    }


def runs(n: int, seed: int = 0) -> list[ObservedRunRow]:
    rng = np.random.default_rng(seed)
    docs = [scenario(rng, str(rng.choice(list(GPUS)))) for _ in range(n)]
    out = []
    for i, (doc, pred) in enumerate(zip(docs, predict_documents(docs), strict=True)):
        step = pred.get("iteration_time_s")
        if not isinstance(step, float):
            continue  # infeasible: not a run
        factor = GPUS[doc["hardware"]["gpu"]] * float(np.exp(rng.normal(0.0, 0.1)))
        out.append(observed_run_row(doc, step * factor, job_id=i))
    return out


def measure(n: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqlStore(f"sqlite:///{Path(tmp) / 'planner.db'}")
        store.migrate()
        made = runs(n)
        with store.unit_of_work() as uow:
            for row in made:
                uow.put_observed_run(row)
        learner = Learner(store, time.time, LearningConfig())
        wall = time.perf_counter()
        cpu = time.thread_time()
        learner.run()
        cpu = time.thread_time() - cpu
        wall = time.perf_counter() - wall
        fitted = store.calibration(calibration_name("slurm", "bench"))
        store.dispose()
    state = fitted.state if fitted is not None else {}
    return {
        "runs": len(made),
        "fit_cpu_s": state.get("cpu_s"),
        "learner_cpu_s": cpu,
        "wall_s": wall,
        "held_out": state.get("held_out") is not None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="*", default=[100, 500, 2000])
    args = parser.parse_args()
    print("| runs | fit CPU s (incl. held-out error) | learner CPU s | wall s | held-out error |")
    print("| ---: | ---: | ---: | ---: | --- |")
    for n in args.runs:
        m = measure(n)
        print(
            f"| {m['runs']} | {m['fit_cpu_s']:.2f} | {m['learner_cpu_s']:.2f} | "
            f"{m['wall_s']:.2f} | {'computed' if m['held_out'] else 'left out (budget)'} |"
        )


if __name__ == "__main__":
    main()
