"""Scale of a capacity review: 20,000 GPUs, 2,000 running/queued/planned jobs, a 90-day
horizon and 200 Monte Carlo samples, in one process; optionally on a local Ray head.

    .venv/bin/python -m benchmarks.review                 # prints the markdown report
    .venv/bin/python -m benchmarks.review --write         # also writes benchmarks/results/review.md
    .venv/bin/python -m benchmarks.review --ray --write   # adds local-vs-Ray timings (needs ray)
    .venv/bin/python -m benchmarks.review --placement gpus  # the pooled model, for comparison

The workload is synthetic and seeded: five pools (H100, H200, A100, B200, MI300X) of 8-GPU
nodes with capacity changes; 500 running jobs filling about 85 % of each pool (20 of them
CPU-only jobs holding one node each, and one in seven of the GPU jobs on part of a node: 1, 2
or 4 GPUs), 300 pending jobs (one in seven on part of a node) and 1,200 planned jobs arriving
over 80 days, sizes from 1 to 1,024 GPUs, Slurm time limits of 1.5-3x the median runtime,
deadlines on a third of the planned jobs; jobs are placed on whole nodes (``placement:
nodes``, the default) unless ``--placement gpus``. Planned jobs come as a plan file
(four scenario templates; the performance model predicts every one) and today's jobs as a
snapshot file, both read through the same parsers as ``planner review``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time
from pathlib import Path
from typing import Any

import numpy as np

from planner.capacity import read_fleet, read_plan, read_snapshot
from planner.capacity.evaluate import Case, Evaluator
from planner.capacity.montecarlo import Executor

RESULTS = Path(__file__).parent / "results" / "review.md"
REPO = Path(__file__).resolve().parents[1]
START = "2025-07-01T00:00:00Z"
START_S = 1751328000.0
DAY = 86400.0
SIZES = np.array([8, 16, 32, 64, 128, 256, 512, 1024])
SIZE_P = np.array([0.22, 0.2, 0.18, 0.15, 0.11, 0.08, 0.04, 0.02])
PART_NODE = np.array([1, 2, 4])  # jobs on part of an 8-GPU node
PART_NODE_SHARE = 1 / 7
CPU_ONLY_JOBS = 20  # running jobs without GPUs, each holding one node of a GPU pool

FLEET = f"""
name: benchmark-20k
start: {START}
horizon_days: 90
pools:
  - {{name: h100, gpu: h100-sxm, num_gpus: 8000, cost_per_gpu_hour: 2.5,
      default_time_limit: "14-00:00:00"}}
  - {{name: h200, gpu: h200, num_gpus: 4000, cost_per_gpu_hour: 3.5,
      default_time_limit: "14-00:00:00"}}
  - {{name: a100, gpu: a100-80gb, num_gpus: 4000, cost_per_gpu_hour: 1.2,
      changes: [{{date: 2025-08-30, gpus: -256}}]}}
  - {{name: b200, gpu: b200, num_gpus: 2400, cost_per_gpu_hour: 5.0,
      changes: [{{date: 2025-07-31, gpus: 512}}]}}
  - {{name: mi300x, gpu: mi300x, num_gpus: 1600, cost_per_gpu_hour: 2.0}}
