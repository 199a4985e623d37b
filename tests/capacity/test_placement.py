"""Pending jobs placed on nodes by what they ask of each (``planner.capacity.placement``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adapters.slurm.sinfo import parse_sinfo_json
from adapters.slurm.squeue import parse_squeue_records
from planner.capacity import QueuedJob, QueueSnapshot, fleet_from_nodes, forecast_pending, placement
from planner.capacity.placement import PlacedJob, forecast_on_nodes
from planner.capacity.runtime import RuntimeBand, band_arrays, draw_runtimes
from planner.errors import SpecError
from planner.specs.job import JobResources, JobState, JobStatus, NodeShare, NodeState

PLACEMENT = Path(__file__).parents[1] / "data" / "slurm" / "placement"
NOW = 1_800_000_000.0
GIB = 1024**3


def node(
    name: str,
    *,
    cpus: int = 0,
    mem_gib: int = 0,
    gpus: int = 0,
    state: str = "mixed",
    partitions: tuple[str, ...] = ("gpu",),
) -> NodeState:
    """A 64-CPU, 512 GiB, 8 x H100 node of partition ``gpu`` holding what is given."""
    return NodeState(
        name=name,
        state=state,
        num_gpus=8,
        num_gpus_allocated=gpus,
        gpu_type="h100",
        num_cpus=64,
        memory_bytes=512.0 * GIB,
        partitions=partitions,
        num_cpus_allocated=cpus,
        memory_allocated_bytes=float(mem_gib * GIB),
    )


def fixed(seconds: float) -> RuntimeBand:
    return RuntimeBand(p10_s=seconds, p50_s=seconds, p90_s=seconds)


def running(
    job_id: str, left_s: float, shares: dict[str, tuple[int, int, int]], **kw: Any
) -> PlacedJob:
    """A running job with ``left_s`` to run and a ``limit_s`` (default: exactly that)."""
    limit = kw.get("limit_s", left_s)
    return PlacedJob(
        state=JobState(
            scheduler="slurm",
            cluster="c",
            job_id=job_id,
            status=JobStatus.RUNNING,
            start_time_s=NOW,
            time_limit_s=None if limit is None else float(limit),
        ),
        runtime=fixed(left_s),
        resources=JobResources(
            job_id=job_id,
            num_nodes=len(shares),
            exclusive=bool(kw.get("exclusive", False)),
            held=tuple(
                NodeShare(node=n, num_cpus=c, memory_bytes=float(m * GIB), num_gpus=g)
                for n, (c, m, g) in shares.items()
            ),
        ),
    )


def pending(
    job_id: str, run_s: float, *, limit_s: float | None = None, **request: Any
) -> PlacedJob:
    return PlacedJob(
        state=JobState(
            scheduler="slurm",
            cluster="c",
            job_id=job_id,
            status=JobStatus.PENDING,
            time_limit_s=limit_s,
        ),
        runtime=fixed(run_s),
        resources=JobResources(job_id=job_id, **request),
    )


def starts(nodes: list[NodeState], jobs: list[PlacedJob]) -> dict[str, float | None]:
    """Each pending job's p50 start, seconds from now (None: never)."""
    out = forecast_on_nodes(nodes, jobs, taken_at_s=NOW, rng=np.random.default_rng(0), samples=5)
    return {k: None if f.start_s[1] is None else f.start_s[1] - NOW for k, f in out.items()}


WHOLE_NODES: dict[str, Any] = {
    "num_nodes": 2,
    "gpus_per_node": 8,
    "gpu_type": "h100",
    "exclusive": True,
}


