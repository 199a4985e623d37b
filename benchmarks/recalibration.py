"""Online recalibration: how much do earlier jobs on a cluster improve a new job's prediction?

Three parts, all printed as Markdown (``benchmarks/results/recalibration.md``):

1. **Simulated clusters.** The engine (``planner.scenario.predict_documents``) predicts 16 tiny to
   small GPT shapes on 8 H100s (2-8 layers, hidden 128-1024, Megatron). "Reality" for a job of
   shape ``s`` on a cluster: model step time x a cluster factor ``exp(N(0, 0.3^2))`` (0.3: the
   log-sd the service assumes for the uncorrected model, ``model_prior_log_sd``) x a configuration
   deviation ``exp(N(0, 0.1^2))`` drawn per job (the model's shape-dependent error once the
   cluster's level is known; 0.1 is an assumption, the tiny GPT runs in part 2 measured it).
   Each job's step times are per-iteration log-normal with sd 0.1, the first 10 iterations 2x
   slower (warm-up); its log prints the mean of every 5 iterations. The planner turns a job's
   first ``N`` iterations into a robust mean step time exactly as the service does (the ETA's
   ``estimate_running(...).observed_step_time_s``) and feeds it to ``OnlineCalibration``.
   Reported, over 2,000 simulated clusters: the error of a second job's predicted mean step
   time (another shape, drawn at random) against its true mean, uncorrected and corrected, as a
   function of ``N`` (one prior job) and of the number of prior jobs (each with 200 iterations),
   and how often the truth falls in the p10-p90 band (``exp(+-1.2816 log_sd)``).
2. **Real runs.** Three runs of ``deploy/dev/tiny_gpt/train.py`` recorded on the 2-core dev
   machine (``tests/data/logs/``: 2 layers/hidden 128, 4/192, 3/256; DDP over gloo on CPUs)
   against the planner's H100 prediction of their scenarios (the dev Slurm stack hands out fake
   H100 GRES, so the planner's key is ``(slurm, dev, h100-sxm, megatron)``: the learnt factor is
   CPU vs H100 and huge). Each run in turn is the new job; the others, cut after ``N`` iterations,
   are the prior jobs. Truth: the new run's robust mean step time over its whole log.
3. **Speed.** ``recalibrate`` on 10,000 stored observations (median of 7 runs), and the cost of
   one ``observe`` and one ``correction``.

    .venv/bin/python benchmarks/recalibration.py > benchmarks/results/recalibration.md
"""

from __future__ import annotations

import copy
import math
import platform
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from adapters.logs import LogTailer
from planner.calibration.online import CalibrationKey, JobObservation, OnlineCalibration
from planner.forecast.eta import StepObservation, estimate_running
from planner.forecast.observations import observations_from_progress
from planner.scenario import predict_documents
from planner.specs.job import ProgressRecord, TailCursor

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests/data/logs"
KEY = CalibrationKey(scheduler="slurm", cluster="dev", gpu="h100-sxm", framework="megatron")
Z90 = 1.2815515655446004
CLUSTER_LOG_SD = 0.3
CONFIG_LOG_SD = 0.1
ITER_LOG_SD = 0.1
WARMUP_ITERS = 10
WARMUP_FACTOR = 2.0
LOG_INTERVAL = 5
NUM_CLUSTERS = 2000
SEED = 20261121


