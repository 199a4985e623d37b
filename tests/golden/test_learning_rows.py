"""The learning curve's per-row table, on hand-made rows with known errors."""

from __future__ import annotations

from benchmarks.accuracy.convert import Case
from benchmarks.accuracy.learning import LearningResult, Row, learning_rows_table


def _row(config_id: str, *, prior: float, others: float, after: tuple[float, ...]) -> Row:
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
    )


def test_rows_are_listed_worst_at_k3_first_with_every_k() -> None:
    result = LearningResult(
        rows=[
            _row("mild", prior=0.50, others=0.20, after=(0.10, 0.05, 0.04)),
            _row("dragged", prior=0.10, others=0.08, after=(0.30, 0.22, 0.25)),
            _row("stuck", prior=0.53, others=0.54, after=(0.50, 0.526, 0.51)),
        ],
        time_split=[],
    )
    lines = learning_rows_table(result).splitlines()
    assert lines[0].startswith("| source | configuration |")
    assert [line.split(" | ")[1] for line in lines[2:]] == ["stuck", "dragged", "mild"]
    assert lines[2] == "| src | stuck | MoE | Blackwell | 53.0 | 54.0 | 50.0 | 52.6 | 51.0 | 4 |"


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