def test_a_cpu_job_on_one_node_holds_back_a_job_that_needs_whole_nodes() -> None:
    """One CPU taken on node1, every GPU free: the exclusive two-node job starts when the CPU
    job ends (the bug: GPUs pooled per partition said now). A job that only needs the GPUs
    starts now beside it."""
    nodes = [node("n1", cpus=1, mem_gib=1), node("n2")]
    cpu_job = running("1", 300.0, {"n1": (1, 1, 0)})
    assert starts(nodes, [cpu_job, pending("2", 60.0, **WHOLE_NODES)]) == {"2": 300.0}
    shared = {**WHOLE_NODES, "exclusive": False}
    assert starts(nodes, [cpu_job, pending("2", 60.0, **shared)]) == {"2": 0.0}
    # what pooling said (and Slurm did not do)
    pooled = forecast_pending(
        fleet_from_nodes(nodes),
        QueueSnapshot(
            taken_at_s=NOW,
            jobs=(
                QueuedJob(
                    state=JobState(
                        scheduler="slurm",
                        cluster="c",
                        job_id="2",
                        partition="gpu",
                        status=JobStatus.PENDING,
                        num_gpus=16,
                        gpu_type="h100",
                    ),
                    runtime=fixed(60.0),
                ),
            ),
        ),
        rng=np.random.default_rng(0),
        samples=5,
    )
    assert pooled["2"].start_s[1] == NOW


def test_cpus_memory_and_gpus_per_node_each_count() -> None:
    nodes = [node("n1", cpus=60, gpus=2, mem_gib=100), node("n2", cpus=10, gpus=6, mem_gib=500)]
    busy = running("1", 100.0, {"n1": (60, 100, 2)})
    busier = running("2", 200.0, {"n2": (10, 500, 6)})
    jobs = [busy, busier]
    # 8 CPUs: n1 has 4 free, n2 54 but only 2 GPUs; n1 frees at 100 s
    assert starts(nodes, [*jobs, pending("3", 10.0, cpus_per_node=8, gpus_per_node=2)]) == {
        "3": 0.0
    }
    assert starts(nodes, [*jobs, pending("3", 10.0, cpus_per_node=8, gpus_per_node=3)]) == {
        "3": 100.0
    }
    # 20 GiB: n2 has 12 GiB free, n1 412 GiB but 4 CPUs
    big = pending("3", 10.0, cpus_per_node=5, memory_per_node_bytes=20.0 * GIB)
    assert starts(nodes, [*jobs, big]) == {"3": 100.0}
    small = pending("3", 10.0, cpus_per_node=5, memory_per_node_bytes=10.0 * GIB)
    assert starts(nodes, [*jobs, small]) == {"3": 0.0}
    # more GPUs per node than any node has: never
    assert starts(nodes, [*jobs, pending("3", 10.0, gpus_per_node=9)]) == {"3": None}


def test_required_excluded_partitions_types_and_drained_nodes() -> None:
    nodes = [
        node("n1", cpus=64),
        node("n2"),
        node("n3", state="idle+drain"),
        node("n4", partitions=("other",)),
    ]
    hog = running("1", 500.0, {"n1": (64, 0, 0)})
    assert starts(nodes, [hog, pending("2", 10.0)]) == {"2": 0.0}  # n2
    assert starts(nodes, [hog, pending("2", 10.0, required_nodes=("n1",))]) == {"2": 500.0}
    assert starts(nodes, [hog, pending("2", 10.0, excluded_nodes=("n2", "n4"))]) == {"2": 500.0}
    assert starts(nodes, [hog, pending("2", 10.0, partitions=("gpu",), num_nodes=2)]) == {
        "2": 500.0
    }
    assert starts(nodes, [hog, pending("2", 10.0, partitions=("other",))]) == {"2": 0.0}
    typed = pending("2", 10.0, gpus_per_node=1, gpu_type="a100")
    assert starts(nodes, [hog, typed]) == {"2": None}
    assert starts(nodes, [hog, pending("2", 10.0, required_nodes=("n9",))]) == {"2": None}


