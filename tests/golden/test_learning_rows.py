"""The learning curve's per-row table, on hand-made rows with known errors."""

from __future__ import annotations

import math

import pytest

from benchmarks.accuracy.convert import Case
from benchmarks.accuracy.learning import (
    LearningResult,
    Row,
    cluster_table,
    key_floor,
    learning_rows_table,
    learning_table,
)
from planner.calibration.observed import RunKey, RunSample


def _row(
    config_id: str,
    *,
    prior: float,
    others: float,
    after: tuple[float, ...],
    floor: float = math.nan,
    seen_all: float = math.nan,
) -> Row:
    case = Case(
        source="src",
        config_id=config_id,
        document={},
        measured_iteration_time_s=1.0,
        derived_from="test",
    )
    return Row(
        case=case,
        family="MoE",
        generation="Blackwell",
        prior=prior,
        others=others,
        after=after,
        pool=4,
        floor=floor,
        seen_all=seen_all,
    )


def test_rows_are_listed_worst_at_k3_first_with_every_k() -> None:
    result = LearningResult(
        rows=[
            _row("mild", prior=0.50, others=0.20, after=(0.10, 0.05, 0.04)),
            _row("dragged", prior=0.10, others=0.08, after=(0.30, 0.22, 0.25)),
            _row(
                "stuck",
                prior=0.53,
                others=0.54,
                after=(0.50, 0.526, 0.51),
                floor=0.4,
                seen_all=0.3,
            ),
        ],
        time_split=[],
    )
    lines = learning_rows_table(result).splitlines()
    assert lines[0].startswith("| source | configuration |")
    assert [line.split(" | ")[1] for line in lines[2:]] == ["stuck", "dragged", "mild"]
    assert lines[2] == (
        "| src | stuck | MoE | Blackwell | 53.0 | 54.0 | 50.0 | 52.6 | 51.0 | 30.0 | 40.0 | 4 |"
    )
    assert lines[3].endswith("| 25.0 | – | – | 4 |")  # no other run of its key: no floor


def test_without_k3_the_largest_k_orders_the_rows() -> None:
    result = LearningResult(
        rows=[
            _row("a", prior=0.1, others=0.1, after=(0.9, 0.1)),
            _row("b", prior=0.1, others=0.1, after=(0.1, 0.2)),
        ],
        time_split=[],
    )
    lines = learning_rows_table(result, ks=(1, 10)).splitlines()
    assert "k = 1 % | k = 10 %" in lines[0]
    assert [line.split(" | ")[1] for line in lines[2:]] == ["b", "a"]


def _sample(cluster: str, gpu: str, observed_s: float, release: str = "") -> RunSample:
    key = RunKey(
        cluster=cluster,
        gpu=gpu,
        architecture="hopper",
        recipe="bf16",
        framework="megatron",
        release=release,
        family="moe",
    )
    return RunSample(
        key=key,
        compute_s=1.0,
        network_s=0.0,
        observed_s=observed_s,
        features=(),
        predicted_memory_bytes=1.0,
    )


def test_the_floor_is_the_mean_log_ratio_of_the_other_runs_of_the_key() -> None:
    samples = [
        _sample("a", "h100-sxm", 1.0),
        _sample("a", "h100-sxm", 2.0, release="25.11"),  # another release: the same key
        _sample("a", "h100-sxm", 8.0),
        _sample("b", "h100-sxm", 100.0),  # another cluster
        _sample("a", "h200", 100.0),  # another GPU type
    ]
    # the factor is exp(mean(log 2, log 8)) = 4: predicted 4 s against 1 s measured
    assert key_floor(samples, 0) == pytest.approx(3.0)
    assert math.isnan(key_floor(samples, 3))


def test_the_cell_floor_is_the_mean_over_rows_that_have_one() -> None:
    result = LearningResult(
        rows=[
            _row("a", prior=0.1, others=0.1, after=(0.1, 0.1, 0.1), floor=0.10, seen_all=0.02),
            _row("b", prior=0.1, others=0.1, after=(0.1, 0.1, 0.1), floor=0.20, seen_all=0.04),
            _row("c", prior=0.1, others=0.1, after=(0.1, 0.1, 0.1), seen_all=0.06),
        ],
        time_split=[],
    )
    lines = learning_table(result).splitlines()
    assert "floor: own key's other runs seen % (rows)" in lines[0]
    blackwell = next(line for line in lines if line.startswith("| MoE | Blackwell |"))
    assert "all other rows seen %" in lines[0]
    # calibrated on every other row: the mean over all rows (each has one)
    assert "| 10.0 | 4.0 | 15.0 (2) | 3 |" in blackwell


def test_the_cluster_table_averages_each_cell_and_names_its_worst_row_at_k3() -> None:
    """The service's way (``cluster_table``): one cell of two rows, means of each column, the
    worst row at k = 3 and the rows with fewer than 10 runs of their cluster to draw from."""
    rows = [
        _row("a", prior=0.10, others=0.08, after=(0.06, 0.04, 0.03), seen_all=0.02),
        _row("b", prior=0.30, others=0.20, after=(0.10, 0.12, 0.05), seen_all=0.04),
    ]
    table = cluster_table(LearningResult(rows=[], time_split=[], cluster_rows=rows))
    lines = table.splitlines()
    assert lines[0].startswith("| family | GPU generation | held-out rows | k = 0: prior %")
    assert "| MoE | Blackwell | 2 | 20.0 | 14.0 | 8.0 | 8.0 | 4.0 | 12.0 | 3.0 | 2 |" in lines
    assert "| MoE | **all** | 2 | 20.0 | 14.0 | 8.0 | 8.0 | 4.0 | 12.0 | 3.0 | 2 |" in lines
    assert not any(line.startswith("| dense") for line in lines)
