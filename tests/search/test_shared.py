"""What the sweep shares between candidates gives the numbers it would compute for each one:
the coarse rejection classes (``SubSpace.decode_valid``), and the operator table, layer
activations and tensor-parallel times shared by operator key (``planner.search.shared``)."""

from __future__ import annotations

import copy
from dataclasses import fields
from typing import Any

import numpy as np
import pytest

from planner.perf.candidates import candidate_arrays
from planner.perf.efficiency import DefaultEfficiency
from planner.perf.engine import evaluate, link_of
from planner.perf.memory import LayerActivations, layer_activations, memory_arrays
from planner.perf.operators import GROUPS, OPERATOR_COLUMNS, operator_times
from planner.perf.tensor import TensorParallelTimes, tensor_parallel_times
from planner.scenario.plans import parse_space
from planner.search.shared import (
    shared_layer_activations,
    shared_operator_times,
    shared_tensor_times,
)
from planner.search.space import REJECT_REASONS, SubSpace

MOE: dict[str, Any] = {
    "name": "moe",
    "model": {"preset": "mixtral-8x7b"},
    "hardware": {"gpu": "h100-sxm", "num_gpus": 32},
    "parallelism": {"global_batch_size": 128, "micro_batch_size": [1, 2]},
}
"""Mixtral 8x7B on 32 H100: tensor, context, expert (with folding), pipeline (uneven splits
too), sequence parallel, recompute and ZeRO open."""


GPT_OSS: dict[str, Any] = {
    "name": "gpt-oss",
    "model": {"preset": "gpt-oss-20b"},
    "hardware": {"gpu": "h100-sxm", "num_gpus": 32},
    "parallelism": {"global_batch_size": 128, "micro_batch_size": [1, 2]},
}
"""GPT-OSS 20B on 32 H100 (Megatron-LM): biased experts, so expert tensor parallelism above 1
is refused (a coarse rule); the knobs open as in ``MOE``."""


def _subspace(doc: dict[str, Any]) -> SubSpace:
    (sub,) = parse_space(copy.deepcopy(doc)).subspaces
    return sub


@pytest.mark.parametrize("doc", ["small", "moe", "gpt-oss"])
def test_decode_valid_matches_a_full_decode(doc: str, small: dict[str, Any]) -> None:
    sub = _subspace({"small": small, "moe": MOE, "gpt-oss": GPT_OSS}[doc])
    assert sub.coarse_reasons is not None  # the path under test
    for start, stop in ((0, sub.size), (7, min(sub.size, 50_007))):
        cols, reason = sub.decode(start, stop)
        valid_cols, position, rejected = sub.decode_valid(start, stop)
        expected = np.bincount(reason[reason >= 0], minlength=len(REJECT_REASONS))
        np.testing.assert_array_equal(rejected, expected)
        np.testing.assert_array_equal(position, np.flatnonzero(reason < 0))
        for f in fields(valid_cols):
            got, want = getattr(valid_cols, f.name), getattr(cols.take(position), f.name)
            np.testing.assert_array_equal(got, want, err_msg=f.name)
        assert int(rejected.sum()) + position.size == stop - start


def _valid(sub: SubSpace, n: int = 6000) -> Any:
    """At most ``n`` valid candidates of ``sub``, a fixed random sample."""
    cols, _, _ = sub.decode_valid(0, sub.size)
    pick = np.random.default_rng(0).permutation(cols.n)[:n]
    return cols.take(np.sort(pick))


def test_per_layer_tables_read_only_the_operator_columns() -> None:
    # candidates that agree on OPERATOR_COLUMNS but differ in pipeline split, virtual
    # pipeline, ZeRO stage and data-parallel degree have identical operator times
    sub = _subspace(MOE)
    cols = _valid(sub)
    arrays = candidate_arrays(sub.base_arrays, cols, framework=str(sub.base.training.framework))
    eff = DefaultEfficiency()
    times = operator_times(arrays, eff)
    layer = layer_activations(arrays, eff)
    tensor = tensor_parallel_times(arrays, eff, link_of(arrays, eff))
    _, group = np.unique(sub.operator_codes(cols), return_inverse=True)
    varied = 0
    named: list[tuple[object, str]] = [(times, name) for name in GROUPS]
    named += [(layer, f.name) for f in fields(LayerActivations)]
    named += [(tensor, f.name) for f in fields(TensorParallelTimes)]
    for source, name in named:
        value = np.asarray(getattr(source, name))
        lo = np.full(group.max() + 1, np.inf)
        hi = np.full(group.max() + 1, -np.inf)
        np.minimum.at(lo, group, value)
        np.maximum.at(hi, group, value)
        np.testing.assert_array_equal(lo, hi, err_msg=name)
    for other in ("pipeline_parallel", "zero_stage", "data_parallel", "virtual_pipeline"):
        assert other not in OPERATOR_COLUMNS
        column = getattr(cols, other)
        varied += int(np.any(np.bincount(group, weights=column) != column[0] * np.bincount(group)))
    assert varied == 4  # the groups do mix the other columns


def test_operator_codes_tell_keys_apart() -> None:
    sub = _subspace(MOE)
    cols = _valid(sub)
    keys = np.stack([np.asarray(getattr(cols, c)).astype(np.int64) for c in OPERATOR_COLUMNS])
    distinct_keys = np.unique(keys, axis=1).shape[1]
    assert np.unique(sub.operator_codes(cols)).size == distinct_keys


def test_shared_table_gives_the_engine_numbers() -> None:
    sub = _subspace(MOE)
    cols = _valid(sub)
    framework = str(sub.base.training.framework)
    eff = DefaultEfficiency()
    operators = shared_operator_times(sub, eff)
    activations = shared_layer_activations(sub, eff)
    tensor = shared_tensor_times(sub, eff)
    half = cols.n // 2
    for part in (np.arange(half), np.arange(half, cols.n), np.arange(0, cols.n, 3)):
        c = cols.take(part)
        arrays = candidate_arrays(sub.base_arrays, c, framework=framework)
        alone = evaluate(arrays, eff)
        memory = memory_arrays(arrays, eff, layer=activations.values(c, arrays))
        together = evaluate(
            arrays,
            eff,
            operators=operators.values(c, arrays),
            memory=memory,
            tensor=tensor.values(c, arrays),
        )
        np.testing.assert_allclose(together.iteration_time_s, alone.iteration_time_s, rtol=1e-12)
        np.testing.assert_allclose(together.memory.total, alone.memory.total, rtol=1e-12)
    # each distinct key computed once, however the candidates were split into calls
    distinct = np.unique(sub.operator_codes(cols)).size
    assert operators.num_keys == activations.num_keys == tensor.num_keys == distinct < cols.n / 3