def test_backfill_around_the_heads_reservation() -> None:
    """The head (two whole nodes) waits for the CPU job's limit (300 s) and then takes n1 and
    n2 (n3 is held to 1000 s): a job that ends before 300 s starts now on the head's nodes, a
    longer one only where the head's reservation leaves room, and a longer one that would take
    the head's nodes waits for the head."""
    nodes = [node("n1", cpus=1, mem_gib=1), node("n2"), node("n3", cpus=1, mem_gib=1)]
    hold = running("1", 300.0, {"n1": (1, 1, 0)})
    other = running("9", 1000.0, {"n3": (1, 1, 0)})
    head = pending("2", 100.0, limit_s=200.0, partitions=("gpu",), **WHOLE_NODES)
    short = pending("3", 50.0, limit_s=250.0, partitions=("gpu",), gpus_per_node=8)
    assert starts(nodes, [hold, other, head, short]) == {"2": 300.0, "3": 0.0}
    beside = pending("3", 50.0, limit_s=1000.0, partitions=("gpu",), gpus_per_node=8)
    assert starts(nodes, [hold, other, head, beside]) == {"2": 300.0, "3": 0.0}  # on n3
    whole = {**WHOLE_NODES, "num_nodes": 1}
    in_the_way = pending("3", 50.0, limit_s=1000.0, partitions=("gpu",), **whole)
    assert starts(nodes, [hold, other, head, in_the_way]) == {"2": 300.0, "3": 400.0}
    # lower priority never starts before the head when it does not fit beside it; without
    # a time limit on the CPU job its end cannot be reserved: the job starts now on n2
    unlimited = running("1", 300.0, {"n1": (1, 1, 0)}, limit_s=None)
    other_unlimited = running("9", 1000.0, {"n3": (1, 1, 0)}, limit_s=None)
    assert starts(nodes, [unlimited, other_unlimited, head, in_the_way]) == {
        "2": 300.0,
        "3": 0.0,
    }


def test_exclusive_running_jobs_keep_their_nodes_and_unknown_holders_stay() -> None:
    nodes = [node("n1", cpus=64, mem_gib=64, gpus=8), node("n2", cpus=3)]
    whole = running("1", 100.0, {"n1": (64, 64, 8)}, exclusive=True)
    assert starts(nodes, [whole, pending("2", 10.0, cpus_per_node=62)]) == {"2": 100.0}
    # n2's 3 CPUs are held by a job the forecast was not given: held past the horizon
    assert starts(nodes, [whole, pending("2", 10.0, num_nodes=2, cpus_per_node=62)]) == {"2": None}


def test_a_job_killed_at_its_limit_never_completes_and_bands_are_ordered() -> None:
    nodes = [node("n1", cpus=64)]
    jobs = [
        running("1", 100.0, {"n1": (64, 0, 0)}, limit_s=1000.0),
        pending("2", 500.0, limit_s=200.0),
    ]
    out = forecast_on_nodes(nodes, jobs, taken_at_s=NOW, rng=np.random.default_rng(1), samples=20)
    assert out["2"].start_s == (NOW + 100.0,) * 3
    assert out["2"].completion_s == (None, None, None)
    spread = [
        running("1", 100.0, {"n1": (64, 0, 0)}, limit_s=1000.0),
        pending("2", 50.0),
    ]
    spread[0] = PlacedJob(
        state=spread[0].state,
        runtime=RuntimeBand(p10_s=50.0, p50_s=100.0, p90_s=200.0),
        resources=spread[0].resources,
    )
    band = forecast_on_nodes(
        nodes, spread, taken_at_s=NOW, rng=np.random.default_rng(1), samples=200
    )["2"].start_s
    assert band[0] is not None
    assert band[1] is not None
    assert band[2] is not None
    assert NOW + 40.0 < band[0] < band[1] < band[2] < NOW + 260.0
    with pytest.raises(SpecError, match="samples"):
        forecast_on_nodes(nodes, jobs, taken_at_s=NOW, rng=np.random.default_rng(1), samples=0)


def test_the_recorded_cluster_as_slurm_saw_it() -> None:
    """Recorded from the dev Slurm: job 79 holds one CPU of node1 (limit 2 min), job 80 asks
    for both nodes exclusively and Slurm kept it pending (Resources) while every GPU was free.
    81 (limit 3 min) would hold node GPUs past 80's reservation: Slurm kept it pending too."""
    records = parse_squeue_records((PLACEMENT / "squeue_exclusive_pending.json").read_text())
    nodes = parse_sinfo_json((PLACEMENT / "sinfo_exclusive_pending.json").read_text())
    active = [r for r in records if r.resources is not None]
    holder = next(r.job for r in active if r.job.job_id == "79")
    assert holder.start_time_s is not None
    assert holder.time_limit_s == 120.0
    now = holder.start_time_s + 10.0
    jobs = [
        PlacedJob(
            state=r.job,
            runtime=fixed(110.0 if r.job.job_id == "79" else 30.0),
            resources=r.resources,  # type: ignore[arg-type]
        )
        for r in active
    ]
    out = forecast_on_nodes(nodes, jobs, taken_at_s=now, rng=np.random.default_rng(0), samples=5)
    assert {k: f.start_s[1] for k, f in out.items()} == {
        "80": now + 110.0,
        "81": now + 140.0,
        "82": now + 140.0,
    }
    assert [r.job.state_reason for r in active if r.job.job_id in ("80", "81")] == [
        "Resources",
        "Priority",
    ]


