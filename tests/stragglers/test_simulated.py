"""What-if analysis against ground truth: jobs simulated by ``tests/stragglers/simulate.py``.

The simulator runs Megatron's 1F1B and interleaved 1F1B schedules with known durations, so the
straggler-free step time is known exactly: simulate the job again without the straggler.
Two ground truths are used:

* **healthy**: the slow part runs at its nominal speed (the straggler repaired);
* **balanced**: every worker gets the mean work of its op type, the paper's ideal run (the
  counterfactual of re-partitioning the pipeline or re-balancing sequence lengths, which keeps
  the total work).

The paper's ``S`` targets the balanced one; for an individual straggler ``slowdown_vs_healthy``
targets the healthy one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.traces import read_layout, read_op_trace
from planner.specs.trace import OP_TYPES, FloatArray
from planner.stragglers import Diagnosis, analyse, build_graph
from planner.stragglers.graph import JobGraph
from tests.stragglers.conftest import trace_path
from tests.stragglers.simulate import Simulation, simulate

LAYOUTS = [(2, 2, 1), (2, 4, 1), (1, 4, 2), (2, 2, 2), (2, 4, 2)]
MULTI_DP = [layout for layout in LAYOUTS if layout[0] > 1]
FORWARD_S, BACKWARD_S = 1.0, 2.0


def _job(dp: int, pp: int, vpp: int, factor: FloatArray, **kwargs: object) -> Simulation:
    """A job whose compute is ``factor`` (broadcast to (steps, dp, pp, vpp, mb)) x nominal."""
    args: dict[str, object] = {
        "dp": dp,
        "pp": pp,
        "vpp": vpp,
        "num_microbatches": 2 * pp,
        "p2p_s": 0.02,
        "dp_collective_s": 0.1,
        "optimizer_s": 0.2,
        "num_steps": 3,
    }
    args.update(kwargs)
    return simulate(forward_s=FORWARD_S * factor, backward_s=BACKWARD_S * factor, **args)  # type: ignore[arg-type]


def _truths(dp: int, pp: int, vpp: int, factor: FloatArray) -> tuple[float, float, float]:
    """(actual no-delay step time, healthy step time, balanced step time), simulated means."""
    actual = _job(dp, pp, vpp, factor).step_time_s.mean()
    healthy = _job(dp, pp, vpp, np.ones(1)).step_time_s.mean()
    balanced = _job(dp, pp, vpp, np.broadcast_to(factor, (1, dp, pp, 1, 1)).mean()).step_time_s
    return float(actual), float(healthy), float(balanced.mean())


@pytest.mark.parametrize(("dp", "pp", "vpp"), LAYOUTS)
def test_uniform_durations_give_no_slowdown(dp: int, pp: int, vpp: int) -> None:
    sim = _job(dp, pp, vpp, np.ones(1), launch_gap_s=0.003)
    report = analyse(sim.op_trace())
    assert report.slowdown == pytest.approx(1.0, rel=0.01)
    assert report.stragglers == ()
    assert report.diagnosis is Diagnosis.NONE
    assert report.actual_step_time_s == pytest.approx(sim.step_time_s.mean(), rel=1e-9)
    assert report.launch_slowdown > 1.0  # the 3 ms launch gaps are removed from S
    assert report.reproduction_error_ratio < 1e-9


@pytest.mark.parametrize(("dp", "pp", "vpp"), MULTI_DP)
def test_one_slow_worker_is_flagged_alone_with_the_true_slowdown(
    dp: int, pp: int, vpp: int
) -> None:
    factor = np.ones((1, dp, pp, 1, 1))
    factor[0, dp - 1, 1] = 1.5
    sim = _job(dp, pp, vpp, factor, launch_gap_s=0.002)
    report = analyse(sim.op_trace())
    actual, healthy, balanced = _truths(dp, pp, vpp, factor)
    assert report.diagnosis is Diagnosis.INDIVIDUAL_WORKER
    assert [(w.stage, w.dp_rank) for w in report.stragglers] == [(1, dp - 1)]
    assert report.slowdown_vs_healthy == pytest.approx(actual / healthy, rel=0.03)
    assert report.slowdown == pytest.approx(actual / balanced, rel=0.03)
    # The paper's S counts the straggler into its own ideal, so it is lower than the truth.
    assert report.slowdown < report.slowdown_vs_healthy


@pytest.mark.parametrize(("dp", "pp", "vpp"), LAYOUTS)
def test_slow_last_stage_is_pipeline_imbalance(dp: int, pp: int, vpp: int) -> None:
    factor = np.ones((1, dp, pp, 1, 1))
    factor[0, :, pp - 1] = 1.4
    report = analyse(_job(dp, pp, vpp, factor).op_trace())
    actual, _, balanced = _truths(dp, pp, vpp, factor)
    assert report.diagnosis is Diagnosis.STAGE_IMBALANCE
    assert report.slow_stages == (pp - 1,)
    assert report.stragglers == ()
    assert max(report.by_stage, key=lambda s: report.by_stage[s]) == pp - 1
    assert report.slowdown == pytest.approx(actual / balanced, rel=0.03)
    assert report.slowdown_vs_healthy == report.slowdown


@pytest.mark.parametrize(("dp", "pp", "vpp"), LAYOUTS)
def test_sequence_length_variation_is_workload_imbalance(dp: int, pp: int, vpp: int) -> None:
    steps = 4
    rng = np.random.default_rng(dp * 100 + pp * 10 + vpp)
    # One length factor per (step, dp rank, micro-batch): every stage and chunk sees it.
    length = rng.lognormal(0.0, 0.35, (steps, dp, 1, 1, 2 * pp))
    report = analyse(_job(dp, pp, vpp, length, num_steps=steps).op_trace())
    actual = _job(dp, pp, vpp, length, num_steps=steps).step_time_s.mean()
    balanced = _job(dp, pp, vpp, np.array(length.mean()), num_steps=steps).step_time_s.mean()
    assert report.diagnosis is Diagnosis.WORKLOAD_IMBALANCE
    assert report.stragglers == ()
    assert report.evidence["microbatch_compute_cov"] > 0.1
    assert report.slowdown == pytest.approx(actual / balanced, rel=0.03)


@pytest.mark.parametrize(
    ("pp", "vpp", "num_microbatches"), [(4, 1, 8), (4, 2, 4), (4, 2, 8), (2, 4, 4)]
)
def test_simulated_schedules_have_the_textbook_bubble(
    pp: int, vpp: int, num_microbatches: int
) -> None:
    """Without communication: 1F1B takes (m + p - 1)(f + b), interleaved (m v + p - 1)(f + b)
    with f, b per chunk (Narayanan et al., SC '21, §2.2)."""
    sim = simulate(
        dp=1,
        pp=pp,
        vpp=vpp,
        num_microbatches=num_microbatches,
        p2p_s=0.0,
        dp_collective_s=0.0,
        optimizer_s=0.0,
        num_steps=1,
    )
    expected = (num_microbatches * vpp + pp - 1) * (FORWARD_S + BACKWARD_S)
    assert sim.step_time_s[0] == pytest.approx(expected)


def _op_order(columns: dict[str, Any], step: int, dp_rank: int, stage: int) -> list[object]:
    """(optype, seq_id) of one worker's ops in one step, by start time (ties by name)."""
    rows = zip(
        columns["step"],
        columns["dp_rank"],
        columns["stage"],
        columns["start_ts"],
        columns["optype"],
        columns["seq_id"],
        strict=True,
    )
    mine = [
        (float(t), str(op), int(seq))
        for s, d, g, t, op, seq in rows
        if s == step and d == dp_rank and g == stage
    ]
    return [(op, seq) for _, op, seq in sorted(mine)]


def test_simulated_1f1b_has_the_op_order_of_the_real_st_trace() -> None:
    """ST is a real Megatron run (dp 2, pp 4, 4 micro-batches, 1F1B): the simulator issues the
    same ops in the same order (leaving out the ops it does not model: gc, clip, embedding and
    layer-norm all-reduces)."""
    real = pq.read_table(trace_path("ST")).to_pydict()
    sim = simulate(dp=2, pp=4, num_microbatches=4, num_steps=1).columns
    modelled = {str(v) for v in sim["optype"]}
    for dp_rank in range(2):
        for stage in range(4):
            expected = [
                (op, seq)
                for op, seq in _op_order(real, real["step"][0], dp_rank, stage)
                if op in modelled
            ]
            assert _op_order(sim, 0, dp_rank, stage) == expected, (dp_rank, stage)


def test_trace_files_round_trip_through_the_reader(tmp_path: Path) -> None:
    factor = np.ones((1, 2, 4, 1, 1))
    factor[0, 0, 2] = 1.5
    sim = _job(2, 4, 2, factor)
    trace_file, meta_file = sim.write(tmp_path)
    real_columns = pq.read_table(trace_path("ST")).column_names
    assert sorted(pq.read_table(trace_file).column_names) == sorted(real_columns)
    layout = read_layout(meta_file)
    assert layout.virtual_stages == 2
    from_file = analyse(read_op_trace(trace_file, layout))
    assert from_file.slowdown == pytest.approx(analyse(sim.op_trace()).slowdown, rel=1e-6)
    assert [(w.stage, w.dp_rank) for w in from_file.stragglers] == [(2, 0)]


def _true_replay(sim: Simulation, graph: JobGraph) -> FloatArray:
    """Replay ``graph`` with the simulator's own durations: compute as simulated, transfers as
    configured (not measured from timestamps), launch gaps as configured."""
    trace = sim.op_trace()
    pp = sim.layout.pipeline_parallel
    true = np.where(np.isnan(sim.transfer_s), trace.duration_s, sim.transfer_s)
    index = {
        key: i
        for i, key in enumerate(
            zip(
                trace.step.tolist(),
                trace.worker.tolist(),
                trace.optype.tolist(),
                trace.seq_id.tolist(),
                strict=True,
            )
        )
    }
    # The k-th op of a (worker, type) in the template is the one with seq_id k.
    seen: dict[tuple[int, int], int] = {}
    occurrence = []
    for w, t in zip(graph.op_worker.tolist(), graph.op_type.tolist(), strict=True):
        occurrence.append(seen.get((w, t), 0))
        seen[w, t] = occurrence[-1] + 1
    durations = np.array(
        [
            [true[index[step, w, t, k]] for step in graph.steps.tolist()]
            for w, t, k in zip(
                graph.op_worker.tolist(), graph.op_type.tolist(), occurrence, strict=True
            )
        ]
    )
    node_dp, node_stage = graph.node_worker // pp, graph.node_worker % pp
    gaps = sim.launch_gap_s[graph.steps][:, node_dp, node_stage].T.copy()
    first = graph.node_pred == graph.num_nodes
    gaps[first] -= gaps[first].min(axis=0)  # step time runs from the earliest first launch
    return graph.replay(graph.node_durations(durations), gaps)


@settings(max_examples=25, deadline=None)
@given(
    dp=st.integers(1, 3),
    pp=st.integers(2, 4),
    vpp=st.integers(1, 3),
    rounds=st.integers(1, 2),
    p2p_s=st.floats(0.0, 0.2),
    seed=st.integers(0, 2**16),
)
def test_graph_replay_of_true_durations_reproduces_simulated_steps(
    dp: int, pp: int, vpp: int, rounds: int, p2p_s: float, seed: int
) -> None:
    """The graph's dependency model (built from timestamps) against the simulator's (built from
    Megatron's schedule): same step times for random durations, gaps and layouts."""
    rng = np.random.default_rng(seed)
    steps, m = 2, rounds * pp
    shape = (steps, dp, pp, vpp, m)
    sim = simulate(
        dp=dp,
        pp=pp,
        vpp=vpp,
        num_microbatches=m,
        forward_s=rng.uniform(0.2, 1.5, shape),
        backward_s=rng.uniform(0.4, 3.0, shape),
        p2p_s=p2p_s,
        dp_collective_s=float(rng.uniform(0.0, 0.3)),
        optimizer_s=rng.uniform(0.05, 0.2, shape[:3]),
        launch_gap_s=rng.uniform(0.0, 0.05, shape[:3]),
        num_steps=steps,
    )
    graph = build_graph(sim.op_trace())
    assert graph.num_steps == steps
    replayed = _true_replay(sim, graph)
    np.testing.assert_allclose(replayed, sim.step_time_s[graph.steps], rtol=1e-9)
    assert {OP_TYPES[t].value for t in graph.op_type} >= {"forward-compute", "optimizer"}
