"""The service's queue forecast at the scale of ``benchmarks/load.py``, in one process.

    .venv/bin/python -m benchmarks.forecast_scale                          # 1k, 3k, 10k jobs
    .venv/bin/python -m benchmarks.forecast_scale --jobs 1000 --samples 10
    .venv/bin/python -m benchmarks.forecast_scale --src /tmp/base          # another checkout
    .venv/bin/python -m benchmarks.forecast_scale --pooled --samples 100   # GPUs pooled

Builds the cluster of ``benchmarks/fake_slurm.py`` (``--jobs`` active job records on
``jobs / 5`` nodes, ``10 x jobs`` GPUs asked, seed 0, the load benchmark's 10,000 / 2,000 at
10k), reads it with the Slurm adapter (``squeue --json``, ``sinfo --json`` of the fake's
commands) and makes the forecast the service makes of it with jobs placed on nodes
(``planner.service.loops.queue_forecast.make_forecast``: every active job with its resources,
queue order, runtime bands from the time limits as no ETA is known), or with ``--pooled`` the
one of the default settings (the GPU jobs alone on the pools of ``fleet_from_nodes``, as
``queue_forecast._request`` builds it without resources): ``--samples`` Monte Carlo
samples per size (fewer than the service's 100, so that the old code finishes). Reported per
size: the CPU seconds of ``make_forecast`` (``resource.getrusage`` of this process) and of one
sample (the total over the samples: the samples are independent, and the forecast's setup
is a small part). With ``--src`` the forecast also runs in a child process with that
checkout's ``planner`` on the same inputs (pickled), for before/after figures in one window.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.service.loops.queue_forecast import ForecastRequest

REPO = Path(__file__).resolve().parents[1]
CLOCK_S = 1.8e9
SIZES = (1000, 3000, 10_000)


def build(jobs: int, samples: int, root: Path, *, pooled: bool = False) -> ForecastRequest:
    """The forecast request the service builds for the fake cluster of ``jobs`` records: with
    jobs placed on nodes, or with ``pooled`` as ``queue_forecast._request`` builds it without
    resources (the GPU jobs alone, on the pools of ``fleet_from_nodes``)."""
    from adapters.slurm import SlurmSource  # noqa: PLC0415 - after --src is on the path
    from benchmarks.fake_slurm import FakeSlurm  # noqa: PLC0415
    from planner.capacity import QueuedJob, fleet_from_nodes  # noqa: PLC0415
    from planner.capacity.fleet import DEFAULT_HORIZON_S, SchedulerKind  # noqa: PLC0415
    from planner.capacity.placement import PlacedJob  # noqa: PLC0415
    from planner.service.loops import queue_forecast as qf  # noqa: PLC0415

    fake = FakeSlurm(
        root, jobs=jobs, nodes=jobs // 5, gpus=10 * jobs, seed=0, clock=lambda: CLOCK_S
    )
    fake.populate()
    source = SlurmSource(
        bin_dir=str(fake.bin_dir), use_sacct=False, fetch_batch_scripts=False, clock=lambda: CLOCK_S
    )
    snap = source.snapshot()
    if pooled:
        fleet = fleet_from_nodes(snap.nodes, SchedulerKind.SLURM)
        gpu_jobs = qf.queue_order([j for j in snap.jobs if j.status.is_active and j.num_gpus > 0])
        bands = {
            j.job_id: qf.runtime_band(None, j, now_s=snap.taken_at_s, horizon_s=fleet.horizon_s)
            for j in gpu_jobs
        }
        return qf.ForecastRequest(
            key="benchmark",
            made_at_s=snap.taken_at_s,
            fleet=fleet,
            fleet_name="nodes",
            jobs=tuple(QueuedJob(state=j, runtime=bands[j.job_id][0]) for j in gpu_jobs),
            runtime_from={job_id: basis for job_id, (_, basis) in bands.items()},
            samples=samples,
        )
    resources = {r.job_id: r for r in snap.resources}
    active = [j for j in snap.jobs if j.status.is_active and j.job_id in resources]
    queued, placed, basis = [], [], {}
    for job in qf.queue_order(active):
        band, basis[job.job_id] = qf.runtime_band(
            None, job, now_s=snap.taken_at_s, horizon_s=DEFAULT_HORIZON_S
        )
        if job.num_gpus > 0:
            queued.append(QueuedJob(state=job, runtime=band))
        placed.append(PlacedJob(state=job, runtime=band, resources=resources[job.job_id]))
    return qf.ForecastRequest(
        key="benchmark",
        made_at_s=snap.taken_at_s,
        fleet=None,
        fleet_name=qf.NODES_FLEET,
        jobs=tuple(queued),
        runtime_from=basis,
        samples=samples,
        nodes=tuple(snap.nodes),
        placed=tuple(placed),
    )


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(request_path: Path) -> dict[str, float]:
    """CPU and wall seconds of ``make_forecast`` on the pickled request (this checkout)."""
    from planner.service.loops.queue_forecast import make_forecast  # noqa: PLC0415

    request = pickle.loads(request_path.read_bytes())
    cpu, wall = cpu_s(), time.perf_counter()
    records = make_forecast(request)
    return {
        "cpu_s": cpu_s() - cpu,
        "wall_s": time.perf_counter() - wall,
        "records": float(len(records)),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, nargs="*", default=list(SIZES))
    parser.add_argument(
        "--samples", type=int, nargs="*", default=[10, 3, 1], help="per size, in order"
    )
    parser.add_argument("--src", type=Path, help="time another checkout's planner")
    parser.add_argument(
        "--pooled",
        action="store_true",
        help="GPUs pooled (the default service settings) instead of jobs placed on nodes",
    )
    parser.add_argument("--request", type=Path, help=argparse.SUPPRESS)  # the child's input
    args = parser.parse_args(argv)
    if args.request is not None:  # the child of --src: time, print one line
        print(json.dumps(timed(args.request)))
        return
    samples = args.samples + [args.samples[-1]] * (len(args.jobs) - len(args.samples))
    print(f"load before: {os.getloadavg()[0]:.2f}")
    print("| jobs | nodes | pending | samples | checkout | CPU s | CPU s per sample | wall s |")
    print("| ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        for jobs, count in zip(args.jobs, samples, strict=True):
            request = build(jobs, count, Path(tmp) / str(jobs), pooled=args.pooled)
            path = Path(tmp) / f"{jobs}.pickle"
            path.write_bytes(pickle.dumps(request))
            pending = sum(1 for q in (request.placed or request.jobs) if not q.running)
            runs = [("this", None)] + ([(str(args.src), args.src)] if args.src else [])
            for name, src in runs:
                if src is None:
                    got = timed(path)
                else:
                    env = {**os.environ, "PYTHONPATH": str(src)}
                    out = subprocess.run(
                        [sys.executable, __file__, "--request", str(path)],
                        cwd=src,
                        env=env,
                        check=True,
                        capture_output=True,
                        text=True,
                    ).stdout
                    got = json.loads(out.strip().splitlines()[-1])
                print(
                    f"| {jobs:,} | {jobs // 5:,} | {pending:,} | {count} | {name} | "
                    f"{got['cpu_s']:.1f} | {got['cpu_s'] / count:.2f} | {got['wall_s']:.1f} |",
                    flush=True,
                )
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
