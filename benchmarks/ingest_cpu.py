"""CPU of the ingest cycles at the load benchmark's scale, in one process (no HTTP, no spawned
service): the fake Slurm of ``benchmarks/load.py`` (10,000 jobs, 2,000 nodes by default), the
service's own ingest loop (``planner.service.main.build_service``: its settings, sources,
learning, garbage collection), a settable clock (15 s between cycles, one fake change each).

    .venv/bin/python -m benchmarks.ingest_cpu                    # CPU-s of each cycle
    .venv/bin/python -m benchmarks.ingest_cpu --profile /tmp/p   # cProfile (CPU-s) of each cycle
    .venv/bin/python -m benchmarks.ingest_cpu --dump /tmp/a.json # what the store holds at the end
    .venv/bin/python -m benchmarks.ingest_cpu --statements       # what each cycle wrote

Two checkouts' ``--dump`` files are equal when they store the same (the fake cluster, its
clock and the forecast's draws are seeded; the temporary directory is written ``ROOT``).

Measured per cycle: CPU seconds of this process (``time.process_time``: the fake's own change
is not counted; the queue forecast's worker process is not counted) and wall seconds;
cycle kinds: ``first`` (empty store), ``forecast`` (stores the records of a queue forecast the
worker finished), ``steady``. The worker's forecast uses ``--samples`` Monte Carlo samples
(default 2: its records are as many as with 100, only their values differ), and the loop waits
for it before the next cycle, so the cycle that stores it is the one after it finished.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

T0 = 1_800_000_000.0


class Clock:
    """A settable clock, epoch seconds."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def stored(db: str, root: Path) -> dict[str, Any]:
    """What the store holds of every job (the columns the API and the metrics read), as
    JSON would hold it, with the temporary directory ``root`` named ``ROOT``."""
    from planner.service.store.sql import SqlStore  # noqa: PLC0415

    store = SqlStore(db)
    out = {}
    for row in store.list_jobs():
        out[row.job_id] = {
            "status": row.status,
            "active": row.active,
            "state": row.state,
            "described_by": row.described_by,
            "prediction": row.prediction,
            "iteration": row.iteration,
            "eta": row.eta,
            "queue_forecast": row.queue_forecast,
            "ended_s": row.ended_s,
            "last_seen_s": row.last_seen_s,
        }
    text = json.dumps(out, sort_keys=True).replace(str(root), "ROOT")
    result: dict[str, Any] = json.loads(text)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=2_000)
    parser.add_argument("--gpus", type=int, default=100_000)
    parser.add_argument("--cycles", type=int, default=6, help="cycles after the first")
    parser.add_argument("--samples", type=int, default=2, help="the forecast's samples")
    parser.add_argument(
        "--first-change-s",
        type=float,
        default=15.0,
        help="seconds between the first cycle and the fake's first change (in the load "
        "benchmark the first change comes a first cycle and more after the cluster was made: "
        "more jobs printed progress in it than in a later one)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", help="write each cycle's cProfile stats to PREFIX-N.prof")
    parser.add_argument("--dump", help="write what the store holds at the end (JSON)")
    parser.add_argument(
        "--statements",
        action="store_true",
        help="per cycle, the parameter sets of each kind of write (UPDATEs by the columns they "
        "set; a multi-row INSERT counts its values)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()

    from sqlalchemy import event  # noqa: PLC0415

    from adapters.slurm import SlurmSource  # noqa: PLC0415
    from benchmarks.fake_slurm import FakeSlurm  # noqa: PLC0415
    from planner.service.main import build_service  # noqa: PLC0415
    from planner.service.settings import Settings  # noqa: PLC0415

    root = Path(tempfile.mkdtemp(prefix="planner-ingest-cpu-", dir="/tmp"))
    root.chmod(0o755)
    clock = Clock(T0)
    try:
        fake = FakeSlurm(
            root / "cluster",
            jobs=args.jobs,
            nodes=args.nodes,
            gpus=args.gpus,
            seed=args.seed,
            clock=clock,
        )
        t = time.process_time()
        fake.populate()
        print(f"populated in {time.process_time() - t:.1f} CPU-s: {fake.summary()['jobs']} jobs")
        db = f"sqlite:///{root / 'planner.db'}"
        settings = Settings(
            database_url=db,
            slurm={
                "enabled": "on",
                "bin_dir": str(fake.bin_dir),
                "allowed_file_roots": [str(fake.shared)],
            },
            kubernetes={"enabled": "off"},
            queue_forecast={"samples": args.samples},
        )
        source = SlurmSource(
            bin_dir=str(fake.bin_dir), allowed_file_roots=[str(fake.shared)], clock=clock
        )
        service = build_service(settings, sources=[source], clock=clock)
        service.state.store.migrate()
        written: Counter[str] = Counter()

        def count(_c: Any, _cur: Any, statement: str, params: Any, _ctx: Any, many: bool) -> None:
            if statement.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
                head = " ".join(statement.split()[:3])
                if head.upper().startswith("UPDATE"):  # the columns it sets
                    head = statement.split(" WHERE ", maxsplit=1)[0]
                    head = head.replace("=?", "").replace(" = ?", "")
                written[head] += len(params) if many else 1

        event.listen(service.state.store.engine, "before_cursor_execute", count)
        loop = service.state.ingestor
        forecaster = loop.deps.forecaster
        ready = forecaster.ready
        cycle = [0]
        # one forecast, handed to the worker by the first cycle (as in the service, where a
        # forecast of 10,000 jobs is in flight or resting for the next 20 cycles)
        forecaster.ready = lambda key: cycle[0] == 0 and ready(key)  # type: ignore[method-assign]
        figures = []
        try:
            for n in range(args.cycles + 1):
                cycle[0] = n
                if n:
                    clock.now += args.first_change_s if n == 1 else 15.0
                    printed = fake.advance()["progressed"]
                flights = dict(forecaster._flights)
                for flight in flights.values():  # the forecast finishes before this cycle
                    flight.future.result(timeout=600)
                kind = "first" if n == 0 else ("forecast" if flights else "steady")
                # CPU seconds of the whole process (a worker thread's read counts where the
                # cycle waits for it), not wall time, which a busy machine inflates
                profile = cProfile.Profile(time.process_time) if args.profile else None
                wall = time.perf_counter()
                cpu = time.process_time()
                if profile is not None:
                    profile.enable()
                report = loop.run_cycle()
                if profile is not None:
                    profile.disable()
                cpu = time.process_time() - cpu
                wall = time.perf_counter() - wall
                if profile is not None:
                    profile.dump_stats(f"{args.profile}-{n}.prof")
                if not report.all_ok:
                    raise SystemExit(f"cycle {n} failed: {report.results}")
                figures.append((n, kind, cpu))
                print(f"cycle {n} ({kind}): {cpu:.2f} CPU-s, {wall:.2f} s", flush=True)
                if n:
                    print(f"    jobs that printed progress in the change it read: {printed}")
                if args.statements:
                    for head, rows in written.most_common():
                        print(f"    {rows:6d} {head}")
                written.clear()
        finally:
            loop.close()
        if args.dump:
            Path(args.dump).write_text(json.dumps(stored(db, root), sort_keys=True))
        steady = [cpu for _, kind, cpu in figures if kind == "steady"]
        print(
            "first {:.2f}, forecast {}, steady mean {:.2f} max {:.2f} CPU-s; load {:.2f}".format(
                figures[0][2],
                [round(cpu, 2) for _, kind, cpu in figures if kind == "forecast"],
                sum(steady) / max(1, len(steady)),
                max(steady, default=0.0),
                os.getloadavg()[0],
            )
        )
        if args.profile:
            for n, kind, _ in figures:
                if kind != "steady" or n == figures[-1][0]:
                    print(f"--- cycle {n} ({kind}): the 25 calls of most cumulative time")
                    stats = pstats.Stats(f"{args.profile}-{n}.prof")
                    stats.sort_stats("cumulative").print_stats(25)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