def test_a_placed_jobs_resources_are_its_own() -> None:
    with pytest.raises(SpecError, match=r"resources\.job_id"):
        PlacedJob(
            state=JobState(scheduler="slurm", cluster="c", job_id="1", status=JobStatus.PENDING),
            runtime=fixed(1.0),
            resources=JobResources(job_id="2"),
        )


def test_backfill_compares_on_slurms_one_minute_grid() -> None:
    """The head's reservation is 300 s away at NOW + 30 (NOW + 330 on the clock): a job with a
    280 s limit ends at NOW + 310, before it, but on Slurm's 60 s grid its end (NOW + 360)
    passes the reservation (NOW + 300), so Slurm keeps it waiting; exact times let it start."""
    nodes = [node("n1", cpus=1, mem_gib=1), node("n2")]
    hold = running("1", 300.0, {"n1": (1, 1, 0)}, limit_s=330.0)
    head = pending("2", 100.0, limit_s=200.0, **WHOLE_NODES)
    late = pending("3", 50.0, limit_s=280.0, gpus_per_node=8)
    jobs = [hold, head, late]

    def start_of_late(resolution_s: float) -> float | None:
        at = NOW + 30.0
        out = forecast_on_nodes(
            nodes,
            jobs,
            taken_at_s=at,
            rng=np.random.default_rng(0),
            samples=3,
            backfill_resolution_s=resolution_s,
        )
        p50 = out["3"].start_s[1]
        return None if p50 is None else p50 - at

    assert start_of_late(0.0) == 0.0
    assert start_of_late(60.0) == 400.0  # after the head (300 s + its 100 s run)


def test_runtime_draws_keep_all_three_quantiles_of_a_band() -> None:
    """A running job past its own p10 has an asymmetric remaining-time band: one log-normal sd
    from p90/p10 would put its p90 far later than the band's; the two-piece draw keeps it."""
    normals = np.random.default_rng(3).standard_normal((200_000, 2))
    symmetric = RuntimeBand(p10_s=20.0, p50_s=25.0, p90_s=31.25)
    skewed = RuntimeBand(p10_s=1.0, p50_s=5.0, p90_s=10.6)
    runs = draw_runtimes(*band_arrays([symmetric, skewed]), normals)
    for column, band in enumerate((symmetric, skewed)):
        got = np.quantile(runs[:, column], [0.1, 0.5, 0.9])
        assert got == pytest.approx([band.p10_s, band.p50_s, band.p90_s], rel=0.02)
    # a symmetric band is the ordinary log-normal of the same draws
    assert runs[:, 0] == pytest.approx(np.exp(symmetric.mu + symmetric.sigma * normals[:, 0]))


class _Walk(placement._Sample):
    """The head's reservation found by walking every time-limit end in turn and placing the
    head after each (the definition ``_Sample._shadow`` answers without the walk)."""

    def _shadow(
        self, req: placement._Request, t: float, reservations: list[placement._Reservation]
    ) -> placement._Reservation:
        free, excl = self.free.copy(), self.excl.copy()
        ends = sorted((end, j) for j, end in self.reserved_end.items())
        i = 0
        while i < len(ends) and math.isfinite(ends[i][0]):
            at = ends[i][0]
            while i < len(ends) and ends[i][0] == at:
                self._release(ends[i][1], free, excl)
                i += 1
            reservation = placement._reserve(
                req, at, t, free=free, excl=excl, cap=self.cap, reservations=reservations
            )
            if reservation is not None:
                return reservation
        return placement._Reservation(math.inf, free, excl)


