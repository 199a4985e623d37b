"""Expected straggler slowdown of a queued job from the cluster's history of slow nodes."""

from __future__ import annotations

import json

import pytest

from planner.errors import SpecError
from planner.stragglers.exposure import (
    SlowEpisode,
    StragglerTerm,
    expected_straggler_term,
    is_drained,
)

DAY = 86400.0
NOW = 1_800_000_000.0


def episode(node: str, hours: float, slowdown: float, *, ago_h: float = 0.0) -> SlowEpisode:
    end = NOW - ago_h * 3600
    return SlowEpisode(
        node=node,
        job_id="1",
        started_s=end - hours * 3600,
        last_seen_s=end,
        ranks=1,
        slowdown=slowdown,
    )


def test_no_history_is_a_neutral_term() -> None:
    term = expected_straggler_term([], job_nodes=8, cluster_nodes=100, now_s=NOW)
    assert term.factor == 1.0
    assert term.probability == 0.0
    assert "no slow node" in term.basis


def test_share_of_slow_node_time_gives_the_chance_and_the_factor() -> None:
    # 100 nodes over 7 days = 16,800 node-hours; 168 h slow -> p = 1 %.
    history = [episode("n1", 100, 1.5), episode("n2", 68, 1.2, ago_h=5)]
    term = expected_straggler_term(history, job_nodes=16, cluster_nodes=100, now_s=NOW)
    p = 168 / (100 * 7 * 24)
    slowdown = (100 * 1.5 + 68 * 1.2) / 168
    probability = 1 - (1 - p) ** 16
    assert term.slow_node_share == pytest.approx(p)
    assert term.slowdown_when_slow == pytest.approx(slowdown)
    assert term.probability == pytest.approx(probability)
    assert term.factor == pytest.approx(1 + probability * (slowdown - 1))
    assert term.nodes == 2
    # A larger job is more exposed.
    bigger = expected_straggler_term(history, job_nodes=64, cluster_nodes=100, now_s=NOW)
    assert bigger.factor > term.factor


def test_episodes_are_clipped_to_the_window() -> None:
    old = episode("n1", 48, 2.0, ago_h=8 * 24)  # ended 8 days ago: out of a 7-day window
    straddling = SlowEpisode(
        node="n2",
        job_id="2",
        started_s=NOW - 8 * DAY,
        last_seen_s=NOW - 6 * DAY,
        ranks=2,
        slowdown=1.4,
    )
    term = expected_straggler_term([old, straddling], job_nodes=1, cluster_nodes=10, now_s=NOW)
    assert term.episodes == 1
    assert term.slow_node_share == pytest.approx(DAY / (10 * 7 * DAY))


def test_unknown_sizes_and_bad_input() -> None:
    history = [episode("n1", 10, 1.5)]
    assert expected_straggler_term(history, job_nodes=0, cluster_nodes=10, now_s=NOW).factor == 1
    with pytest.raises(SpecError, match="window_s"):
        expected_straggler_term(history, job_nodes=1, cluster_nodes=1, now_s=NOW, window_s=0)
    with pytest.raises(SpecError, match="nodes"):
        expected_straggler_term(history, job_nodes=-1, cluster_nodes=1, now_s=NOW)


@pytest.mark.parametrize(
    ("state", "drained"),
    [
        ("idle+drain", True),
        ("mixed+drng", True),
        ("ready+cordoned", True),
        ("idle", False),
        ("allocated", False),
        ("ready", False),
    ],
)
def test_drained_states(state: str, drained: bool) -> None:
    assert is_drained(state) is drained


def test_the_term_as_json_is_its_fields_and_reads_back() -> None:
    history = [episode("n1", 100, 1.5), episode("n2", 68, 1.2, ago_h=5)]
    term = expected_straggler_term(history, job_nodes=16, cluster_nodes=100, now_s=NOW)
    doc = json.loads(json.dumps(term.to_dict()))
    assert list(doc) == list(StragglerTerm.__dataclass_fields__)
    assert StragglerTerm(**doc) == term
