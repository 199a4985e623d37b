"""Straggler benchmarks: what-if analysis time and figures on the real traces, online detection
time-to-detect and false alarms on the real traces and on injected slowdowns.

Run: ``.venv/bin/python benchmarks/stragglers.py`` (writes nothing; paste the output into
``benchmarks/results/stragglers.md``).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from adapters.traces import read_layout, read_op_trace
from planner.stragglers import StragglerDetector, analyse, compute_time_series

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "traces"
INJECT_AT = 10
TRIALS = 40


def _first_flags(times: np.ndarray, ranks: tuple[str, ...], groups: np.ndarray) -> dict:
    det = StragglerDetector(ranks, groups=groups)
    first: dict[tuple[int, str], int] = {}
    for i, row in enumerate(times):
        for flag in det.update(row):
            first.setdefault((flag.rank, flag.kind), i)
    return first


def main() -> None:
    rng = np.random.default_rng(0)
    print(
        "| trace | S | ideal s/step | actual s/step | launch | diagnosis | stragglers | "
        "replay error | read+analyse s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in ("AR", "SE", "ST"):
        t0 = time.perf_counter()
        layout = read_layout(DATA / f"bytedance-straggler-meta-{name}.yaml")
        trace = read_op_trace(DATA / f"bytedance-straggler-trace-{name}.parquet", layout)
        report = analyse(trace)
        elapsed = time.perf_counter() - t0
        names = ", ".join(f"pp{w.stage}/dp{w.dp_rank}" for w in report.stragglers) or "-"
        print(
            f"| {name} | {report.slowdown:.3f} | {report.ideal_step_time_s:.2f} | "
            f"{report.actual_step_time_s:.2f} | {report.launch_slowdown:.3f} | "
            f"{report.diagnosis.value} (stages {list(report.slow_stages)}) | {names} | "
            f"{report.reproduction_error_ratio:.1e} | {elapsed:.2f} |"
        )
    print()
    print(
        "| trace | ranks x steps | peer CoV | flags on the real trace | injected +10%: "
        "detected | median / max steps | injected +20%: median / max | false alarms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in ("AR", "SE", "ST"):
        layout = read_layout(DATA / f"bytedance-straggler-meta-{name}.yaml")
        series, stages = compute_time_series(
            read_op_trace(DATA / f"bytedance-straggler-trace-{name}.parquet", layout)
        )
        times = series.times_s
        first = _first_flags(times, series.ranks, stages)
        real = {(series.ranks[r], kind): step for (r, kind), step in first.items()}
        truth = {0} if name == "AR" else set()
        false_alarms = sum(1 for (r, _) in first if r not in truth)
        logs = np.log(times)
        peer_cov = float(np.median(np.abs(logs - np.median(logs, axis=1, keepdims=True)))) * 1.4826
        candidates = [r for r in range(times.shape[1]) if r not in truth]
        cells = []
        for slow in (0.10, 0.20):
            delays, misses = [], 0
            for _ in range(TRIALS):
                r = int(rng.choice(candidates))
                injected = times.copy()
                injected[INJECT_AT:, r] *= 1 + slow
                flags = _first_flags(injected, series.ranks, stages)
                hits = [s - INJECT_AT for (rr, _), s in flags.items() if rr == r and s >= INJECT_AT]
                if hits:
                    delays.append(min(hits))
                else:
                    misses += 1
            med = f"{np.median(delays):.0f} / {max(delays)}" if delays else "-"
            cells.append((f"{TRIALS - misses}/{TRIALS}", med))
        print(
            f"| {name} | {times.shape[1]} x {times.shape[0]} | {peer_cov:.3f} | {real or '-'} | "
            f"{cells[0][0]} | {cells[0][1]} | {cells[1][1]} ({cells[1][0]}) | {false_alarms} |"
        )
    print()
    print(
        "| synthetic iid jitter (CoV) | rank-steps | false alarms | +10% detected "
        "| median / max steps |"
    )
    print("|---|---|---|---|---|")
    for cov in (0.006, 0.02, 0.05, 0.11):
        alarms, rank_steps, delays, misses = 0, 0, [], 0
        for _ in range(50):
            ranks = 64
            times = rng.lognormal(0.0, cov, size=(60, ranks))
            alarms += len(_first_flags(times, tuple(map(str, range(ranks))), np.zeros(ranks)))
            rank_steps += times.size
            r = int(rng.integers(ranks))
            times[INJECT_AT:, r] *= 1.10
            flags = _first_flags(times, tuple(map(str, range(ranks))), np.zeros(ranks))
            hits = [s - INJECT_AT for (rr, _), s in flags.items() if rr == r and s >= INJECT_AT]
            if hits:
                delays.append(min(hits))
            else:
                misses += 1
        med = f"{np.median(delays):.0f} / {max(delays)}" if delays else "-"
        print(f"| {cov} | {rank_steps} | {alarms} | {50 - misses}/50 | {med} |")


if __name__ == "__main__":
    main()
