"""One full sampling run: design -> operator timings (+ collective timings) -> files.

``run_sampling`` is what ``planner calibrate sample`` calls; it records the run's duration and
everything needed to reproduce the design (profile, seed, scale) in the ``run.json`` sidecar.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from adapters.sampling.collectives import sample_collectives
from adapters.sampling.files import SampleRun, write_sample_run
from adapters.sampling.operators import device_metadata, sample_operators
from planner.calibration.collectives import CollectiveSample
from planner.calibration.design import design
from planner.calibration.samples import OpSample

__all__ = ["run_sampling"]


def run_sampling(
    out: str | Path,
    *,
    device: str = "cpu",
    num_threads: int | None = None,
    scale: float = 1.0,
    seed: int = 0,
    dtypes: tuple[str, ...] | None = None,
    collectives: bool = True,
    num_ranks: int = 2,
    progress: Callable[[int, int, OpSample], None] | None = None,
) -> tuple[SampleRun, list[Path]]:
    """Sample this machine's ``device`` and write the run under ``out`` (module docstring).

    ``collectives`` adds a ``torch.distributed`` run over ``num_ranks`` local processes (gloo
    on CPU, NCCL on CUDA when that many GPUs are visible; skipped otherwise, noted in the
    metadata). Raises ``CalibrationError`` from the harnesses.
    """
    started = datetime.now(UTC)
    t0 = time.perf_counter()
    points = design(device, np.random.default_rng(seed), scale=scale, dtypes=dtypes)
    ops = sample_operators(
        points, device=device, num_threads=num_threads, seed=seed, progress=progress
    )
    ops_s = time.perf_counter() - t0
    colls: list[CollectiveSample] = []
    coll_note = "not requested"
    if collectives:
        backend = "gloo" if device == "cpu" else "nccl"
        if backend == "nccl":
            import torch  # noqa: PLC0415 (lazy)

            visible = torch.cuda.device_count()
            if visible < num_ranks:
                coll_note = f"skipped: NCCL needs {num_ranks} GPUs, {visible} visible"
        if coll_note == "not requested":
            colls = sample_collectives(num_ranks=num_ranks, backend=backend)
            coll_note = f"{backend}, {num_ranks} local processes"
    total_s = time.perf_counter() - t0
    meta = {
        **device_metadata(device),
        "format": "planner-samples/1",
        "design": {"profile": device, "seed": seed, "scale": scale, "num_points": len(points)},
        "dtypes": sorted({p.dtype for p in points}),
        "num_op_samples": len(ops),
        "num_collective_samples": len(colls),
        "collectives": coll_note,
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "op_sampling_duration_s": round(ops_s, 3),
        "duration_s": round(total_s, 3),
    }
    run = SampleRun(ops=tuple(ops), collectives=tuple(colls), metadata=meta)
    return run, write_sample_run(out, run)
