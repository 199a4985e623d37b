"""Straggler benchmarks: what-if analysis time and figures on the real traces, the analysis at
scale on simulated jobs, online detection time-to-detect and false alarms on the real traces,
on injected slowdowns and under co-located CPU contention.

Run: ``.venv/bin/python benchmarks/stragglers.py [--only scaling|traces|online|contention]
[--workers 64 512 ...]`` (writes nothing; paste the output into
``benchmarks/results/stragglers.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapters.traces import read_layout, read_op_trace  # noqa: E402
from benchmarks import stragglers_contention  # noqa: E402
from planner.stragglers import StragglerDetector, analyse, compute_time_series  # noqa: E402
from tests.stragglers.simulate import simulate  # noqa: E402

DATA = ROOT / "tests" / "data" / "traces"
SCALE_WORKERS = (64, 512, 2048, 8192)
SCALE_STAGES = 8
_CLI = (sys.executable, "-m", "planner", "stragglers")
INJECT_AT = 10
TRIALS = 40


def _first_flags(times: np.ndarray, ranks: tuple[str, ...], groups: np.ndarray) -> dict:
    det = StragglerDetector(ranks, groups=groups)
    first: dict[tuple[int, str], int] = {}
    for i, row in enumerate(times):
        for flag in det.update(row):
            first.setdefault((flag.rank, flag.kind), i)
    return first


def _run_cli(trace: Path, meta: Path) -> tuple[float, float, float, str]:
    """``planner stragglers TRACE --meta META --json`` in a fresh process: (wall s, CPU s (user
    + system), peak RSS MiB, stdout)."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [*_CLI, str(trace), "--meta", str(meta), "--json"],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        text = out.read().decode()
    cpu = usage.ru_utime + usage.ru_stime
    if proc.returncode:
        return wall, cpu, usage.ru_maxrss / 1024, text.strip().splitlines()[-1]
    return wall, cpu, usage.ru_maxrss / 1024, text


def scaling(workers_list: tuple[int, ...]) -> None:
    """Simulated 1F1B jobs (8 stages, 16 micro-batches, 2 steps, worker (dp-1, stage 1) at
    1.5x): ``planner stragglers`` wall time and peak memory, S against the simulator's truth."""
    print(
        "| workers (dp x pp) | trace rows | planner stragglers wall s (CPU s) | peak RSS MiB | "
        "read s | analyse s (CPU s) | S | simulated S | abs error | straggler found |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for workers in workers_list:
        dp = workers // SCALE_STAGES
        factor = np.ones((1, dp, SCALE_STAGES, 1, 1))
        factor[0, dp - 1, 1] = 1.5
        common = {
            "dp": dp,
            "pp": SCALE_STAGES,
            "num_microbatches": 16,
            "num_steps": 2,
            "p2p_s": 0.02,
            "dp_collective_s": 0.1,
            "optimizer_s": 0.2,
        }
        sim = simulate(forward_s=factor, backward_s=2 * factor, **common)  # type: ignore[arg-type]
        mean = float(factor.mean())
        balanced = simulate(forward_s=mean, backward_s=2 * mean, **common)  # type: ignore[arg-type]
        truth = float(sim.step_time_s.mean() / balanced.step_time_s.mean())
        with tempfile.TemporaryDirectory() as tmp:
            trace_path, meta_path = sim.write(Path(tmp), f"W{workers}")
            del sim, balanced
            wall, cpu, rss, text = _run_cli(trace_path, meta_path)
            t0 = time.perf_counter()
            trace = read_op_trace(trace_path, read_layout(meta_path))
            read_s = time.perf_counter() - t0
            rows = trace.num_ops
            c0 = time.process_time()
            t0 = time.perf_counter()
            report = analyse(trace)
            analyse_s, analyse_cpu = time.perf_counter() - t0, time.process_time() - c0
            del trace
        cli = json.loads(text) if text.startswith("{") else {"slowdown": float("nan")}
        found = [(w.stage, w.dp_rank) for w in report.stragglers] == [(1, dp - 1)]
        print(
            f"| {workers:,} ({dp} x {SCALE_STAGES}) | {rows:,} | {wall:.1f} ({cpu:.1f}) | "
            f"{rss:.0f} | {read_s:.2f} | {analyse_s:.2f} ({analyse_cpu:.2f}) | "
            f"{cli['slowdown']:.5f} | {truth:.5f} | {abs(cli['slowdown'] - truth):.1e} | "
            f"{'yes' if found else 'NO'} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("scaling", "traces", "online", "contention"))
    parser.add_argument("--workers", type=int, nargs="+", default=list(SCALE_WORKERS))
    args = parser.parse_args()
    if args.only in (None, "scaling"):
        print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        scaling(tuple(args.workers))
        print()
    if args.only in (None, "traces", "online"):
        traces_and_online(args.only)
    if args.only in (None, "contention"):
        print()
        stragglers_contention.main()


def traces_and_online(only: str | None) -> None:
    rng = np.random.default_rng(0)
    if only == "online":
        online(rng)
        return
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
    if only is None:
        online(rng)


def online(rng: np.random.Generator) -> None:
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