"""
GPUS = {"h100": "h100-sxm", "h200": "h200", "a100": "a100-80gb", "b200": "b200", "mi300x": "mi300x"}
CAPACITY = {"h100": 8000, "h200": 4000, "a100": 4000, "b200": 2400, "mi300x": 1600}
TEMPLATES = [
    "{model: {preset: llama3-8b}, parallelism: {context_parallel: 2, global_batch_size: 1024}}",
    "{model: {preset: llama3-70b}, parallelism: {tensor_parallel: 8, pipeline_parallel: 4, "
    "global_batch_size: 1024, recompute: selective}}",
    "{model: {preset: mixtral-8x7b}, parallelism: {tensor_parallel: 2, pipeline_parallel: 4, "
    "expert_parallel: 4, global_batch_size: 1024, recompute: full}}",
    "{model: {preset: llama2-13b}, parallelism: {tensor_parallel: 2, global_batch_size: 1024, "
    "recompute: selective}}",
]
MIN_GPUS = [2, 32, 64, 8]  # tp·pp·cp (times ep where it matters) of each template


def _slurm_time(seconds: float) -> str:
    days, rest = divmod(int(seconds), 86400)
    return f"{days}-{rest // 3600:02d}:{rest % 3600 // 60:02d}:00"


def _size(rng: np.random.Generator) -> int:
    """GPUs of a running or pending job: part of a node for one in seven, else 8-1,024."""
    if rng.random() < PART_NODE_SHARE:
        return int(rng.choice(PART_NODE))
    return int(rng.choice(SIZES, p=SIZE_P))


def make_inputs(seed: int = 0, placement: str = "nodes") -> tuple[str, str, str]:
    """(fleet YAML, plan YAML, snapshot JSON) of the benchmark workload; ``placement`` is the
    fleet's (``nodes`` or ``gpus``)."""
    rng = np.random.default_rng(seed)
    pools = list(CAPACITY)
    jobs: list[dict[str, Any]] = []
    used = dict.fromkeys(pools, 0)
    job_id = 1000
    while len(jobs) < 500 - CPU_ONLY_JOBS:
        pool = pools[len(jobs) % len(pools)]
        gpus = _size(rng)
        if used[pool] + gpus > 0.85 * CAPACITY[pool]:
            gpus = 8
            if used[pool] + gpus > 0.85 * CAPACITY[pool]:
                pool = min(pools, key=lambda p: used[p] / CAPACITY[p])
        used[pool] += gpus
        remaining = float(rng.lognormal(np.log(2 * DAY), 0.8))
        elapsed = float(rng.uniform(0, 3 * DAY))
        job_id += 1
        jobs.append({
            "job_id": str(job_id), "name": f"run-{job_id}", "account": f"team{job_id % 7}",
            "partition": pool, "status": "running", "num_gpus": gpus, "gpu_type": pool,
            "start_time_s": START_S - elapsed,
            "time_limit_s": elapsed + remaining * float(rng.uniform(1.5, 3.0)),
            "runtime_s": {"p10_s": remaining * 0.7, "p50_s": remaining, "p90_s": remaining * 1.4},
        })  # fmt: skip
    for i in range(CPU_ONLY_JOBS):
        pool = pools[i % len(pools)]
        remaining = float(rng.lognormal(np.log(DAY), 0.8))
        job_id += 1
        jobs.append({
            "job_id": str(job_id), "name": f"cpu-{job_id}", "account": f"team{job_id % 7}",
            "partition": pool, "status": "running", "num_gpus": 0, "num_nodes": 1,
            "start_time_s": START_S, "time_limit_s": 3 * remaining,
            "runtime_s": {"p10_s": remaining * 0.7, "p50_s": remaining, "p90_s": remaining * 1.4},
        })  # fmt: skip
    for _ in range(300):
        pool = str(rng.choice(pools))
        run = float(rng.lognormal(np.log(1.5 * DAY), 0.8))
        job_id += 1
        jobs.append({
            "job_id": str(job_id), "name": f"queued-{job_id}", "account": f"team{job_id % 7}",
            "partition": pool, "status": "pending", "num_gpus": _size(rng),
            "gpu_type": pool, "time_limit_s": run * float(rng.uniform(1.5, 3.0)),
            "priority": float(rng.integers(0, 100)),
            "runtime_s": {"p10_s": run * 0.75, "p50_s": run, "p90_s": run * 1.35},
        })  # fmt: skip
    snapshot = json.dumps({"taken_at": START, "jobs": jobs})
    lines = ["jobs:"]
    for i in range(1200):
        t = int(rng.integers(len(TEMPLATES)))
        gpus = max(int(rng.choice(SIZES[2:], p=SIZE_P[2:] / SIZE_P[2:].sum())), MIN_GPUS[t])
        pool = str(rng.choice(pools[:4]))  # no MI300X for planned jobs
        tokens = float(rng.lognormal(np.log(2e10 * gpus / 64), 0.6))
        at = float(rng.uniform(0, 80))
        lines += [
            f"  - name: plan-{i}",
            f"    scenario: {TEMPLATES[t]}",
            f"    total_tokens: {tokens:.4g}",
            f"    gpu: {GPUS[pool] if i % 10 else 'any'}",
            f"    num_gpus: {gpus}",
            f"    team: team{i % 7}",
            f"    priority: {int(rng.integers(0, 100))}",
            f"    earliest_start: {START_S + at * DAY:.0f}",
            f'    time_limit: "{_slurm_time(30 * DAY)}"',
        ]
        if i % 3 == 0:
            lines.append(f"    deadline: {START_S + (at + float(rng.uniform(5, 30))) * DAY:.0f}")
    return f"placement: {placement}\n{FLEET}", "\n".join(lines) + "\n", snapshot


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def measure(
    samples: int, executor: Executor | None = None, placement: str = "nodes"
) -> dict[str, float]:
    """Seconds per phase of one review (parse, build + predict, simulate, summarise)."""
    fleet_text, plan_text, snapshot_text = make_inputs(placement=placement)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    fleet = read_fleet(fleet_text, "fleet.yaml")
    plan = read_plan(plan_text, "plan.yaml", fleet)
    snapshot = read_snapshot(snapshot_text, "jobs.json")
    t1 = time.perf_counter()
    evaluator = Evaluator(
        start_s=START_S, samples=samples, rng=np.random.default_rng(0), executor=executor
    )
    case = Case("base", fleet, plan, snapshot)
    workload = evaluator.workload(case)
    t2 = time.perf_counter()
    result = evaluator.evaluate([case])[0]
    t3 = time.perf_counter()
    cpu = time.process_time() - cpu0
    return {
        "cpu_s": cpu,
        "parse_s": t1 - t0,
        "build_s": t2 - t1,
        "simulate_and_summarise_s": t3 - t2,
        "total_s": t3 - t0,
        "jobs": float(workload.num_jobs),
        "gpus": float(workload.pool_capacity.sum()),
        "excluded": float(len(workload.excluded)),
        "expected_misses": result.expected_misses,
        "lost_gpu_hours": result.lost_gpu_hours_mean,
        "held_gpu_hours": result.held_gpu_hours_mean,
        "goodput": result.goodput or 0.0,
        "restarts": sum(j.failures_mean + j.limit_kills_mean for j in result.jobs),
        "rss_mib": _rss_mib(),
    }


