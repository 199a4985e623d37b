"""Predicted against real start times of pending jobs on the real dev Slurm, jobs placed on
nodes (``planner.capacity.placement``) against GPUs pooled per partition (the previous model).

    flock /tmp/slurm.lock .venv/bin/python -m benchmarks.pending_replay           # as root
    flock /tmp/slurm.lock .venv/bin/python -m benchmarks.pending_replay --write   # + results

Starts the dev Slurm (deploy/dev: two nodes of 64 CPUs, 500 GiB, 8 fake H100), waits until it
is idle and submits the scripted mix of ``MIX`` (CPU-only jobs, exclusive whole-node jobs,
memory-heavy jobs, GPU jobs of 2 to 16 GPUs), each a ``sleep`` of a duration from its
log-normal runtime band: the jobs take evenly spaced quantiles of their bands ((k + 0.5) / n),
in an order drawn with seed ``SEED``, so that the mix's runtimes spread as their bands say
(``stratified_normals``; twelve independent draws need not: seed 7 drew a log-sd of 0.66 of the
bands' with one job of twelve outside its p10-p90, and a calibrated forecast then looks too
wide). Every ``POLL_S`` it reads the cluster with the Slurm
adapter (``adapters.slurm.SlurmSource``: ``squeue --json``, ``sinfo --json``) and forecasts
every pending job's start as the service does (jobs in ``queue_order``), giving each job its
band (a running one: the band less the time it ran), not its drawn duration, so the forecast
knows what a runtime prediction would know. Each job's real start is the ``start_time`` Slurm
reports once it runs.

Reported over every forecast made while a job waited at least ``MIN_WAIT_S``: the median of
|p50 - real start| / wait (wait: real start - when the forecast was made), the median absolute
error, and how often the real start fell in the forecast's p10-p90; for the node model, the
pooled model (CPU-only jobs left out, as before) and Slurm's own estimate. The cost table times
both models on a synthetic queue (``cost_table``), the basis of
``planner.service.loops.queue_forecast.PLACEMENT_COST``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist

import numpy as np

from adapters.slurm import SlurmSource
from planner.capacity import QueuedJob, QueueSnapshot, fleet_from_nodes, forecast_pending
from planner.capacity.placement import PlacedJob, forecast_on_nodes
from planner.capacity.runtime import Z90, RuntimeBand
from planner.service.loops.queue_forecast import queue_order
from planner.specs.job import (
    ClusterSnapshot,
    JobResources,
    JobState,
    JobStatus,
    NodeShare,
    NodeState,
)

RESULTS = Path(__file__).parent / "results" / "pending_replay.md"
POLL_S = 3.0
SEED = 7
SAMPLES = 100
#: Forecasts made this close to the real start are left out of the relative error.
MIN_WAIT_S = 5.0
#: Spread of every job's runtime band: p90 / p10.
SPREAD = 1.5
#: Longest the replay may take, seconds.
DEADLINE_S = 600.0
WHOLE2 = ("-N", "2", "--exclusive", "--gres=gpu:h100:8")


@dataclass(frozen=True, slots=True)
class MixJob:
    """One job of the mix: name, sbatch arguments, p50 runtime (s), submit offset (s)."""

    name: str
    args: tuple[str, ...]
    p50_s: float
    at_s: float = 0.0

    @property
    def band(self) -> RuntimeBand:
        half = math.sqrt(SPREAD)
        return RuntimeBand(p10_s=self.p50_s / half, p50_s=self.p50_s, p90_s=self.p50_s * half)

    @property
    def limit_min(self) -> int:
        """A time limit comfortably past the band's p90 (Slurm counts whole minutes)."""
        return max(1, math.ceil(self.band.p90_s * 1.4 / 60.0))


MIX: tuple[MixJob, ...] = (
    MixJob("cpu-node1", ("-n1", "-w", "node1"), 40.0),
    MixJob("whole-2n-a", WHOLE2, 25.0),
    MixJob("gpu4", ("--gres=gpu:h100:4",), 35.0),
    MixJob("mem400-gpu2", ("--mem=400G", "--gres=gpu:h100:2"), 30.0),
    MixJob("cpu-mem300", ("-n1", "--mem=300G"), 40.0),
    MixJob("gpu8", ("--gres=gpu:h100:8",), 30.0),
    MixJob("gpu2", ("--gres=gpu:h100:2",), 20.0),
    MixJob("2n-gpu4", ("-N2", "--gres=gpu:h100:4"), 25.0),
    MixJob("cpu32", ("-c", "32"), 25.0, at_s=10.0),
    MixJob("whole-1n", ("-N1", "--exclusive", "--gres=gpu:h100:8"), 20.0, at_s=10.0),
    MixJob("gpu6", ("--gres=gpu:h100:6",), 30.0, at_s=20.0),
    MixJob("whole-2n-b", WHOLE2, 20.0, at_s=20.0),
)


