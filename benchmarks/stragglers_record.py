"""Record real per-rank ``rank_step`` lines of the tiny GPT under co-located CPU contention.

Starts ``--ranks`` processes of ``deploy/dev/tiny_gpt/train.py`` (PyTorch DDP over gloo, one
CPU thread each, as ``torchrun`` would: ``RANK``, ``WORLD_SIZE``, ``MASTER_PORT``), spreads them
over ``--nodes`` pretend hosts (``SLURMD_NODENAME`` = ``host0``, ``host1``, ...; with
``--pin`` each host's ranks are pinned to its own CPU with ``taskset``), optionally runs CPU
hogs beside them (``--hogs N`` busy processes; ``--hog-host H`` pins them to host H's CPU, a
host-wide slowdown; unpinned they compete with every rank, co-located noise) and optionally
slows a rank on purpose (``--slow-rank``, train.py's own option). Writes the ``rank_step``
JSON lines of every rank to ``--out`` (one JSON object per line) with a first ``{"provenance":
...}`` line saying how they were made.

Run: ``.venv/bin/python benchmarks/stragglers_record.py --out tests/data/stragglers/X.jsonl
--ranks 4 --nodes 2 --iters 400 --hogs 2``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ROOT / "deploy" / "dev" / "tiny_gpt" / "train.py"
_HOG = "import time\nend = time.time() + {s}\nx = 0\nwhile time.time() < end:\n    x += 1\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--iters", type=int, default=400)
    p.add_argument("--log-interval", type=int, default=2)
    p.add_argument("--hogs", type=int, default=0, help="busy CPU processes beside the job")
    p.add_argument("--hog-host", type=int, default=-1, help="pin the hogs to this host's CPU")
    p.add_argument("--pin", action="store_true", help="pin host h's ranks to CPU h %% cores")
    p.add_argument(
        "--throttle-host",
        type=int,
        default=-1,
        help="run this host's ranks in a CPU cgroup capped at --throttle-cpus (cgroup v1 cpu)",
    )
    p.add_argument("--throttle-cpus", type=float, default=0.2)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-factor", type=float, default=1.0)
    p.add_argument("--slow-from-iteration", type=int, default=1)
    p.add_argument("--port", type=int, default=29731)
    args = p.parse_args()
    cores = os.cpu_count() or 1

    def cpu_of(host: int) -> str:
        return str(host % cores)

    def host_of(rank: int) -> int:
        return rank * args.nodes // args.ranks

    load_before = os.getloadavg()[0]
    hogs = []
    for _ in range(args.hogs):
        cmd = [sys.executable, "-c", _HOG.format(s=3600)]
        if args.hog_host >= 0:
            cmd = ["taskset", "-c", cpu_of(args.hog_host), *cmd]
        hogs.append(subprocess.Popen(cmd))
    train_args = [
        "--train-iters",
        str(args.iters),
        "--log-interval",
        str(args.log_interval),
        "--micro-batch-size",
        "2",
        "--global-batch-size",
        str(2 * args.ranks),
        "--slow-rank",
        str(args.slow_rank),
        "--slow-factor",
        str(args.slow_factor),
        "--slow-from-iteration",
        str(args.slow_from_iteration),
    ]
    cgroup = _throttle_group(args.throttle_cpus) if args.throttle_host >= 0 else None
    ranks = []
    logs: list[Any] = []
    started = time.time()
    for rank in range(args.ranks):
        env = {
            **os.environ,
            "RANK": str(rank),
            "WORLD_SIZE": str(args.ranks),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(args.port),
            "SLURMD_NODENAME": f"host{host_of(rank)}",
            "OMP_NUM_THREADS": "1",
        }
        cmd = [sys.executable, str(TRAIN), *train_args]
        if args.pin:
            cmd = ["taskset", "-c", cpu_of(host_of(rank)), *cmd]
        if cgroup is not None and host_of(rank) == args.throttle_host:
            enter = f'echo $$ > {cgroup}/cgroup.procs && exec "$@"'
            cmd = ["sh", "-c", enter, "sh", *cmd]
        # A file per rank, not a pipe: a full pipe would block a rank and with it the job.
        log = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # noqa: SIM115
        logs.append(log)
        ranks.append(subprocess.Popen(cmd, env=env, stdout=log, text=True))
    lines = []
    try:
        for proc, log in zip(ranks, logs, strict=True):
            proc.wait(timeout=3600)
            log.seek(0)
            lines += [line for line in log.read().splitlines() if '"event": "rank_step"' in line]
            log.close()
            if proc.returncode:
                print(f"rank exited {proc.returncode}", file=sys.stderr)
                return 1
    finally:
        for hog in hogs:
            hog.terminate()
            hog.wait()
        if cgroup is not None:
            cgroup.rmdir()
    records = sorted(
        (json.loads(line) for line in lines), key=lambda r: (r["iteration"], r["rank"])
    )
    provenance = {
        "provenance": {
            "made_by": "benchmarks/stragglers_record.py",
            "argv": sys.argv[1:],
            "train": "deploy/dev/tiny_gpt/train.py (PyTorch DDP, gloo, CPU, 1 thread per rank)",
            "machine": f"{platform.machine()}, {cores} cores, {platform.platform()}",
            "torch": _torch_version(),
            "load_average_before": load_before,
            "wall_s": round(time.time() - started, 1),
            "date": time.strftime("%Y-%m-%d"),
        }
    }
    with args.out.open("w", encoding="utf-8") as f:
        f.write(json.dumps(provenance) + "\n")
        for rec in records:
            f.write(json.dumps(rec) + "\n")
    print(f"{len(records)} rank_step lines -> {args.out}")
    return 0


def _throttle_group(cpus: float) -> Path:
    """A cgroup v1 ``cpu`` group capped at ``cpus`` CPUs (CFS quota over a 100 ms period)."""
    group = Path("/sys/fs/cgroup/cpu") / f"planner-record-{os.getpid()}"
    group.mkdir()
    (group / "cpu.cfs_period_us").write_text("100000")
    (group / "cpu.cfs_quota_us").write_text(str(int(cpus * 100000)))
    return group


def _torch_version() -> str:
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        return "unknown"
    return str(torch.__version__)


if __name__ == "__main__":
    sys.exit(main())
