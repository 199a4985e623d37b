"""What writing the Slurm hints costs after each ingest cycle at the load benchmark's scale:
a service built as ``planner serve`` builds it (``slurm.hints_file`` set), in this
process, over the fake Slurm of ``benchmarks/load.py`` (10,000 jobs, 2,000 nodes); after each of
``--cycles`` cycles, ``SlurmHintsRuntime.after_cycle`` is timed on its own.

    .venv/bin/python -m benchmarks.hints_cost [--cycles 3]

Prints one line per cycle: the cycle's wall time, ``after_cycle``'s, and the hints file's size.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=3)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="planner-hints-cost-", dir="/tmp"))
    root.chmod(0o755)  # the fake users read their files as others
    try:
        run(root, args.cycles)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(root: Path, cycles: int) -> None:
    from benchmarks.fake_slurm import FakeSlurm  # noqa: PLC0415 - after the argument check

    cluster = root / "cluster"
    fake = FakeSlurm(cluster, jobs=10_000, nodes=2_000, gpus=100_000, churn=0.01, seed=0)
    fake.populate()
    hints = root / "hints.json"
    os.environ.update(
        {
            "XDG_STATE_HOME": str(root / "state"),
            "PLANNER_DATABASE_URL": f"sqlite:///{root / 'planner.db'}",
            "PLANNER_HOST": "127.0.0.1",
            "PLANNER_SLURM__ENABLED": "on",
            "PLANNER_SLURM__BIN_DIR": str(cluster / "bin"),
            "PLANNER_SLURM__HINTS_FILE": str(hints),
            "PLANNER_SLURM__ALLOWED_FILE_ROOTS": json.dumps([str(cluster / "shared")]),
            "PLANNER_KUBERNETES__ENABLED": "off",
        }
    )
    from planner.service.main import create_app  # noqa: PLC0415 - reads the settings above
    from planner.service.settings import Settings  # noqa: PLC0415

    state = create_app(Settings(), start_loops=False).state.planner
    state.store.migrate()
    if state.slurm_hints is None:
        raise SystemExit("no Slurm hints runtime: slurm.hints_file was not taken")
    try:
        for i in range(cycles):
            if i:
                time.sleep(1.0)
                fake.advance()
            started = time.perf_counter()
            state.ingestor.run_cycle()
            cycle = time.perf_counter() - started
            started = time.perf_counter()
            state.slurm_hints.after_cycle(state.store, time.time())
            after = time.perf_counter() - started
            print(
                f"cycle {i}: {cycle:.2f} s, after_cycle {after:.2f} s, "
                f"hints file {hints.stat().st_size:,} bytes",
                flush=True,
            )
    finally:
        state.ingestor.close()


if __name__ == "__main__":
    main()