@dataclass
class Seen:
    """What the replay saw of one job: its forecasts while it waited and its real start."""

    job: MixJob
    job_id: str
    duration_s: float
    real_start_s: float | None = None
    # (made at, node p10/p50/p90, pooled p50, Slurm's estimate)
    forecasts: list[tuple[float, tuple[float | None, ...], float | None, float | None]] = field(
        default_factory=list
    )


def _band_now(job: MixJob, state: JobState, now_s: float) -> RuntimeBand:
    """A running job's band less the time it ran (at least 1 s); a pending job's whole band."""
    if state.status is JobStatus.PENDING or state.start_time_s is None:
        return job.band
    ran = now_s - state.start_time_s
    b = job.band
    return RuntimeBand(
        p10_s=max(b.p10_s - ran, 1.0), p50_s=max(b.p50_s - ran, 1.0), p90_s=max(b.p90_s - ran, 1.0)
    )


def _forecast(snapshot: ClusterSnapshot, seen: dict[str, Seen]) -> float:
    """Forecast every pending job of the mix from ``snapshot``; returns the seconds taken."""
    resources = {r.job_id: r for r in snapshot.resources}
    jobs = queue_order([j for j in snapshot.jobs if j.status.is_active and j.job_id in seen])
    placed, pooled = [], []
    for state in jobs:
        band = _band_now(seen[state.job_id].job, state, snapshot.taken_at_s)
        if state.job_id in resources:
            placed.append(PlacedJob(state=state, runtime=band, resources=resources[state.job_id]))
        if state.num_gpus > 0:
            pooled.append(QueuedJob(state=state, runtime=band))
    started = time.perf_counter()
    nodes = forecast_on_nodes(
        snapshot.nodes,
        placed,
        taken_at_s=snapshot.taken_at_s,
        rng=np.random.default_rng(0),
        samples=SAMPLES,
    )
    took = time.perf_counter() - started
    pools = forecast_pending(
        fleet_from_nodes(snapshot.nodes),
        QueueSnapshot(taken_at_s=snapshot.taken_at_s, jobs=tuple(pooled)),
        rng=np.random.default_rng(0),
        samples=SAMPLES,
    )
    for state in jobs:
        if state.status is not JobStatus.PENDING or state.job_id not in nodes:
            continue
        pool = pools.get(state.job_id)
        seen[state.job_id].forecasts.append(
            (
                snapshot.taken_at_s,
                nodes[state.job_id].start_s,
                None if pool is None else pool.start_s[1],
                state.expected_start_time_s,
            )
        )
    return took


def stratified_normals(n: int, rng: np.random.Generator) -> list[float]:
    """Standard normal quantiles at ``(k + 0.5) / n`` for ``k < n``, in an order drawn from
    ``rng``: ``n`` draws whose spread is the distribution's (a share of about 0.2 of them
    outside the p10-p90), whatever the seed."""
    spots = [NormalDist().inv_cdf((k + 0.5) / n) for k in range(n)]
    return [spots[int(i)] for i in rng.permutation(n)]


