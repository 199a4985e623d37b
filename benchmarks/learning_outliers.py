"""What jobs far off their key (hung, stalled, on other hardware than described) do to a
cluster's learnt calibration: runs of one key at 1.27-1.33 times the model, each its own shape,
with and without such jobs, recorded as the service records finished jobs
(``ObservedRunRow`` in a SQLite store) and fitted by the service's learner
(``planner.service.learning.Learner``).

Run: ``PYTHONPATH=. python -m benchmarks.learning_outliers`` (a few seconds). Prints per case
the key's fitted factor (the healthy runs' pace is 1.30), the runs fitted and left out, the
held-out errors (5-fold: the learnt fit, the model, the online calibration) and whether the
fit is applied. Results: ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from planner.scenario import predict_documents
from planner.service.learning import Learner, LearningConfig
from planner.service.models import ObservedRunRow
from planner.service.store.sql import SqlStore

HEALTHY = (1.30, 1.27, 1.33, 1.29, 1.31, 1.28, 1.32, 1.30)
CASES: dict[str, tuple[float, ...]] = {
    "8 healthy": HEALTHY,
    "8 healthy + 1 at 20x": (*HEALTHY, 20.0),
    "8 healthy + 1 at 20x, 1 at 8x": (*HEALTHY, 20.0, 8.0),
    "3 healthy + 1 at 20x": (*HEALTHY[:3], 20.0),
}


def scenario_doc(
    name: str, layers: int, hidden: int, gpu: str = "h100-sxm", train_iters: int = 100
) -> dict[str, Any]:
    """A tiny dense GPT's scenario on 2 GPUs of type ``gpu``, ``layers`` deep, ``hidden`` wide
    (also the service tests' jobs)."""
    return {
        "name": name,
        "model": {
            "num_layers": layers,
            "hidden_size": hidden,
            "num_attention_heads": 4,
            "seq_length": 128,
            "vocab_size": 1024,
        },
        "hardware": {"gpu": gpu, "num_gpus": 2},
        "parallelism": {"tensor_parallel": 1, "micro_batch_size": 4, "global_batch_size": 8},
        "training": {"train_iters": train_iters},
    }


def observed_run_row(
    doc: dict[str, Any], step_s: float, *, job_id: int, cluster: str = "bench"
) -> ObservedRunRow:
    """A usable finished run of the Slurm cluster ``cluster`` as the service records one: job
    ``job_id`` (also its recording time, s) ran the scenario ``doc`` at ``step_s`` seconds a
    step over 100 iterations (also the service tests' and ``learning_fit``'s runs)."""
    return ObservedRunRow(
        scheduler="slurm",
        cluster=cluster,
        job_id=str(job_id),
        recorded_s=float(job_id),
        gpu=doc["hardware"]["gpu"],
        scenario=doc,
        iteration_time_s=step_s,
        num_iterations=100,
        skip_reason=None,
    )


def fit(root: Path, label: str, paces: tuple[float, ...]) -> dict[str, Any]:
    """The learnt state after runs at ``paces`` (measured / model)."""
    store = SqlStore(f"sqlite:///{root / label.replace(' ', '_')}.db")
    store.migrate()
    docs = [scenario_doc(f"r{i}", 2 + i % 6, 128 + 64 * (i // 6)) for i in range(len(paces))]
    model = [float(p["iteration_time_s"]) for p in predict_documents(docs)]  # type: ignore[arg-type]
    with store.unit_of_work() as uow:
        for i, (doc, pace, step_s) in enumerate(zip(docs, paces, model, strict=True)):
            uow.put_observed_run(observed_run_row(doc, pace * step_s, job_id=i))
    Learner(store, lambda: 100.0, LearningConfig()).run()
    row = store.calibration("observed/slurm/bench")
    store.dispose()
    assert row is not None
    return dict(row.state)


def main() -> None:
    print(
        "| runs | factor | fitted | left out | held-out: learnt % | model % | online % | applied |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for label, paces in CASES.items():
            state = fit(Path(tmp), label, paces)
            held = state["held_out"]
            (key,) = state["summary"]
            print(
                f"| {label} | {key['compute_factor']:.3f} | {state['num_runs']} "
                f"| {state['num_skipped']} | {100 * held['calibrated_mean_abs_error_ratio']:.1f} "
                f"| {100 * held['prior_mean_abs_error_ratio']:.1f} "
                f"| {100 * held['online_mean_abs_error_ratio']:.1f} | {state['applied']} |"
            )


if __name__ == "__main__":
    main()
