"""Host-wide slowdowns are one slow node, not stragglers of each rank; measured on synthetic
timings with co-located noise and on real rank_step lines recorded under CPU contention."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from planner.specs.job import RankStepRecord
from planner.stragglers.live import LiveStragglers

DATA = Path(__file__).resolve().parents[1] / "data" / "stragglers"


def _interval(iteration: int, compute: np.ndarray, ranks_per_node: int) -> list[RankStepRecord]:
    step = float(compute.max()) + 0.01
    return [
        RankStepRecord(
            iteration=iteration,
            rank=r,
            world_size=compute.size,
            compute_time_s=float(c),
            step_time_s=step,
            num_iterations=5,
            node=f"host{r // ranks_per_node}",
        )
        for r, c in enumerate(compute)
    ]


def _run(
    nodes: int, per_node: int, *, slow: dict[int, float], from_step: int, seed: int = 0
) -> LiveStragglers:
    """``nodes`` x ``per_node`` ranks, 0.05 s compute with per-rank and per-host noise; from
    ``from_step`` on, the ranks in ``slow`` (rank -> factor) are slower."""
    rng = np.random.default_rng(seed)
    world = nodes * per_node
    tracker = LiveStragglers.new(world)
    for i in range(80):
        host = np.repeat(rng.normal(0.0, 0.02, nodes), per_node)
        compute = 0.05 * np.exp(host + rng.normal(0.0, 0.02, world))
        if i >= from_step:
            for rank, factor in slow.items():
                compute[rank] *= factor
        tracker.add(_interval(5 * (i + 1), compute, per_node))
    return tracker


@pytest.mark.parametrize("nodes", [2, 4])
def test_all_ranks_of_a_node_slower_is_one_slow_node(nodes: int) -> None:
    tracker = _run(nodes, 4, slow={4: 1.3, 5: 1.3, 6: 1.3, 7: 1.3}, from_step=30)
    report = tracker.report(remaining_s=3600.0)
    assert report is not None
    assert report.stragglers == ()
    assert [n["node"] for n in report.slow_nodes] == ["host1"]
    slow = report.slow_nodes[0]
    assert slow["ranks"] == [4, 5, 6, 7]
    assert slow["slowdown"] == pytest.approx(1.3, rel=0.05)
    assert 150 <= slow["since_iteration"] <= 5 * 40
    assert report.action == "drain-node"
    assert "slow node host1" in report.diagnosis
    assert report.slowdown == pytest.approx((1.3 * 0.05 + 0.01) / 0.06, rel=0.05)
    restored = LiveStragglers.from_json(json.loads(json.dumps(tracker.to_json())))
    assert restored.report(remaining_s=3600.0) == report


def test_one_slow_rank_on_a_node_stays_a_straggler() -> None:
    report = _run(2, 4, slow={6: 1.4}, from_step=30).report()
    assert report is not None
    assert report.slow_nodes == ()
    assert [s["rank"] for s in report.stragglers] == [6]


def test_a_whole_single_node_job_slower_flags_nothing() -> None:
    report = _run(1, 4, slow=dict.fromkeys(range(4), 1.3), from_step=30).report()
    assert report is not None
    assert report.stragglers == ()
    assert report.slow_nodes == ()


def test_co_located_noise_raises_no_alarm() -> None:
    """Per-host noise (2 % CoV shared by a host's ranks) and per-rank noise: no flag in
    8 x 80 rank-intervals x 10 seeds."""
    for seed in range(10):
        report = _run(2, 4, slow={}, from_step=0, seed=seed).report()
        assert report is not None
        assert report.stragglers == (), seed
        assert report.slow_nodes == (), seed


def _recorded(name: str) -> tuple[dict[str, object], list[RankStepRecord]]:
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    provenance = json.loads(lines[0])["provenance"]
    records = []
    for line in lines[1:]:
        doc = json.loads(line)
        records.append(
            RankStepRecord(
                iteration=doc["iteration"],
                rank=doc["rank"],
                world_size=doc["world_size"],
                compute_time_s=doc["compute_time_s"],
                step_time_s=doc["step_time_s"],
                num_iterations=doc["num_iterations"],
                node=doc["node"],
            )
        )
    return provenance, records


def test_recorded_cpu_hogs_beside_the_job_raise_no_straggler() -> None:
    """Real tiny GPT ranks with two CPU hogs competing for the same 2 cores (no slowed rank):
    every flag must be a rank whose own compute was slower; here none is."""
    provenance, records = _recorded("rank-steps-cpu-hogs.jsonl")
    assert provenance["made_by"] == "benchmarks/stragglers_record.py"
    tracker = LiveStragglers.new(4)
    for rec in records:
        tracker.add([rec])
        report = tracker.report()
        assert report is None or report.stragglers == (), (rec.iteration, report.stragglers)
    assert tracker.report() is not None


def test_recorded_host_wide_contention_is_a_slow_node() -> None:
    """Real ranks, host0's two ranks in a CPU cgroup capped at 0.2 CPU (a throttled host):
    host0 is a slow node and neither of its ranks is a straggler."""
    _, records = _recorded("rank-steps-throttled-host.jsonl")
    tracker = LiveStragglers.new(4)
    tracker.add(records)
    report = tracker.report()
    assert report is not None
    assert report.stragglers == ()
    assert [n["node"] for n in report.slow_nodes] == ["host0"]
    assert report.action == "drain-node"


def test_median_of_the_other_ranks_matches_the_definition() -> None:
    from planner.stragglers.nodes import median_of_others

    rng = np.random.default_rng(3)
    for n in (2, 3, 4, 7, 64):
        values = rng.normal(size=(9, n))
        values[0] = 1.0  # ties
        values[1, : n // 2] = 0.5
        expected = np.array([[np.median(np.delete(row, r)) for r in range(n)] for row in values])
        np.testing.assert_allclose(median_of_others(values), expected)


@pytest.mark.parametrize(
    ("name", "ranks", "named"),
    [
        ("rank-steps-cpu-hogs-long.jsonl", 4, False),
        # the end-to-end ETA test's 2-rank job under CI and two hogs: the hogs sat on rank 1's
        # core for stretches of 20-60 intervals (its compute 1.3-1.7x rank 0's)
        ("rank-steps-pair-cpu-hogs-e2e.jsonl", 2, True),
    ],
)
def test_every_flag_on_a_long_hog_recording_is_a_measured_slowdown(
    name: str, ranks: int, named: bool
) -> None:
    """Real ranks beside two CPU hogs (900 iterations of 4 ranks; 1,500 of a pair): whatever
    the tracker names (a rank or a node) was measured slower than the others over its window
    (the median interval at least 5 % slower; a rank over the intervals since its change
    point), never a wall-clock artefact."""
    _, records = _recorded(name)
    tracker = LiveStragglers.new(ranks)
    flagged = False
    by_iteration: dict[int, list[RankStepRecord]] = {}
    for rec in records:
        by_iteration.setdefault(rec.iteration, []).append(rec)
    for iteration in sorted(by_iteration):
        tracker.add(by_iteration[iteration])
        report = tracker.report()
        if report is None:
            continue
        logs = np.log(np.array([h.compute_s for h in tracker.window]))
        for straggler in report.stragglers:
            # A rank is judged over the intervals since its change point (at least the window).
            r, since = straggler["rank"], straggler["since_iteration"]
            start = min(since, tracker.window[0].iteration)
            kept = np.log([h.compute_s for h in tracker.history if h.iteration >= start])
            others = np.median(np.delete(kept, r, axis=1), axis=1)
            assert np.median(kept[:, r] - others) >= np.log(1.05), (iteration, straggler)
            flagged = True
        for node in report.slow_nodes:
            mine = node["ranks"]
            rest = [r for r in range(ranks) if r not in mine]
            shift = np.median(np.median(logs[:, mine], axis=1) - np.median(logs[:, rest], axis=1))
            assert shift >= np.log(1.05), (iteration, node)
    assert flagged == named


def test_a_pair_s_slow_rank_stays_flagged_under_ci_load() -> None:
    """The end-to-end straggler test's job under CI with two CPU hogs (rank 1 of 2 slowed
    1.6x from iteration 300): its last 20 intervals alone are too noisy to show the shift, the
    intervals since the detector's change point show it. From iteration 540 on rank 1 is
    flagged and the what-if slowdown is within 10 % of the one the job's timings show (the
    step against the same step with rank 1 computing like rank 0); before the evidence window
    (the tracker judging the last 20 intervals only) rank 1 was dropped and the slowdown was
    1.14 against 1.27-1.31."""
    provenance, records = _recorded("rank-steps-slow-rank-pair-ci-hogs.jsonl")
    assert "test_a_slowed_rank_is_flagged" in str(provenance["made_by"])
    tracker = LiveStragglers.new(2)
    computes: dict[int, dict[int, tuple[float, float]]] = {}
    for rec in records:
        tracker.add([rec])
        assert rec.step_time_s is not None
        computes.setdefault(rec.iteration, {})[rec.rank] = (rec.compute_time_s, rec.step_time_s)
        if rec.rank == 0 or rec.iteration < 540:
            continue
        report = tracker.report()
        assert report is not None
        assert [s["rank"] for s in report.stragglers] == [1], (rec.iteration, report.diagnosis)
        first = tracker.window[0].iteration
        seen = [r for i, r in computes.items() if i >= first]
        actual = sum(max(s for _, s in r.values()) for r in seen)
        ideal = sum(max(s for _, s in r.values()) - max(0.0, r[1][0] - r[0][0]) for r in seen)
        assert report.slowdown == pytest.approx(actual / ideal, rel=0.10), rec.iteration