def replay() -> tuple[list[Seen], list[float]]:
    """Run the mix on the dev Slurm; the jobs as seen and the node forecasts' times (s)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.slurm_stack import start_stack  # noqa: PLC0415 - the dev stack, replay only

    stack = start_stack()
    stack.run("scontrol", "ping")
    deadline = time.monotonic() + 120.0
    while stack.queued() or stack.busy_nodes():
        if time.monotonic() > deadline:
            raise SystemExit(f"the dev cluster is not idle: {stack.queued()} {stack.busy_nodes()}")
        time.sleep(1.0)
    normals = iter(stratified_normals(len(MIX), np.random.default_rng(SEED)))
    sigma = math.log(SPREAD) / (2.0 * Z90)
    workdir = Path(tempfile.mkdtemp(prefix="pending-replay-"))
    workdir.chmod(0o777)
    source = SlurmSource(env=stack.env, use_sacct=False, fetch_batch_scripts=False)
    seen: dict[str, Seen] = {}
    todo = sorted(MIX, key=lambda j: j.at_s)
    begin = time.monotonic()
    took: list[float] = []
    try:
        while True:
            now = time.monotonic() - begin
            while todo and todo[0].at_s <= now:
                job = todo.pop(0)
                duration = job.p50_s * math.exp(sigma * next(normals))
                job_id = stack.sbatch(
                    "-J", job.name, "-t", str(job.limit_min), f"--chdir={workdir}",
                    f"--output={workdir}/%x-%j.out", *job.args, "--wrap", f"sleep {duration:.1f}",
                )  # fmt: skip
                seen[job_id] = Seen(job, job_id, duration)
            snapshot = source.snapshot()
            for state in snapshot.jobs:
                record = seen.get(state.job_id)
                if record and state.status is not JobStatus.PENDING and state.start_time_s:
                    record.real_start_s = record.real_start_s or state.start_time_s
            if any(s.real_start_s is None for s in seen.values()):
                took.append(_forecast(snapshot, seen))
            elif not todo:
                break
            if now > DEADLINE_S:
                raise SystemExit(f"the mix did not start within {DEADLINE_S:.0f} s")
            time.sleep(POLL_S)
    finally:
        stack.run("scancel", *seen, check=False)
    return list(seen.values()), took


def _errors(seen: Sequence[Seen], which: int) -> tuple[list[float], list[float], list[bool]]:
    """(|error| / wait, |error| s, covered) over the forecasts of model ``which`` (0: nodes,
    1: pooled, 2: Slurm) made at least MIN_WAIT_S before the real start."""
    rel, err, covered = [], [], []
    for s in seen:
        if s.real_start_s is None:
            continue
        for made, band, pooled, slurm in s.forecasts:
            wait = s.real_start_s - made
            p50 = band[1] if which == 0 else pooled if which == 1 else slurm
            if wait < MIN_WAIT_S or p50 is None:
                continue
            rel.append(abs(p50 - s.real_start_s) / wait)
            err.append(abs(p50 - s.real_start_s))
            if which == 0 and band[0] is not None and band[2] is not None:
                covered.append(band[0] <= s.real_start_s <= band[2])
    return rel, err, covered


def cost_table(num_nodes: int = 32, num_pending: int = 100, samples: int = 20) -> list[str]:
    """Seconds per forecast of the node model and the pooled one on a synthetic full cluster:
    ``num_nodes`` busy 8-GPU nodes, ``num_pending`` pending jobs of 1 to 8 nodes."""
    gib = 1024**3
    nodes = [
        NodeState(
            name=f"n{i}", state="allocated", num_gpus=8, num_gpus_allocated=8, gpu_type="h100",
            num_cpus=64, memory_bytes=512.0 * gib, partitions=("gpu",), num_cpus_allocated=64,
            memory_allocated_bytes=64.0 * gib,
        )
        for i in range(num_nodes)
    ]  # fmt: skip
    placed, pooled = [], []
    for i in range(num_nodes):
        state = JobState(
            scheduler="slurm", cluster="c", job_id=f"r{i}", partition="gpu",
            status=JobStatus.RUNNING, num_gpus=8, gpu_type="h100", start_time_s=0.0,
            time_limit_s=86400.0,
        )  # fmt: skip
        band = RuntimeBand(p10_s=1000.0, p50_s=3000.0 + 10 * i, p90_s=9000.0)
        share = NodeShare(node=f"n{i}", num_cpus=64, memory_bytes=64.0 * gib, num_gpus=8)
        held = JobResources(job_id=f"r{i}", held=(share,), partitions=("gpu",))
        placed.append(PlacedJob(state=state, runtime=band, resources=held))
        pooled.append(QueuedJob(state=state, runtime=band))
    for i in range(num_pending):
        size = (1, 1, 2, 4, 8)[i % 5]
        state = JobState(
            scheduler="slurm", cluster="c", job_id=f"p{i}", partition="gpu",
            status=JobStatus.PENDING, num_gpus=8 * size, gpu_type="h100", time_limit_s=86400.0,
        )  # fmt: skip
        band = RuntimeBand(p10_s=1000.0, p50_s=3000.0, p90_s=9000.0)
        ask = JobResources(
            job_id=f"p{i}", num_nodes=size, cpus_per_node=8, memory_per_node_bytes=64.0 * gib,
            gpus_per_node=8, gpu_type="h100", exclusive=i % 7 == 0, partitions=("gpu",),
        )  # fmt: skip
        placed.append(PlacedJob(state=state, runtime=band, resources=ask))
        pooled.append(QueuedJob(state=state, runtime=band))
    started = time.perf_counter()
    forecast_on_nodes(nodes, placed, taken_at_s=0.0, rng=np.random.default_rng(0), samples=samples)
    node_s = time.perf_counter() - started
    started = time.perf_counter()
    forecast_pending(
        fleet_from_nodes(nodes),
        QueueSnapshot(taken_at_s=0.0, jobs=tuple(pooled)),
        rng=np.random.default_rng(0),
        samples=samples,
    )
    pool_s = time.perf_counter() - started
    return [
        f"| {num_nodes} nodes, {num_nodes} running + {num_pending} pending, {samples} samples "
        f"| {node_s:.2f} | {pool_s:.2f} | {node_s / pool_s:.1f} |"
    ]


def report(seen: Sequence[Seen], took: Sequence[float], cost: Sequence[str]) -> str:
    """The results as Markdown."""

    def median(values: Sequence[float]) -> str:
        return f"{statistics.median(values):.2f}" if values else "n/a"

    lines = [
        "# Pending jobs' predicted starts on the real dev Slurm (benchmarks/pending_replay.py)",
        "",
        f"Run {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC: `flock /tmp/slurm.lock .venv/bin/python"
        " -m benchmarks.pending_replay --write` (dev stack: 2 nodes x 64 CPUs, 500 GiB, 8 fake"
        f" H100; {len(seen)} jobs; a forecast every {POLL_S:g} s, {SAMPLES} samples; runtime"
        f" bands p90/p10 = {SPREAD:g}, durations at evenly spaced quantiles of them in an order"
        f" drawn with seed {SEED}; runtimes drawn from each band's p10, p50 and p90,"
        " planner.capacity.runtime.draw_runtimes).",
        "",
        f"Forecasts made at least {MIN_WAIT_S:g} s before the job's real start. Targets (node"
        " model): median |error| / wait <= 0.10, p10-p90 coverage 70-90 %.",
        "",
        "| model | forecasts | median abs(error) / wait | median abs(error), s "
        "| p10-p90 coverage |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for which, name in (
        (0, "jobs placed on nodes"),
        (1, "GPUs pooled per partition"),
        (2, "Slurm's estimate"),
    ):
        rel, err, covered = _errors(seen, which)
        cover = f"{100.0 * sum(covered) / len(covered):.0f} %" if covered else "n/a"
        lines.append(f"| {name} | {len(rel)} | {median(rel)} | {median(err)} | {cover} |")
    lines += [
        "",
        "| job | sbatch | drawn runtime, s | waited, s | forecasts "
        "| first: node p50 - real, s | first: pooled p50 - real, s |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s in seen:
        if s.real_start_s is None or not s.forecasts:
            continue
        made, band, pooled, _ = s.forecasts[0]
        node_err = "n/a" if band[1] is None else f"{band[1] - s.real_start_s:+.1f}"
        pool_err = "n/a" if pooled is None else f"{pooled - s.real_start_s:+.1f}"
        lines.append(
            f"| {s.job.name} ({s.job_id}) | `{' '.join(s.job.args)}` | {s.duration_s:.1f} | "
            f"{s.real_start_s - made:.0f} | {len(s.forecasts)} | {node_err} | {pool_err} |"
        )
    lines += [
        "",
        f"Node forecast time per poll: median {median(list(took))} s, "
        f"max {max(took, default=0):.2f} s (a busy 2-core machine).",
        "",
        "Cost of one forecast, seconds (same process, one after the other):",
        "",
        "| queue | jobs placed on nodes | GPUs pooled | ratio |",
        "| --- | ---: | ---: | ---: |",
        *cost,
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {RESULTS.name}")
    args = parser.parse_args(argv)
    seen, took = replay()
    text = report(seen, took, cost_table())
    print(text)
    if args.write:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
