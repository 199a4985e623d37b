"""What the ingest cycle spends building one queue forecast's request at 10,000 jobs.

    .venv/bin/python -m benchmarks.forecast_request                        # this checkout
    .venv/bin/python -m benchmarks.forecast_request --src /tmp/base        # A B A B with another
    .venv/bin/python -m benchmarks.forecast_request --history full         # the largest histories

Builds the cluster of ``benchmarks/fake_slurm.py`` (``--jobs`` active job records on
``jobs / 5`` nodes, seed 0, as ``benchmarks/forecast_scale.py``), reads it with the Slurm
adapter and gives each GPU job the row the service would hold: an ETA (remaining 600 / 1,200 /
2,400 s), a described scenario shared by 20 jobs in queue order (one draw group), and a
progress history as the store holds it (JSON) for every running job and one pending job in ten
(requeued): ``typical`` 32 recent intervals, 10 pauses, a restart for one job in five, one
phase; ``full`` the most a history keeps (400 pauses, 100 restarts, 50 phases). It then times
``queue_forecast._request`` (runtime bands, draw groups, which jobs resumed a run, the groups'
bands; the service's default settings: GPUs pooled on the nodes' pools) in this process, CPU
seconds (``resource.getrusage``), the median of ``--repeat`` calls, and alone the resumed set
(``_resumed`` of every job). With ``--src`` the same runs alternate with that checkout's
``planner`` (this checkout, then it, ``--rounds`` times; each run in a child process).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CLOCK_S = 1.8e9
#: Jobs of one described program in a row of the queue (one draw group).
GROUP = 20


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def history(kind: str, start_s: float, index: int) -> dict[str, object]:
    """A stored progress history of a run that began at ``start_s`` (module docstring)."""
    from planner.forecast.history import (  # noqa: PLC0415 - after --src is on the path
        Pause,
        PhaseEvent,
        ProgressHistory,
        RestartRecord,
    )

    pauses, restarts, phases = (400, 100, 50) if kind == "full" else (10, index % 5 == 0, 1)
    doc = ProgressHistory(
        recent=[[-0.5 + 0.01 * i, 10.0, start_s + 10 * i, 100.0 + 10 * i] for i in range(32)],
        wall_over_logged=[1.01] * 32,
        excess_s=[0.1] * 32,
        pauses=[
            Pause(after_iteration=1000 * i, iteration=1000 * i + 10, duration_s=30.0, time_s=i)
            for i in range(pauses)
        ],
        restarts=[
            RestartRecord(
                from_iteration=500 * i + 400,
                to_iteration=500 * i,
                time_s=start_s + 300 * i,
                gap_s=60.0,
                overhead_s=90.0,
            )
            for i in range(int(restarts))
        ],
        first_iteration=10,
        first_time_s=start_s + 5.0,
        segment_start=0,
        steady_iterations=5000,
        integer_times=False,
        phases=[
            PhaseEvent(
                start_iteration=300 * i, ratio=1.3, seen_iteration=300 * i + 50, seen_time_s=i
            )
            for i in range(phases)
        ],
        expected=[500, 1000],
    ).to_json()
    loaded: dict[str, object] = json.loads(json.dumps(doc))
    return loaded


def measure(jobs: int, kind: str, repeat: int) -> dict[str, object]:
    """The median CPU seconds of ``_request`` and of the resumed set (this checkout)."""
    from adapters.logs.tail import LogTailer  # noqa: PLC0415
    from adapters.slurm import SlurmSource  # noqa: PLC0415
    from benchmarks.fake_slurm import FakeSlurm  # noqa: PLC0415
    from planner.service.loops import queue_forecast as qf  # noqa: PLC0415
    from planner.service.loops.context import IngestDeps  # noqa: PLC0415
    from planner.service.models import JobRow  # noqa: PLC0415
    from planner.service.store.sql import SqlStore  # noqa: PLC0415
    from planner.specs.job import JobStatus  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp:
        fake = FakeSlurm(
            Path(tmp), jobs=jobs, nodes=jobs // 5, gpus=10 * jobs, seed=0, clock=lambda: CLOCK_S
        )
        fake.populate()
        snapshot = SlurmSource(
            bin_dir=str(fake.bin_dir),
            use_sacct=False,
            fetch_batch_scripts=False,
            clock=lambda: CLOCK_S,
        ).snapshot()
        deps = IngestDeps(
            store=SqlStore(f"sqlite:///{tmp}/db.sqlite"), sources=[], reader=LogTailer()
        )
        now = snapshot.taken_at_s
        queue = qf.queue_order([j for j in snapshot.jobs if j.status.is_active and j.num_gpus > 0])
        rows, histories = {}, 0
        for index, job in enumerate(queue):
            pending = job.status == JobStatus.PENDING
            start = job.start_time_s if job.start_time_s is not None else now - 3600.0
            doc = None
            if not pending or index % 10 == 0:
                doc, histories = history(kind, start, index), histories + 1
            rows[job.job_id] = JobRow(
                job_id=job.job_id,
                eta={
                    "remaining_s": {"p10": 600.0, "p50": 1200.0, "p90": 2400.0},
                    "completion_time_s": {"p10": now + 600, "p50": now + 1200, "p90": now + 2400},
                    "made_at_s": now,
                },
                scenario={"model": f"program {index // GROUP}"},
                progress_history=doc,
            )
        request_s, resumed_s, resumed = [], [], 0
        for _ in range(repeat):
            start_cpu = cpu_s()
            qf._request(deps, snapshot, queue, rows, key="benchmark", now_s=now)
            request_s.append(cpu_s() - start_cpu)
            start_cpu = cpu_s()
            resumed = sum(qf._resumed(rows[job.job_id], job) for job in queue)
            resumed_s.append(cpu_s() - start_cpu)
    return {
        "jobs": len(queue),
        "histories": histories,
        "resumed": resumed,
        "request_cpu_s": statistics.median(request_s),
        "resumed_cpu_s": statistics.median(resumed_s),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--history", choices=("typical", "full"), default="typical")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--src", type=Path, help="alternate with another checkout's planner")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:  # one run: this process imports its checkout's planner
        print(json.dumps(measure(args.jobs, args.history, args.repeat)))
        return
    print("| checkout | jobs | histories | resumed | request CPU s | resumed set CPU s | load |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    here = Path(__file__).resolve().parents[1]
    checkouts = [("this", here)] + ([(str(args.src), args.src)] if args.src else [])
    for _ in range(args.rounds if args.src else 1):
        for name, src in checkouts:  # each in a fresh child process, alike
            command = [sys.executable, __file__, "--child", "--jobs", str(args.jobs)]
            command += ["--history", args.history, "--repeat", str(args.repeat)]
            env = {**os.environ, "PYTHONPATH": str(src)}  # its planner and fake cluster
            out = subprocess.run(
                command, cwd=src, env=env, check=True, capture_output=True, text=True
            ).stdout
            got = json.loads(out.strip().splitlines()[-1])
            print(
                f"| {name} | {got['jobs']:,} | {got['histories']:,} | {got['resumed']:,} | "
                f"{got['request_cpu_s']:.3f} | {got['resumed_cpu_s']:.3f} | "
                f"{os.getloadavg()[0]:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
