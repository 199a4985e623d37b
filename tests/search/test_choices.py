"""Distinct choices in the top-k: near-equal layouts are one ranked entry listing its
equivalents (planner.search.fronts.top_groups / groups, planner.search.explore)."""

from __future__ import annotations

import copy
import dataclasses
import itertools
from typing import Any

import numpy as np
import pytest

from planner.errors import SpecError
from planner.perf.candidates import CandidateColumns
from planner.perf.step import predict
from planner.scenario.plans import explore_document, parse_space
from planner.search import explore, sweep
from planner.search.explore import DEFAULT_TOLERANCE, MAX_LISTED_EQUIVALENTS
from planner.search.fronts import Kept, groups, top_groups

_FIELDS = tuple(f.name for f in dataclasses.fields(CandidateColumns))


def _kept(objective: list[float]) -> Kept:
    """Candidates with these objectives (their layouts all alike), enumerated in this order."""
    n = len(objective)
    flags = {"sequence_parallel", *(f for f in _FIELDS if f.startswith("account_for"))}
    columns: dict[str, Any] = {
        name: np.zeros(n, dtype=np.bool_) if name in flags else np.ones(n, dtype=np.int64)
        for name in _FIELDS
    }
    cols = CandidateColumns(**columns)
    return Kept(
        cols=cols,
        objective=np.asarray(objective, dtype=np.float64),
        memory=np.zeros(n),
        index=np.arange(n, dtype=np.int64),
    )


def test_groups_open_at_the_best_candidate_beyond_the_last_group() -> None:
    kept = _kept([1.0, 1.004, 1.006, 1.0101, 1.02, 1.03])
    ordered = top_groups(kept, k=10, tolerance=0.005)
    # 1.0 takes 1.004; 1.006 opens a group and takes 1.0101 (within 0.5 % of 1.006, not of 1.0)
    assert groups(ordered, 0.005).tolist() == [0, 0, 1, 1, 2, 3]
    # only the candidates of the two best groups are kept
    assert top_groups(kept, k=2, tolerance=0.005).objective.tolist() == [1.0, 1.004, 1.006, 1.0101]
    # negative objectives (tokens-per-gpu, maximised): the tolerance is relative to |o|
    negative = top_groups(_kept([-100.0, -99.6, -99.0]), k=3, tolerance=0.005)
    assert groups(negative, 0.005).tolist() == [0, 0, 1]


def test_grouping_reductions_merge_exactly() -> None:
    """Property: reducing chunks then their union equals reducing everything at once (the
    k-th group's first objective only falls as candidates are added)."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        values = (1 + rng.integers(0, 40, 300) / 1000).tolist()
        whole = top_groups(_kept(values), k=4, tolerance=0.005)
        kept = _kept(values)
        parts = [kept.take(np.arange(i, min(i + 37, kept.n))) for i in range(0, kept.n, 37)]
        merged = Kept.empty()
        for part in parts:
            merged = top_groups(merged.concat(top_groups(part, 4, 0.005)), 4, 0.005)
        assert merged.index.tolist() == whole.index.tolist()


@pytest.fixture
def tied() -> dict[str, Any]:
    """A small MoE space whose top layouts include context / data-parallel swaps."""
    return {
        "name": "tied",
        "model": {
            "num_layers": 8,
            "hidden_size": 1024,
            "num_attention_heads": 16,
            "num_query_groups": 4,
            "seq_length": 2048,
            "vocab_size": 32000,
            "activation": "swiglu",
            "num_experts": 8,
            "moe_router_topk": 2,
            "moe_ffn_hidden_size": 1024,
        },
        "hardware": {"gpu": "h100-sxm", "num_gpus": 16},
        "parallelism": {"global_batch_size": 64, "recompute": ["none", "full"]},
    }


def test_ranked_entries_are_distinct_choices_with_their_equivalents(tied: dict[str, Any]) -> None:
    space = parse_space(copy.deepcopy(tied))
    every = explore(space, top_k=40, tolerance=None)
    result = explore(space, top_k=5)
    assert [e.rank for e in result.top] == [1, 2, 3, 4, 5]
    assert result.top[0].scenario == every.top[0].scenario  # the best layout is unchanged
    times = [e.prediction.iteration_time_s for e in result.top]
    assert all(b > a * (1 + DEFAULT_TOLERANCE) for a, b in itertools.pairwise(times))
    assert sum(e.num_equivalents for e in result.top) > 0
    for entry in result.top:
        assert len(entry.equivalents) == min(entry.num_equivalents, MAX_LISTED_EQUIVALENTS)
        limit = entry.prediction.iteration_time_s * (1 + DEFAULT_TOLERANCE)
        for equivalent in entry.equivalents:
            assert equivalent.rank is None
            assert entry.prediction.iteration_time_s <= equivalent.prediction.iteration_time_s
            assert equivalent.prediction.iteration_time_s <= limit
            assert equivalent.prediction == predict(equivalent.scenario)
    # the same whatever the chunking
    again = sweep(space, top_k=5, tolerance=DEFAULT_TOLERANCE, chunk_size=997, workers=2)
    assert again.top_objective.tolist() == times
    once = sweep(space, top_k=5, tolerance=DEFAULT_TOLERANCE)
    assert again.equivalent_of.tolist() == once.equivalent_of.tolist()


def test_the_json_entry_adds_its_equivalents(tied: dict[str, Any]) -> None:
    answer = explore_document(copy.deepcopy(tied), top_k=3)
    for entry in answer["top"]:
        assert {"num_gpus", "parallelism", "prediction", "rank"} <= set(entry)
        assert isinstance(entry["equivalents"], list)
        assert entry["num_equivalents"] >= len(entry["equivalents"])
        for equivalent in entry["equivalents"]:
            assert set(equivalent) == {"num_gpus", "parallelism", "prediction"}
    for entry in answer["pareto"]:
        assert "equivalents" not in entry


def test_a_tolerance_below_zero_is_refused(tied: dict[str, Any]) -> None:
    with pytest.raises(SpecError, match="tolerance"):
        explore(parse_space(copy.deepcopy(tied)), tolerance=-0.01)


def test_no_candidates_have_every_column_and_concatenate() -> None:
    """``Kept.empty`` sets every ``CandidateColumns`` column, as the sweep's candidates do, so
    merging it with kept candidates keeps them whole (a column added to ``CandidateColumns``
    must be added to ``Kept.empty`` too)."""
    empty = Kept.empty()
    assert empty.n == 0
    assert [f for f in _FIELDS if getattr(empty.cols, f) is None] == []
    kept = _kept([1.0, 2.0])
    for merged in (empty.concat(kept), kept.concat(empty)):
        assert merged.objective.tolist() == [1.0, 2.0]
        assert all(getattr(merged.cols, f).shape[0] == 2 for f in _FIELDS if f != "stage_layers")