def _random_queue(seed: int) -> tuple[list[NodeState], list[PlacedJob]]:
    """A small cluster in two partitions, full of running jobs (some exclusive, some with no
    limit, a CPU-only one) and a queue of mixed requests behind them."""
    rng = np.random.default_rng(seed)
    names = [f"n{i}" for i in range(10)]
    parts = {name: ("gpu",) if i < 6 else ("big", "gpu") for i, name in enumerate(names)}
    held: dict[str, list[int]] = {name: [0, 0, 0] for name in names}
    jobs: list[PlacedJob] = []
    for k in range(14):
        exclusive = k % 5 == 0
        spots = rng.choice(names, size=int(rng.integers(1, 3)), replace=False).tolist()
        shares: dict[str, tuple[int, int, int]] = {}
        for name in spots:
            used = held[name]
            if exclusive and any(used):
                continue
            want = (64, 512, 8) if exclusive else (4, 16, int(rng.integers(0, 3)) * 2)
            share = tuple(min(w, c - u) for w, u, c in zip(want, used, (64, 512, 8), strict=True))
            held[name] = [u + s for u, s in zip(used, share, strict=True)]
            shares[name] = (share[0], share[1], share[2])
        left = float(rng.integers(1, 40)) * 60.0
        limit = None if k == 3 else left * float(rng.uniform(1.0, 3.0))
        jobs.append(running(str(k), left, shares, limit_s=limit, exclusive=exclusive))
    for k in range(14, 40):
        request: dict[str, Any] = {
            "num_nodes": int(rng.integers(1, 4)),
            "cpus_per_node": int(rng.integers(1, 32)),
            "memory_per_node_bytes": float(rng.integers(1, 200)) * GIB,
            "gpus_per_node": int(rng.choice([0, 1, 2, 4, 8])),
            "gpu_type": "h100",
            "partitions": ("big",) if k % 3 == 0 else ("gpu",),
            "exclusive": k % 7 == 0,
        }
        if k % 11 == 0:
            request["required_nodes"] = ("n7",)
        run_s = float(rng.integers(1, 30)) * 60.0
        jobs.append(pending(str(k), run_s, limit_s=run_s * float(rng.uniform(1.0, 2.5)), **request))
    nodes = [
        node(name, cpus=c, mem_gib=m, gpus=g, partitions=parts[name])
        for name, (c, m, g) in held.items()
    ]
    return nodes, jobs


def _forecast(nodes: list[NodeState], jobs: list[PlacedJob]) -> dict[str, Any]:
    return forecast_on_nodes(nodes, jobs, taken_at_s=NOW, rng=np.random.default_rng(1), samples=4)


@pytest.mark.parametrize("seed", range(6))
def test_reservations_are_those_of_the_walk_over_every_end(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each head's reservation (``_Sample._shadow``) is the one a walk over every running
    job's time-limit end finds, placing the head after each: the forecasts are the same."""
    nodes, jobs = _random_queue(seed)
    fast = _forecast(nodes, jobs)
    monkeypatch.setattr(placement, "_Sample", _Walk)
    walked = _forecast(nodes, jobs)
    assert fast == walked
    assert any(f.start_s[1] is not None and f.start_s[1] > NOW for f in fast.values())


def test_a_heads_reservation_is_placed_once_not_after_every_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fifty nodes each held by one job with its own limit, one node idle, a head that needs
    every node and a short job behind it: the short job starts beside the head's reservation,
    worked out with one placement of the head, not one after each of the fifty ends."""
    names = [f"n{i:02d}" for i in range(51)]
    jobs = [
        running(str(i), 60.0 * (i + 1), {name: (64, 0, 8)}, limit_s=120.0 * (i + 1))
        for i, name in enumerate(names[:-1])
    ]
    nodes = [node(name, cpus=64, gpus=8) for name in names[:-1]] + [node(names[-1])]
    head = pending("head", 60.0, limit_s=600.0, num_nodes=51, gpus_per_node=8)
    short = pending("short", 60.0, limit_s=60.0, gpus_per_node=1)
    calls = 0
    place = placement._place

    def counted(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        return place(*args)

    monkeypatch.setattr(placement, "_place", counted)
    out = forecast_on_nodes(
        nodes, [*jobs, head, short], taken_at_s=NOW, rng=np.random.default_rng(0), samples=1
    )
    assert out["short"].start_s[1] == NOW
    assert out["head"].start_s[1] == NOW + 60.0 * 50
    assert calls <= 6, calls
