"""Layout validity: one set of rules (planner.specs.feasibility) for Scenario and the search."""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import pytest

from planner.errors import SpecError
from planner.perf.candidates import CandidateColumns
from planner.specs import ModelSpec, ParallelismSpec, Scenario
from planner.specs._checks import DIVISOR_SEARCH_LIMIT, divisor_list, divisors
from planner.specs.feasibility import (
    MOE_SEQUENCE_PARALLEL_SOURCE,
    Violation,
    first_violation,
    layout_violations,
    parallelism_violation,
    violation_error,
)
from tests.specs.test_specs import _hardware, _model


@dataclasses.dataclass(frozen=True)
class _One:
    """One candidate without ParallelismSpec's own validation (so invalid ones can exist)."""

    tensor_parallel: int
    pipeline_parallel: int
    context_parallel: int
    expert_parallel: int
    data_parallel: int
    virtual_pipeline: int
    sequence_parallel: bool
    micro_batch_size: int
    global_batch_size: int


MOE = _model(
    num_layers=6,
    num_attention_heads=12,
    num_query_groups=4,
    kv_channels=64,
    hidden_size=768,
    ffn_hidden_size=3000,
    seq_length=1000,
    num_experts=4,
    moe_router_topk=2,
    moe_ffn_hidden_size=1000,
)


def _random_columns(n: int, seed: int) -> CandidateColumns:
    rng = np.random.default_rng(seed)

    def pick(values: list[int]) -> np.ndarray:
        return rng.choice(np.asarray(values, dtype=np.int64), n)

    return CandidateColumns(
        tensor_parallel=pick([1, 2, 3, 4, 8]),
        pipeline_parallel=pick([1, 2, 3, 4]),
        context_parallel=pick([1, 2, 3, 4, 5]),
        expert_parallel=pick([1, 2, 3, 4]),
        data_parallel=pick([1, 2, 3, 4, 6]),
        virtual_pipeline=pick([1, 2, 3]),
        sequence_parallel=rng.random(n) < 0.5,
        micro_batch_size=pick([1, 2, 3]),
        global_batch_size=pick([24, 48, 96]),
        recompute=np.zeros(n, dtype=np.int64),
        zero_stage=np.ones(n, dtype=np.int64),
        num_gpus=np.full(n, 24, dtype=np.int64),
    )


def _row(cols: CandidateColumns, i: int) -> _One:
    return _One(
        **{
            f.name: (bool if f.name == "sequence_parallel" else int)(getattr(cols, f.name)[i])
            for f in dataclasses.fields(_One)
        }
    )


def test_one_implementation_from_both_callers_paths() -> None:
    """Scenario (one candidate) and the search (arrays) call the same module's functions."""
    import planner.search.space as search_space
    import planner.specs.parallelism as parallelism
    import planner.specs.scenario as scenario
    from planner.specs import feasibility

    assert search_space.layout_violations is feasibility.layout_violations
    assert scenario.first_violation is feasibility.first_violation
    assert scenario.violation_error is feasibility.violation_error
    assert parallelism.parallelism_violation is feasibility.parallelism_violation
    assert [r for r in search_space.REJECT_REASONS if r in set(Violation)] == [
        v.value for v in Violation
    ]


@pytest.mark.parametrize("model", [_model(), MOE, _model(seq_length=96, num_layers=12)])
def test_vectorised_and_one_candidate_readers_agree(model: ModelSpec) -> None:
    cols = _random_columns(3000, seed=model.num_layers)
    codes = layout_violations(model, 24, cols)
    assert codes.shape == (cols.n,)
    assert set(codes.tolist()) >= {-1, Violation.GPUS_NOT_DIVISIBLE_BY_TP_PP_CP.code}
    for i in range(cols.n):
        first = first_violation(model, 24, _row(cols, i))
        assert (-1 if first is None else first.code) == codes[i]


def test_scenario_is_valid_exactly_when_no_rule_is_broken() -> None:
    """ParallelismSpec reports the layout-only rules on construction, Scenario the rest; both
    raise the message of the violation the module finds."""
    cols = _random_columns(2000, seed=7)
    codes = layout_violations(MOE, 24, cols)
    valid = 0
    for i in range(cols.n):
        one = _row(cols, i)
        layout = dataclasses.asdict(one)
        first = first_violation(MOE, 24, one)
        assert (first is None) == (codes[i] == -1)
        only_layout = parallelism_violation(one)
        if only_layout is not None:
            expected: SpecError | None = violation_error(only_layout, one)
        elif first is not None:
            expected = violation_error(first, one, model=MOE, num_gpus=24)
        else:
            expected = None
        if expected is None:
            Scenario(model=MOE, hardware=_hardware(24), parallelism=ParallelismSpec(**layout))
            valid += 1
            continue
        with pytest.raises(SpecError) as raised:
            Scenario(model=MOE, hardware=_hardware(24), parallelism=ParallelismSpec(**layout))
        assert str(raised.value) == str(expected)
    assert valid > 0


