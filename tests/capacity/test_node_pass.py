"""The Slurm pass of a pool placed on whole nodes (``planner.capacity.simulate._Run._node_pass``):
the jobs after a waiting head are judged all at once between two starts, with the starts of
judging them one at a time, and without a Python step per waiting job."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from planner.capacity import simulate
from planner.capacity.build import build_workload
from planner.capacity.fleet import Fleet, Placement, Pool
from planner.capacity.montecarlo import draw_durations, draw_normals, simulate_workloads
from planner.capacity.nodes import NodeState
from planner.capacity.runtime import InterruptionModel, RuntimeBand
from planner.capacity.snapshot import QueueSnapshot
from planner.capacity.workload import Workload
from planner.specs.job import JobStatus
from tests.capacity.helpers import queued

HOUR = 3600.0


def _one_at_a_time(self: simulate._Run, p: int, t: float) -> None:
    """The pass judging each job after the head in turn (the reference the pass must match)."""
    free = self.cap[p] - self.used[p]
    if not self.num_pend[p] or free <= 0:
        return
    pend, state, sim = self.pend[p], self.nodes[p], self.sim
    idx = pend.nonzero()[0]
    queued_at = idx.tolist()
    gpus, limits = sim.pool_gpus[p].tolist(), sim.pool_limit[p].tolist()
    if min(gpus[pos] for pos in queued_at) > free:
        return
    nodes_list, per_node_list = sim.pool_nodes_list[p], sim.pool_per_node_list[p]
    i = 0
    while i < len(queued_at) and state.fits(nodes_list[queued_at[i]], per_node_list[queued_at[i]]):
        self._start_at(p, queued_at[i], t)
        i += 1
    if i >= len(queued_at) - 1:
        return
    head = queued_at[i]
    shadow, left = state.shadow(
        nodes_list[head],
        per_node_list[head],
        ((end, *self.held[k]) for end, k in self.node_reserved[p]),
        sim.gpus_list[sim.pool_opts_list[p][head]],
    )
    for pos in queued_at[i + 1 :]:
        if not pend[pos]:
            continue  # started above in another pool's pass
        nodes, per_node = nodes_list[pos], per_node_list[pos]
        if not state.fits(nodes, per_node):
            continue
        on_time = t + limits[pos] <= shadow
        room = None if on_time else np.minimum(state.free, left)
        if room is not None and int(np.count_nonzero(room >= per_node)) < nodes:
            continue
        k = self._start_at(p, pos, t, room)
        if room is not None:
            where, amounts, _, _ = self.held[k]
            left[where] -= amounts


def _random_queue(seed: int) -> tuple[Workload, int]:
    """A pool of 2 to 6 nodes of 8 GPUs, running and pending jobs of mixed sizes, limits from
    just above the runtime to four times it; and the samples."""
    rng = np.random.default_rng(seed)
    nodes = int(rng.integers(2, 7))
    jobs = []
    for j in range(int(rng.integers(10, 40))):
        run = float(rng.uniform(0.2, 6.0)) * HOUR
        spread = float(rng.uniform(1.0, 1.5))
        band = RuntimeBand(p10_s=run / spread, p50_s=run, p90_s=run * spread)
        gpus = int(rng.choice([1, 2, 4, 8, 8, 16, 24, 8 * nodes]))
        jobs.append(
            queued(
                str(j),
                "gpu",
                band,
                num_gpus=min(gpus, 8 * nodes),
                time_limit_s=run * spread * float(rng.uniform(1.0, 4.0)),
                status=JobStatus.RUNNING if rng.random() < 0.3 else JobStatus.PENDING,
            )
        )
    fleet = Fleet(
        pools=(Pool(name="h100", gpu="h100-sxm", num_gpus=8 * nodes, partitions=("gpu",)),),
        interruptions=InterruptionModel(rate_per_gpu_hour=0.0),
        placement=Placement.NODES,
    )
    snapshot = QueueSnapshot(taken_at_s=0.0, jobs=tuple(jobs))
    return build_workload(fleet, (), snapshot, start_s=0.0), 8


def _outcome(w: Workload, samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = simulate_workloads([w], [draw_durations(w, draw_normals(w.job_names, samples, rng), rng)])
    return out[0].start_s, out[0].completion_s


@pytest.mark.parametrize("seed", range(40))
def test_the_pass_starts_what_judging_one_job_at_a_time_starts(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    w, samples = _random_queue(seed)
    start, done = _outcome(w, samples, seed)
    monkeypatch.setattr(simulate._Run, "_node_pass", _one_at_a_time)
    start_ref, done_ref = _outcome(w, samples, seed)
    np.testing.assert_array_equal(start, start_ref)
    np.testing.assert_array_equal(done, done_ref)


def _counted(fn: Callable[..., bool], calls: list[int]) -> Callable[..., bool]:
    def count(*args: object) -> bool:
        calls.append(1)
        return fn(*args)

    return count


@pytest.fixture
def fits_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(NodeState, "fits", _counted(NodeState.fits, calls))
    return calls


def test_jobs_that_wait_behind_the_head_are_not_looked_at_one_by_one(
    fits_calls: list[int],
) -> None:
    """Four nodes of 8. A running job holds one node to 10 h; the head needs all four, so it
    waits for it. Behind it, 300 one-GPU jobs whose limits (20 h) run past the head's
    reservation fit now but would delay it, so they wait; 300 one-hour jobs behind those are
    backfilled on the three other nodes, a pass at each of their ends. Every pass asks
    whether a job fits once per start, not once per waiting job (5,664 times when each job
    was judged in turn)."""
    hour = RuntimeBand(p10_s=HOUR, p50_s=HOUR, p90_s=HOUR)
    jobs = [
        queued("long", "gpu", RuntimeBand(p10_s=10 * HOUR, p50_s=10 * HOUR, p90_s=10 * HOUR),
               num_gpus=8, time_limit_s=10 * HOUR, status=JobStatus.RUNNING),
        queued("head", "gpu", hour, num_gpus=32, time_limit_s=2 * HOUR,
               status=JobStatus.PENDING),
    ]  # fmt: skip
    jobs += [
        queued(f"late{i}", "gpu", hour, num_gpus=1, time_limit_s=20 * HOUR,
               status=JobStatus.PENDING)
        for i in range(300)
    ]  # fmt: skip
    jobs += [
        queued(f"short{i}", "gpu", hour, num_gpus=1, time_limit_s=HOUR, status=JobStatus.PENDING)
        for i in range(300)
    ]
    fleet = Fleet(
        pools=(Pool(name="h100", gpu="h100-sxm", num_gpus=32, partitions=("gpu",)),),
        interruptions=InterruptionModel(rate_per_gpu_hour=0.0),
        placement=Placement.NODES,
    )
    w = build_workload(fleet, (), QueueSnapshot(taken_at_s=0.0, jobs=tuple(jobs)), start_s=0.0)
    start, _ = _outcome(w, 1, 0)
    assert start[0, w.job_index("short0")] == 0.0
    assert start[0, w.job_index("short216")] == pytest.approx(9 * HOUR)  # 24 an hour
    assert start[0, w.job_index("head")] == pytest.approx(10 * HOUR)
    assert start[0, w.job_index("late0")] >= 11 * HOUR
    assert len(fits_calls) < len(jobs), len(fits_calls)  # 384
