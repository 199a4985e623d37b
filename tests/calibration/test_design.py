"""Space-filling designs: deterministic, inside bounds and caps, every op covered."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from planner.calibration import OP_DIMS, PROFILES, OpKind, Pass, design, op_flops
from planner.errors import CalibrationError


@pytest.mark.parametrize("profile", list(PROFILES))
def test_design_respects_bounds_caps_and_multiples(profile: str) -> None:
    points = design(profile, np.random.default_rng(3))
    _, domains = PROFILES[profile]
    by_op = {d.op: d for d in domains}
    assert {p.op for p in points} == set(OpKind)
    for p in points:
        dom = by_op[p.op]
        assert set(p.dims) == set(OP_DIMS[p.op])
        for name, value in p.dims.items():
            lo, hi = dom.bounds[name]
            assert lo <= value <= hi
            assert value % dom.multiple_of.get(name, 1) == 0
        dims = {k: np.asarray(float(v)) for k, v in p.dims.items()}
        assert float(op_flops(p.op, Pass.FORWARD, dims)) <= dom.max_flop
        assert math.prod(p.dims.values()) <= dom.max_elements
    counts = {op: sum(p.op is op for p in points) for op in by_op}
    assert all(counts[op] == by_op[op].num_points for op in by_op)


def test_design_is_deterministic_and_scales() -> None:
    a = design("cpu", np.random.default_rng(7), scale=0.1)
    b = design("cpu", np.random.default_rng(7), scale=0.1)
    assert a == b
    assert len(design("cpu", np.random.default_rng(7), scale=0.001)) == len(OpKind)


def test_design_spreads_gemm_shapes_over_the_log_range() -> None:
    gemm = [p for p in design("cpu", np.random.default_rng(0)) if p.op is OpKind.GEMM]
    logs = np.log2([p.dims["m"] for p in gemm])
    # every quarter of the log2 range of m holds points (space-filling, not clustered)
    edges = np.linspace(6, 12, 5)
    assert all(((logs >= lo) & (logs <= hi)).sum() >= 10 for lo, hi in itertools.pairwise(edges))


def test_unknown_profile_and_dtype() -> None:
    with pytest.raises(CalibrationError, match="unknown device profile"):
        design("tpu", np.random.default_rng(0))
    with pytest.raises(CalibrationError, match="unknown dtype"):
        design("cpu", np.random.default_rng(0), dtypes=("int4",))