@pytest.mark.parametrize(
    ("change", "violation", "field", "text"),
    [
        (
            {"data_parallel": 2},
            Violation.GPUS_NOT_DIVISIBLE_BY_TP_PP_CP,
            "parallelism.data_parallel",
            "set data_parallel to 8 or leave it out",
        ),
        (
            {"tensor_parallel": 3, "data_parallel": 1},
            Violation.GPUS_NOT_DIVISIBLE_BY_TP_PP_CP,
            "parallelism.data_parallel",
            "num_gpus must be a multiple of tensor·pipeline·context = 3",
        ),
        (
            {"tensor_parallel": 8, "data_parallel": 1},
            Violation.TENSOR_PARALLEL_DOES_NOT_DIVIDE_MODEL,
            "parallelism.tensor_parallel",
            "8 does not divide model.num_attention_heads=12",
        ),
        (
            {"pipeline_parallel": 4, "data_parallel": 2},
            Violation.LAYERS_NOT_DIVISIBLE_BY_PP_VP,
            "parallelism.pipeline_parallel",
            "model.num_layers=6 is not divisible",
        ),
        (
            {"pipeline_parallel": 2, "virtual_pipeline": 2, "data_parallel": 4},
            Violation.LAYERS_NOT_DIVISIBLE_BY_PP_VP,
            "parallelism.virtual_pipeline",
            "2·2 = 4",
        ),
        (
            {"context_parallel": 8, "data_parallel": 1},
            Violation.CONTEXT_PARALLEL_DOES_NOT_DIVIDE_SEQUENCE,
            "parallelism.context_parallel",
            "2·context_parallel = 16",
        ),
        (
            {"tensor_parallel": 2, "data_parallel": 4},
            Violation.MOE_TENSOR_PARALLEL_NEEDS_SEQUENCE_PARALLEL,
            "parallelism.sequence_parallel",
            "set sequence_parallel to true",
        ),
        (
            {"expert_parallel": 3},
            Violation.EXPERT_PARALLEL_INVALID,
            "parallelism.expert_parallel",
            "3 does not divide model.num_experts=4",
        ),
    ],
)
def test_each_violation_has_its_message(
    change: dict[str, int], violation: Violation, field: str, text: str
) -> None:
    layout = {**dataclasses.asdict(_One(1, 1, 1, 1, 8, 1, False, 1, 64)), **change}
    one = _One(**layout)
    assert first_violation(MOE, 8, one) is violation
    err = violation_error(violation, one, model=MOE, num_gpus=8)
    assert err.field == field
    assert text in err.message
    with pytest.raises(SpecError) as raised:
        Scenario(model=MOE, hardware=_hardware(8), parallelism=ParallelismSpec(**layout))
    assert str(raised.value) == str(err)


def test_every_violation_has_a_message() -> None:
    one = _One(3, 4, 3, 3, 1, 2, True, 5, 7)
    dense = _model(num_layers=5)
    for violation in Violation:
        assert Violation.from_code(violation.code) is violation
        err = violation_error(violation, one, model=dense, num_gpus=7)
        assert err.field.startswith(("parallelism.", "model."))
        assert err.message
    with pytest.raises(ValueError, match="needs the model"):
        violation_error(Violation.EXPERT_PARALLEL_INVALID, one)
    with pytest.raises(ValueError, match="violation code"):
        Violation.from_code(len(Violation))


def test_divisor_hints_are_exact_for_small_numbers() -> None:
    for n in range(1, 2000):
        every = [d for d in range(1, n + 1) if n % d == 0]
        for limit in (1, 3, 8, 64):
            assert divisor_list(n, limit) == every[:limit]
    assert divisors(36) == "1, 2, 3, 4, 6, 9, 12, 18"
    assert divisor_list(0) == []


def test_divisor_hints_of_huge_numbers_are_fast() -> None:
    prime = 2**61 - 1  # a Mersenne prime: no divisor below its square root
    start = time.process_time()  # CPU time: the work, not the machine's load
    assert divisor_list(prime) == [1, prime]
    assert divisor_list(3 * prime) == [1, 3, 3 * prime]
    assert divisor_list(10**18)[:4] == [1, 2, 4, 5]
    assert time.process_time() - start < 2.0
    assert math.isqrt(prime) > DIVISOR_SEARCH_LIMIT


def test_moe_with_tensor_parallel_needs_sequence_parallel_under_megatron_core_only() -> None:
    """Megatron-Core's MoELayer.forward refuses to train an MoE layer over a tensor-parallel
    group of more than one rank without sequence parallelism (the rule cites the source); a
    dense model and the frameworks without Megatron-Core's MoE layer are not refused."""
    no_sp = _One(2, 1, 1, 1, 4, 1, False, 1, 64)
    with_sp = dataclasses.replace(no_sp, sequence_parallel=True)
    for framework in ("megatron", "nemo"):
        found = first_violation(MOE, 8, no_sp, framework=framework)
        assert found is Violation.MOE_TENSOR_PARALLEL_NEEDS_SEQUENCE_PARALLEL
        assert first_violation(MOE, 8, with_sp, framework=framework) is None
    assert first_violation(MOE, 8, no_sp, framework="torchtitan") is None
    dense = _model(num_attention_heads=12, num_query_groups=4, seq_length=1000, num_layers=6)
    assert first_violation(dense, 8, no_sp) is None
    err = violation_error(
        Violation.MOE_TENSOR_PARALLEL_NEEDS_SEQUENCE_PARALLEL, no_sp, model=MOE, num_gpus=8
    )
    assert "moe_layer.py" in err.message
    assert "tensor_parallel to 1" in err.message
    assert "NVIDIA/Megatron-LM" in MOE_SEQUENCE_PARALLEL_SOURCE