def _scenario(num_layers: int, hidden: int, *, num_gpus: int, gbs: int) -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "deploy/dev/tiny_gpt/scenario.yaml").read_text())
    heads = max(1, hidden // 32) if num_gpus == 2 else hidden // 64
    doc["name"] = f"gpt-l{num_layers}-h{hidden}"
    doc["model"].update(
        num_layers=num_layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_query_groups=heads,
        ffn_hidden_size=4 * hidden,
    )
    doc["hardware"]["num_gpus"] = num_gpus
    doc["parallelism"].update(data_parallel=num_gpus, global_batch_size=gbs)
    return dict(doc)


def _observed_mean_s(
    rng: np.random.Generator, true_mean_s: float, num_iters: int
) -> tuple[float, int]:
    """Simulate ``num_iters`` iterations logged every 5 and return the ETA's robust mean."""
    # per-iteration log-normal around a median chosen so that the mean is true_mean_s
    steps = true_mean_s * np.exp(rng.normal(-0.5 * ITER_LOG_SD**2, ITER_LOG_SD, num_iters))
    steps[:WARMUP_ITERS] *= WARMUP_FACTOR
    obs = []
    t = 0.0
    for end in range(LOG_INTERVAL, num_iters + 1, LOG_INTERVAL):
        window = steps[end - LOG_INTERVAL : end]
        t += float(window.sum())
        obs.append(
            StepObservation(
                iteration=end,
                step_time_s=float(window.mean()),
                num_iterations=LOG_INTERVAL,
                time_s=t,
            )
        )
    est = estimate_running(
        prior_step_time_s=None,
        prior_log_sd=0.3,
        observations=obs,
        iteration=num_iters,
        train_iters=10 * num_iters,
        last_progress_time_s=t,
        now_s=t,
    )
    assert est.observed_step_time_s is not None
    return est.observed_step_time_s, num_iters


def _simulate(prior_jobs: int, first_iters: int, model_s: np.ndarray) -> dict[str, float]:
    rng = np.random.default_rng([SEED, prior_jobs, first_iters])
    err_model, err_cal, in_model, in_cal = [], [], 0, 0
    for _ in range(NUM_CLUSTERS):
        cluster = math.exp(rng.normal(0.0, CLUSTER_LOG_SD))
        shapes = rng.choice(len(model_s), size=prior_jobs + 1, replace=False)
        cal = OnlineCalibration()
        for j, s in enumerate(shapes[:-1]):
            true_s = model_s[s] * cluster * math.exp(rng.normal(0.0, CONFIG_LOG_SD))
            observed_s, n = _observed_mean_s(rng, true_s, first_iters)
            cal.observe(
                KEY,
                f"job{j}",
                predicted_step_s=float(model_s[s]),
                observed_step_s=observed_s,
                num_iterations=n,
                time_s=float(j),
            )
        new = shapes[-1]
        true_new = model_s[new] * cluster * math.exp(rng.normal(0.0, CONFIG_LOG_SD))
        c = cal.correction(KEY)
        predicted, calibrated = model_s[new], model_s[new] * c.factor
        err_model.append(abs(predicted / true_new - 1))
        err_cal.append(abs(calibrated / true_new - 1))
        in_model += abs(math.log(true_new / predicted)) <= Z90 * CLUSTER_LOG_SD
        in_cal += abs(math.log(true_new / calibrated)) <= Z90 * c.log_sd
    return {
        "model_median": float(np.median(err_model)),
        "cal_median": float(np.median(err_cal)),
        "model_p90": float(np.quantile(err_model, 0.9)),
        "cal_p90": float(np.quantile(err_cal, 0.9)),
        "model_band": in_model / NUM_CLUSTERS,
        "cal_band": in_cal / NUM_CLUSTERS,
    }


def part_simulated() -> None:
    shapes = [(layers, hidden) for layers in (2, 4, 6, 8) for hidden in (128, 256, 512, 1024)]
    docs = [_scenario(layers, hidden, num_gpus=8, gbs=64) for layers, hidden in shapes]
    predictions = predict_documents(docs)
    model_s = np.array([p["iteration_time_s"] for p in predictions])
    print("## 1. Simulated clusters (engine predictions x cluster factor x config deviation)\n")
    print(
        f"{len(shapes)} GPT shapes on 8 x h100-sxm (model step time "
        f"{1e3 * model_s.min():.2f}-{1e3 * model_s.max():.2f} ms); cluster factor log-sd "
        f"{CLUSTER_LOG_SD}, configuration deviation log-sd {CONFIG_LOG_SD}, per-iteration log-sd "
        f"{ITER_LOG_SD}, first {WARMUP_ITERS} iterations {WARMUP_FACTOR:g}x slower, "
        f"{NUM_CLUSTERS} clusters per row. Error: |predicted / true mean step time - 1| of the "
        "second job (another shape). Band: the truth lies in the p10-p90 band (uncorrected: "
        "log-sd 0.3).\n"
    )
    print("### One prior job that has reported N iterations\n")
    _table([(f"N = {n}", _simulate(1, n, model_s)) for n in (5, 10, 20, 50, 100, 500)])
    print("### K prior jobs of 200 iterations each\n")
    _table([(f"K = {k}", _simulate(k, 200, model_s)) for k in (1, 2, 4, 8)])


def _table(rows: list[tuple[str, dict[str, float]]]) -> None:
    print(
        "| prior | median error, model | median error, corrected | p90 error, model "
        "| p90 error, corrected | band holds truth, model | band, corrected |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, r in rows:
        print(
            f"| {label} | {100 * r['model_median']:.1f} % | {100 * r['cal_median']:.1f} % "
            f"| {100 * r['model_p90']:.1f} % | {100 * r['cal_p90']:.1f} % "
            f"| {100 * r['model_band']:.0f} % | {100 * r['cal_band']:.0f} % |"
        )
    print()


REAL_RUNS = (
    ("tiny_gpt_megatron_900it.log", 2, 128),
    ("tiny_gpt_l4h192_megatron_300it.log", 4, 192),
    ("tiny_gpt_l3h256_megatron_250it.log", 3, 256),
)


def robust_mean_step_s(path: Path, upto: int | None = None) -> tuple[float, int]:
    """The service's robust mean step time of a recorded log up to ``upto`` (the ETA's observed
    mean, no prior), s, and the last iteration used."""
    read, _ = LogTailer(tz=UTC).read(TailCursor(path=str(path)))
    records = [r for r in read if isinstance(r, ProgressRecord)]
    if upto is not None:
        records = [r for r in records if r.iteration <= upto]
    now_s = records[-1].timestamp_s
    assert now_s is not None
    est = estimate_running(
        prior_step_time_s=None,
        prior_log_sd=0.3,
        observations=observations_from_progress(records, read_time_s=now_s),
        iteration=records[-1].iteration,
        train_iters=records[-1].iteration + 1,
        last_progress_time_s=now_s,
        now_s=now_s,
    )
    assert est.observed_step_time_s is not None
    return est.observed_step_time_s, records[-1].iteration


def part_real() -> None:
    docs = [_scenario(layers, hidden, num_gpus=2, gbs=8) for _, layers, hidden in REAL_RUNS]
    model_s = [p["iteration_time_s"] for p in predict_documents(docs)]
    truth_s = [robust_mean_step_s(LOGS / name, None)[0] for name, _, _ in REAL_RUNS]
    print("## 2. Real runs: tiny GPTs recorded on 2 CPU cores, predicted as on 2 x H100\n")
    print("| run | model step time (H100) | measured mean step time (whole log) | ratio |")
    print("| --- | --- | --- | --- |")
    for (name, _, _), m, t in zip(REAL_RUNS, model_s, truth_s, strict=True):
        print(f"| `{name}` | {1e3 * m:.3f} ms | {1e3 * t:.1f} ms | {t / m:.0f} |")
    ratios = np.log(np.array(truth_s) / np.array(model_s))
    print(
        f"\nSpread of the log ratios across the three shapes (the configuration deviation): "
        f"sd {np.std(ratios, ddof=1):.2f}.\n"
    )
    print(
        "| new job | prior jobs (iterations seen) | error, model | error, corrected "
        "| factor | log_sd | truth in band |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for target in range(len(REAL_RUNS)):
        others = [i for i in range(len(REAL_RUNS)) if i != target]
        for prior in [[i] for i in others] + [others]:
            for cut in (10, 20, 50, 200):
                cal = OnlineCalibration()
                for i in prior:
                    observed_s, n = robust_mean_step_s(LOGS / REAL_RUNS[i][0], cut)
                    cal.observe(
                        KEY,
                        REAL_RUNS[i][0],
                        predicted_step_s=model_s[i],
                        observed_step_s=observed_s,
                        num_iterations=n,
                        time_s=0.0,
                    )
                c = cal.correction(KEY)
                corrected = model_s[target] * c.factor
                inside = abs(math.log(truth_s[target] / corrected)) <= Z90 * c.log_sd
                label = ", ".join(f"{REAL_RUNS[i][1]}L/h{REAL_RUNS[i][2]}" for i in prior)
                print(
                    f"| {REAL_RUNS[target][1]}L/h{REAL_RUNS[target][2]} | {label} ({cut}) "
                    f"| {100 * (model_s[target] / truth_s[target] - 1):+.1f} % "
                    f"| {100 * (corrected / truth_s[target] - 1):+.1f} % | {c.factor:.0f} "
                    f"| {c.log_sd:.3f} | {'yes' if inside else 'no'} |"
                )
    print()


def part_speed() -> None:
    rng = np.random.default_rng(SEED)
    keys = [
        CalibrationKey(scheduler=s, cluster=f"c{c}", gpu=g, framework=f)
        for s in ("slurm", "kubernetes")
        for c in range(10)
        for g in ("h100-sxm", "a100-sxm-80gb", "h200-sxm")
        for f in ("megatron", "torchtitan", "nemo")
    ]

    def rows(num_jobs: int) -> list[JobObservation]:
        out = []
        for i in range(10_000):
            job = int(rng.integers(num_jobs))
            out.append(
                JobObservation(
                    key=keys[job % len(keys)],
                    job_id=f"job{job}",
                    predicted_step_time_s=float(rng.uniform(0.1, 10.0)),
                    observed_step_time_s=float(rng.uniform(0.1, 10.0)),
                    num_iterations=int(rng.integers(1, 100_000)),
                    time_s=1.8e9 + float(i) * 60.0,
                )
            )
        return out

    print("## 3. Speed\n")
    print(
        f"Machine: {platform.processor() or platform.machine()}, Python "
        f"{platform.python_version()}, numpy {np.__version__}; {len(keys)} keys "
        f"(2 schedulers x 10 clusters x 3 GPU types x 3 frameworks).\n"
    )
    print("| workload | median of 7 | max |")
    print("| --- | --- | --- |")
    for num_jobs in (10_000, 2_000):
        data = rows(num_jobs)
        distinct = len({(o.key, o.job_id) for o in data})
        times = []
        for _ in range(7):
            cal = OnlineCalibration()
            t0 = time.perf_counter()
            cal.recalibrate(data)
            times.append(time.perf_counter() - t0)
        print(
            f"| `recalibrate`, 10,000 observations of {distinct:,} jobs "
            f"| {1e3 * float(np.median(times)):.1f} ms | {1e3 * max(times):.1f} ms |"
        )
    dicts: list[dict[str, Any]] = [
        {
            "key": o.key,
            "job_id": o.job_id,
            "predicted_step_time_s": o.predicted_step_time_s,
            "observed_step_time_s": o.observed_step_time_s,
            "num_iterations": o.num_iterations,
            "time_s": o.time_s,
        }
        for o in data
    ]
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        OnlineCalibration().recalibrate(JobObservation(**copy.copy(d)) for d in dicts)
        times.append(time.perf_counter() - t0)
    print(
        "| the same, building the 10,000 `JobObservation`s from dicts first "
        f"| {1e3 * float(np.median(times)):.1f} ms | {1e3 * max(times):.1f} ms |"
    )
    cal = OnlineCalibration()
    cal.recalibrate(data)
    t0 = time.perf_counter()
    for o in data[:1000]:
        cal.add(o)
    per_add = (time.perf_counter() - t0) / 1000
    t0 = time.perf_counter()
    for o in data[:1000]:
        cal.correction(o.key)
    per_corr = (time.perf_counter() - t0) / 1000
    print(
        "| one `observe` (stores the job, marks its 3 groups for recomputation) "
        f"| {1e6 * per_add:.0f} us (mean of 1,000) | |"
    )
    print(
        "| one `correction` (the first after those 1,000 observes recomputes the groups they "
        f"touched) | {1e6 * per_corr:.1f} us (mean of 1,000) | |"
    )
    print()


def main() -> None:
    print("# Online recalibration\n")
    print(
        f"Measured {datetime.now(UTC):%Y-%m-%d} with "
        "`.venv/bin/python benchmarks/recalibration.py` (seeded; see its docstring).\n"
    )
    part_simulated()
    part_real()
    part_speed()


if __name__ == "__main__":
    main()
