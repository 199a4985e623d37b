"""Live straggler detection under co-located CPU contention: false alarms per rank-step.

Two sources of per-rank ``rank_step`` timings, both fed through ``LiveStragglers`` (the
service's tracker: rank detector, node detector, host-wide rule, what-if):

* **recorded**: real tiny GPT ranks (PyTorch DDP, gloo) recorded by
  ``benchmarks/stragglers_record.py`` into ``tests/data/stragglers`` on the 2-core dev VM while
  other work and CPU hogs competed for the cores (see that folder's README for each file);
* **simulated co-located noise**: 64 ranks on 8 hosts, 400 logging intervals, each interval's
  per-rank log compute time = a host-shared deviation + a per-rank deviation, both resampled
  from the recorded CPU-hog run (its per-interval host medians and per-rank residuals, so the
  heavy tails of descheduling are kept); 20 runs with no slow rank (false alarms), 20 with one
  host throttled 1.5x from interval 100 (must be one slow node, no rank straggler) and 20 with
  one rank 1.3x from interval 100 (must be that rank, detection delay in intervals).

A *false-alarm rank-step* is a rank-interval in which the tracker's report names a rank (as a
straggler or as part of a slow node) that was not slowed; a *false-alarm onset* is the first
interval of such a naming (the alert an operator would get). Rates are per rank-step
(rank-interval); the detector's design point is one onset per 1e5 rank-steps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from planner.specs.job import RankStepRecord
from planner.stragglers.live import LiveStragglers

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "stragglers"
RUNS = 20
INTERVALS = 400
HOSTS, PER_HOST = 8, 8


def load(name: str) -> tuple[dict[str, Any], list[RankStepRecord]]:
    """(provenance, records) of a recorded file."""
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    records = [
        RankStepRecord(
            iteration=d["iteration"],
            rank=d["rank"],
            world_size=d["world_size"],
            compute_time_s=d["compute_time_s"],
            step_time_s=d["step_time_s"],
            num_iterations=d["num_iterations"],
            node=d["node"],
        )
        for d in map(json.loads, lines[1:])
    ]
    return json.loads(lines[0])["provenance"], records


def _named(report: Any) -> set[int]:
    if report is None:
        return set()
    ranks = {int(s["rank"]) for s in report.stragglers}
    return ranks | {int(r) for n in report.slow_nodes for r in n["ranks"]}


def replay(
    records: list[RankStepRecord], slowed: set[int], world: int
) -> tuple[int, int, int, int | None, list[dict[str, Any]]]:
    """Feed the records interval by interval: (rank-steps, false-alarm rank-steps, false-alarm
    onsets, first interval naming every slowed rank, the last report's slow nodes)."""
    tracker = LiveStragglers.new(world)
    by_iteration: dict[int, list[RankStepRecord]] = {}
    for rec in records:
        by_iteration.setdefault(rec.iteration, []).append(rec)
    steps = alarms = onsets = 0
    first = None
    report = None
    before: set[int] = set()
    for iteration in sorted(by_iteration):
        tracker.add(by_iteration[iteration])
        report = tracker.report()
        named = _named(report)
        steps += world
        alarms += len(named - slowed)
        onsets += len((named - slowed) - before)
        before = named
        if first is None and slowed and slowed <= named:
            first = iteration
    return steps, alarms, onsets, first, list(report.slow_nodes) if report else []


def recorded() -> None:
    print(
        "| recording | ranks x intervals | what was slowed | false-alarm onsets / rank-steps | "
        "flagged at iteration | slow nodes | load before |"
    )
    print("|---|---|---|---|---|---|---|")
    cases = [
        ("rank-steps-cpu-hogs.jsonl", set(), "nothing (2 CPU hogs)"),
        ("rank-steps-cpu-hogs-long.jsonl", set(), "nothing (2 CPU hogs)"),
        ("rank-steps-slow-rank-cpu-hogs.jsonl", {3}, "rank 3 x1.5 from 100 (2 CPU hogs)"),
        ("rank-steps-throttled-host.jsonl", {0, 1}, "host0 capped at 0.2 CPU"),
    ]
    for name, slowed, what in cases:
        if not (DATA / name).exists():
            continue
        provenance, records = load(name)
        world = records[0].world_size
        steps, alarms, onsets, first, nodes = replay(records, slowed, world)
        print(
            f"| {name} | {world} x {steps // world} | {what} | {onsets} / {alarms} of {steps} | "
            f"{first if first is not None else '-'} | "
            f"{', '.join(n['node'] for n in nodes) or '-'} | "
            f"{provenance['load_average_before']:.1f} |"
        )


def _noise_pool() -> tuple[np.ndarray, np.ndarray]:
    """Per-interval host deviations and per-rank residuals (log) of the recorded hog run."""
    _, records = load("rank-steps-cpu-hogs.jsonl")
    world = records[0].world_size
    iterations = sorted({r.iteration for r in records})
    grid = np.full((len(iterations), world), np.nan)
    index = {it: i for i, it in enumerate(iterations)}
    for rec in records:
        grid[index[rec.iteration], rec.rank] = rec.compute_time_s
    logs = np.log(grid[np.isfinite(grid).all(axis=1)])
    interval = np.median(logs, axis=1)
    return interval - np.median(interval), (logs - interval[:, None]).ravel()


def _simulate(
    rng: np.random.Generator, pool: tuple[np.ndarray, np.ndarray], slow: dict[int, float]
) -> list[list[RankStepRecord]]:
    host_dev, rank_dev = pool
    world = HOSTS * PER_HOST
    out = []
    for i in range(INTERVALS):
        host = np.repeat(rng.choice(host_dev, HOSTS), PER_HOST)
        compute = 0.1 * np.exp(host + rng.choice(rank_dev, world))
        if i >= 100:
            for rank, factor in slow.items():
                compute[rank] *= factor
        step = float(compute.max()) + 0.01
        out.append(
            [
                RankStepRecord(
                    iteration=5 * (i + 1),
                    rank=r,
                    world_size=world,
                    compute_time_s=float(c),
                    step_time_s=step,
                    num_iterations=5,
                    node=f"host{r // PER_HOST}",
                )
                for r, c in enumerate(compute)
            ]
        )
    return out


def simulated() -> None:
    rng = np.random.default_rng(14)
    pool = _noise_pool()
    print(
        "| simulated co-located noise (64 ranks, 8 hosts) | runs | rank-steps | false-alarm "
        "onsets (rate) | false-alarm rank-steps (rate) | runs right at the end | detection delay "
        "median / max (intervals) |"
    )
    print("|---|---|---|---|---|---|---|")
    host_ranks = set(range(3 * PER_HOST, 4 * PER_HOST))
    cases = [
        ("no slowdown", {}, set()),
        ("host3 all ranks x1.5 from 100", dict.fromkeys(host_ranks, 1.5), host_ranks),
        ("rank 42 x1.3 from 100", {42: 1.3}, {42}),
    ]
    for label, slow, slowed in cases:
        steps = alarms = onsets = right = 0
        delays = []
        for _ in range(RUNS):
            intervals = _simulate(rng, pool, slow)
            tracker = LiveStragglers.new(HOSTS * PER_HOST)
            first = None
            report = None
            before: set[int] = set()
            for i, recs in enumerate(intervals):
                tracker.add(recs)
                report = tracker.report()
                named = _named(report)
                steps += len(recs)
                alarms += len(named - slowed)
                onsets += len((named - slowed) - before)
                before = named
                if first is None and slowed and slowed <= named:
                    first = i - 100
            ok = report is not None and _named(report) == slowed
            if slowed == host_ranks:
                ok = ok and report is not None and not report.stragglers
            right += ok
            if first is not None:
                delays.append(first)
        delay = f"{np.median(delays):.0f} / {max(delays)}" if delays else "-"
        print(
            f"| {label} | {RUNS} | {steps:,} | {onsets} ({onsets / steps:.1e}) | "
            f"{alarms} ({alarms / steps:.1e}) | {right}/{RUNS} | {delay} |"
        )


def main() -> None:
    recorded()
    print()
    simulated()


if __name__ == "__main__":
    main()
