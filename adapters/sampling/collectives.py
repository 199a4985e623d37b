"""Times collectives with ``torch.distributed`` over local processes (gloo on CPU, NCCL on GPUs).

``sample_collectives(num_ranks=2, backend="gloo")`` starts ``num_ranks`` processes on this host
(``multiprocessing`` spawn context, TCP rendezvous on a free loopback port), and in each one
times, for every message size, ``all_reduce``, ``all_gather`` (into one tensor),
``reduce_scatter`` (from one tensor), ``all_to_all`` and a send/recv pair between ranks 0 and
1: ``num_warmup`` untimed calls, then ``num_repeats`` calls each bracketed by a barrier. A
rank's time is the median of its calls; the row keeps the slowest rank's median, as a
collective ends when its last rank does. Sizes follow nccl-tests' convention (the total buffer;
``planner.calibration.collectives``). All ranks share one host: the tier is ``scale_up``.

torch is imported inside the functions (and in the spawned workers).
"""

from __future__ import annotations

import contextlib
import math
import queue
import socket
import statistics
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from planner.calibration.collectives import Collective, CollectiveSample, Tier
from planner.errors import CalibrationError

__all__ = ["DEFAULT_SIZES_BYTES", "sample_collectives"]

DEFAULT_SIZES_BYTES: tuple[int, ...] = tuple(2**e for e in range(10, 25, 2))
"""1 KiB to 16 MiB in factors of 4."""

_ALL = (
    Collective.ALL_REDUCE,
    Collective.ALL_GATHER,
    Collective.REDUCE_SCATTER,
    Collective.ALL_TO_ALL,
    Collective.SEND_RECV,
)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _op(  # noqa: PLR0917
    torch: Any, dist: Any, coll: Collective, size: int, rank: int, world: int, dev: str
) -> Any:
    """A closure running one ``coll`` of ``size`` bytes (float32) on this rank."""
    n = max(world, int(size // 4) // world * world)
    buf = torch.ones(n, device=dev)
    if coll is Collective.ALL_REDUCE:
        return lambda: dist.all_reduce(buf)
    if coll is Collective.ALL_GATHER:
        part = torch.ones(n // world, device=dev)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return lambda: gather(buf, part)
    if coll is Collective.REDUCE_SCATTER:
        part = torch.empty(n // world, device=dev)
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return lambda: scatter(part, buf)
    if coll is Collective.ALL_TO_ALL:
        out = torch.empty_like(buf)
        return lambda: dist.all_to_all_single(out, buf)

    def sendrecv() -> None:  # ranks 0 and 1 exchange; the others idle
        if rank == 0:
            dist.send(buf, 1)
        elif rank == 1:
            dist.recv(buf, 0)

    return sendrecv


def _worker(  # noqa: PLR0917 (multiprocessing passes positional arguments)
    rank: int,
    world: int,
    backend: str,
    port: int,
    sizes: Sequence[int],
    collectives: Sequence[str],
    num_warmup: int,
    num_repeats: int,
    results: Any,
) -> None:
    import torch  # noqa: PLC0415 (lazy: importing the adapter never needs torch)
    import torch.distributed as dist  # noqa: PLC0415

    torch.set_num_threads(1)
    dev = "cpu"
    if backend == "nccl":
        torch.cuda.set_device(rank)
        dev = f"cuda:{rank}"
    dist.init_process_group(
        backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        rows: list[tuple[str, int, float]] = []
        for name in collectives:
            coll = Collective(name)
            for size in sizes:
                call = _op(torch, dist, coll, size, rank, world, dev)
                for _ in range(num_warmup):
                    call()
                times = []
                for _ in range(num_repeats):
                    dist.barrier()
                    if backend == "nccl":
                        torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    call()
                    if backend == "nccl":
                        torch.cuda.synchronize()
                    times.append(time.perf_counter() - t0)
                local = torch.tensor([statistics.median(times)], dtype=torch.float64)
                dist.all_reduce(local, op=dist.ReduceOp.MAX)
                actual = 4 * max(world, int(size // 4) // world * world)
                rows.append((name, actual, float(local.item())))
        if rank == 0:
            results.put(rows)
    finally:
        dist.destroy_process_group()


def sample_collectives(
    *,
    num_ranks: int = 2,
    backend: str = "gloo",
    sizes_bytes: Sequence[int] = DEFAULT_SIZES_BYTES,
    collectives: Sequence[Collective] = _ALL,
    num_warmup: int = 3,
    num_repeats: int = 10,
    timeout_s: float = 300.0,
) -> list[CollectiveSample]:
    """Collective timings over ``num_ranks`` local processes (module docstring), one
    ``CollectiveSample`` per (collective, size). Raises ``CalibrationError`` when the workers
    fail or do not finish within ``timeout_s`` (they are then terminated)."""
    import torch.multiprocessing as mp  # noqa: PLC0415

    if num_ranks < 2:
        raise CalibrationError(f"collectives need >= 2 ranks, got {num_ranks}")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    args = (
        num_ranks,
        backend,
        port,
        list(sizes_bytes),
        [str(c) for c in collectives],
        num_warmup,
        num_repeats,
        results,
    )
    procs = [ctx.Process(target=_worker, args=(r, *args), daemon=True) for r in range(num_ranks)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout_s
    rows: list[tuple[str, int, float]] | None = None
    try:
        while rows is None:
            with contextlib.suppress(queue.Empty):
                rows = results.get(timeout=0.5)
            if rows is None and (
                time.monotonic() > deadline or any(p.exitcode not in (None, 0) for p in procs)
            ):
                codes = [p.exitcode for p in procs]
                raise CalibrationError(
                    f"{backend} collective sampling failed or timed out (worker exit codes "
                    f"{codes}); check that {num_ranks} processes can open loopback TCP ports"
                )
        for p in procs:
            p.join(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
    host = socket.gethostname()
    now = datetime.now(UTC).isoformat(timespec="seconds")
    return [
        CollectiveSample(
            collective=Collective(name),
            num_ranks=num_ranks,
            tier=Tier.SCALE_UP,
            size_bytes=float(size),
            time_s=max(t, math.ulp(1.0)),
            source=f"torch.distributed/{backend}",
            backend=backend,
            hostname=host,
            timestamp=now,
        )
        for name, size, t in rows
    ]
