"""Linear-cost replay and attribution: the two-replica what-ifs equal full replays, the level
schedule reproduces the simulator, large jobs keep S within 1e-3 of the ground truth, and the
memory budget refuses a trace with a clear error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from adapters.traces import read_layout, read_op_trace
from planner.cli import app
from planner.errors import SpecError
from planner.stragglers import analyse, build_graph
from planner.stragglers.budget import check_rows, estimated_bytes, max_rows
from planner.stragglers.levels import build_schedule
from planner.stragglers.replicas import _full_whatifs, _worker_bounds, group_whatifs, replica_pair
from planner.stragglers.whatif import ideal_durations
from tests.stragglers.conftest import load
from tests.stragglers.simulate import simulate


@settings(max_examples=20, deadline=None)
@given(
    dp=st.integers(2, 4),
    pp=st.integers(2, 4),
    vpp=st.integers(1, 2),
    seed=st.integers(0, 2**16),
)
def test_two_replica_whatifs_equal_full_replays(dp: int, pp: int, vpp: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = (2, dp, pp, vpp, 2 * pp)
    sim = simulate(
        dp=dp,
        pp=pp,
        vpp=vpp,
        num_microbatches=2 * pp,
        forward_s=rng.uniform(0.2, 1.5, shape),
        backward_s=rng.uniform(0.4, 3.0, shape),
        p2p_s=0.02,
        dp_collective_s=float(rng.uniform(0.0, 0.3)),
        optimizer_s=rng.uniform(0.05, 0.2, shape[:3]),
        launch_gap_s=rng.uniform(0.0, 0.01, shape[:3]),
        num_steps=2,
    )
    graph = build_graph(sim.op_trace())
    assert replica_pair(graph, dp) is not None
    real, ideal = graph.op_duration_s, ideal_durations(graph)
    workers = dp * pp
    fast_w, fast_d = group_whatifs(graph, real, ideal, workers=workers, dp=dp)
    first, count = _worker_bounds(graph, workers)
    slow_w, slow_d = _full_whatifs(graph, real, ideal, first=first, count=count, dp=dp)
    np.testing.assert_allclose(fast_w, slow_w, rtol=1e-12)
    np.testing.assert_allclose(fast_d, slow_d, rtol=1e-12)


def test_real_traces_have_interchangeable_replicas() -> None:
    for name in ("AR", "SE", "ST"):
        trace = load(name)
        assert replica_pair(build_graph(trace), trace.layout.data_parallel) is not None, name


def test_replicas_that_differ_fall_back_to_full_replays() -> None:
    graph = build_graph(simulate(dp=1, pp=4, num_microbatches=4, num_steps=2).op_trace())
    assert replica_pair(graph, 1) is None
    report = analyse(graph)
    assert len(report.by_worker) == 4
    assert report.slowdown == pytest.approx(1.0, abs=1e-9)


def test_a_dependency_cycle_is_a_clear_error() -> None:
    # Worker A: node 0 (key 0), node 1 (key 1); worker B: node 2 (key 1), node 3 (key 0).
    # A waits at key 0 for B's node 3, which comes after B's node 2 waiting for A's node 1.
    pred = np.array([4, 0, 4, 2])
    with pytest.raises(SpecError, match="deadlocks"):
        build_schedule(pred, np.array([0, 1, 2, 3]), np.array([0, 1, 1, 0]), 4)


def test_level_schedule_depth_does_not_grow_with_workers() -> None:
    depths = []
    for dp in (2, 16):
        graph = build_graph(simulate(dp=dp, pp=4, num_microbatches=8, num_steps=1).op_trace())
        depths.append(graph.schedule.num_rounds)
    assert depths[0] == depths[1]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("dp", [32])
def test_large_job_slowdown_matches_the_simulated_ground_truth(dp: int) -> None:
    """256 workers, 1F1B, 16 micro-batches, one worker 1.5x slow: S = actual / balanced step
    of the simulator within 1e-3 (the benchmark runs the same check up to 8,192 workers)."""
    pp = 8
    factor = np.ones((1, dp, pp, 1, 1))
    factor[0, dp - 1, 1] = 1.5
    common = {
        "dp": dp,
        "pp": pp,
        "num_microbatches": 16,
        "num_steps": 2,
        "p2p_s": 0.02,
        "dp_collective_s": 0.1,
        "optimizer_s": 0.2,
    }
    actual = simulate(forward_s=factor, backward_s=2 * factor, **common)  # type: ignore[arg-type]
    mean = float(factor.mean())
    balanced = simulate(forward_s=mean, backward_s=2 * mean, **common)  # type: ignore[arg-type]
    truth = actual.step_time_s.mean() / balanced.step_time_s.mean()
    report = analyse(actual.op_trace())
    assert abs(report.slowdown - truth) <= 1e-3
    assert [(w.stage, w.dp_rank) for w in report.stragglers] == [(1, dp - 1)]


def test_memory_budget_refuses_a_large_trace_with_the_fix() -> None:
    assert estimated_bytes(1_490_944) < 2 * 1024**3
    check_rows(max_rows())
    with pytest.raises(SpecError, match="fewer steps") as err:
        check_rows(max_rows() + 1)
    assert err.value.field == "trace"
    with pytest.raises(SpecError, match="memory budget"):
        analyse(load("ST"), memory_budget_bytes=257 * 1024**2)


def test_cli_refuses_a_trace_over_the_budget_without_a_traceback(tmp_path: Path) -> None:
    sim = simulate(dp=2, pp=2, num_microbatches=4, num_steps=2)
    trace, meta = sim.write(tmp_path)
    rows = pq.ParquetFile(trace).metadata.num_rows
    gib = estimated_bytes(rows // 2) / 1024**3
    runner = CliRunner()
    small = runner.invoke(
        app, ["stragglers", str(trace), "--meta", str(meta), "--memory-budget-gib", str(gib)]
    )
    assert small.exit_code == 2
    assert "rows, over the" in small.output
    assert "Traceback" not in small.output
    ok = runner.invoke(app, ["stragglers", str(trace), "--meta", str(meta), "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["slowdown"] == pytest.approx(1.0, abs=1e-9)


def test_reader_takes_plain_and_dictionary_op_types(tmp_path: Path) -> None:
    sim = simulate(dp=2, pp=2, num_microbatches=4, num_steps=2)
    path, meta = sim.write(tmp_path)
    table = pq.read_table(path)
    plain = tmp_path / "plain.parquet"
    pq.write_table(
        table.set_column(
            table.schema.get_field_index("optype"),
            "optype",
            table.column("optype").cast(table.schema.field("optype").type.value_type),
        ),
        plain,
    )
    layout = read_layout(meta)
    a, b = read_op_trace(path, layout), read_op_trace(plain, layout)
    np.testing.assert_array_equal(a.optype, b.optype)
    np.testing.assert_array_equal(a.optype, sim.op_trace().optype)