def ray_section(lines: list[str], samples: int, local_s: float) -> None:
    """Local vs Ray on a local head (same machine, same cores)."""
    from adapters.ray import RayExecutor  # noqa: PLC0415 (optional extra)
    from adapters.ray.local import LocalRayHead  # noqa: PLC0415

    t0 = time.perf_counter()
    with LocalRayHead(port=6390, num_cpus=2, pythonpath=str(REPO)) as head:
        started = time.perf_counter() - t0
        t0 = time.perf_counter()
        executor = RayExecutor(head.address)
        connect = time.perf_counter() - t0
        runs = measure(samples, executor)
        executor.close()
    sim = runs["simulate_and_summarise_s"]
    lines += [
        "## Local vs Ray (local head on loopback, same machine)\n",
        "| executor | simulate + summarise | whole review | head start | connect |",
        "| --- | ---: | ---: | ---: | ---: |",
        f"| local loop (one process) | {local_s:.1f} s | – | – | – |",
        f"| Ray, 2 worker CPUs | {sim:.1f} s | {runs['total_s']:.1f} s | {started:.1f} s | "
        f"{connect:.1f} s |",
        "",
        f"Speed-up {local_s / sim:.2f}x on this 2-core machine: two workers, each simulating "
        f"{samples // 2} of the {samples} samples in chunks of 25, while the driver and Ray's "
        "own processes share the same two cores. The overhead is the connection, shipping "
        "the workload once through the object store and one task per chunk; past one machine "
        "the same tasks spread over every worker CPU of the cluster.\n",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--ray", action="store_true", help="also time a local Ray head")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--placement", choices=("nodes", "gpus"), default="nodes")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    runs = [measure(args.samples, placement=args.placement) for _ in range(2)]
    load = max(load, os.getloadavg()[0])
    best = min(runs, key=lambda r: r["total_s"])
    lines = [
        "# Capacity review at scale\n",
        "Measured with `python -m benchmarks.review` on "
        f"{platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}; one process, local "
        f"executor, best of 2 runs; 1-minute load average up to {load:.1f} (other processes "
        "on the same cores). Target: under 60 s on 2 cores.\n",
        f"Workload: {best['gpus']:,.0f} GPUs in 5 pools of 8-GPU nodes, placement: "
        f"{args.placement}, {best['jobs']:,.0f} jobs (500 running, of them {CPU_ONLY_JOBS} "
        "CPU-only holding a node each, one in seven GPU jobs on part of a node; 300 pending; "
        f"1,200 planned; {best['excluded']:.0f} left out as unrunnable), 90-day "
        f"horizon, {args.samples} Monte Carlo samples, interruptions at Llama 3's rate; a run "
        "stopped by a failure or its time limit requeues and resumes from its last checkpoint "
        "(hourly, the default), paying a 10-minute restart.\n",
        "| phase | seconds |",
        "| --- | ---: |",
        f"| read fleet, plan (1,200 jobs) and snapshot (800 jobs) | {best['parse_s']:.2f} |",
        f"| build workload (performance model for every planned job) | {best['build_s']:.2f} |",
        f"| simulate {args.samples} samples + summarise | {best['simulate_and_summarise_s']:.2f} |",
        f"| **total** | **{best['total_s']:.2f}** |",
        "",
        f"CPU time of the process over the same phases: {best['cpu_s']:.2f} s (less sensitive "
        "than wall time to other processes sharing the cores).\n",
        f"Peak resident memory of the process: {best['rss_mib']:,.0f} MiB. Expected deadline "
        f"misses in the synthetic plan: {best['expected_misses']:.1f}. Stopped runs per sample "
        f"(failures and time-limit kills, requeued): {best['restarts']:,.0f}; GPU-hours lost "
        f"to them: {best['lost_gpu_hours']:,.0f} of {best['held_gpu_hours']:,.0f} held "
        f"(goodput {100 * best['goodput']:.1f} %).\n",
    ]
    if args.ray:
        ray_section(lines, args.samples, best["simulate_and_summarise_s"])
    report = "\n".join(lines)
    print(report)
    if args.write:
        RESULTS.write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
