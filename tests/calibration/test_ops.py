"""Operator FLOP and byte counts against closed forms."""

from __future__ import annotations

import numpy as np
import pytest

from planner.calibration import OP_DIMS, OP_PASSES, OpKey, OpKind, Pass, op_bytes, op_flops


def _d(**kw: float) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=float) for k, v in kw.items()}


def test_gemm_counts() -> None:
    dims = _d(m=512, n=384, k=128)
    assert op_flops(OpKind.GEMM, Pass.FORWARD, dims) == 2 * 512 * 384 * 128
    assert op_bytes(OpKind.GEMM, Pass.FORWARD, dims, 2.0) == 2 * (512 * 128 + 128 * 384 + 512 * 384)


def test_attention_causal_flops_and_backward_ratio() -> None:
    dims = _d(batch=4, heads=4, seq=128, head_dim=32)
    fwd = op_flops(OpKind.ATTENTION, Pass.FORWARD, dims)
    assert fwd == pytest.approx(4 * 4 * 4 * 128 * 128 * 32 / 2)  # causal half of 4bhs^2d
    assert op_flops(OpKind.ATTENTION, Pass.BACKWARD, dims) == pytest.approx(2.5 * fwd)


@pytest.mark.parametrize("op", list(OpKind))
def test_every_op_has_positive_counts_in_every_pass(op: OpKind) -> None:
    dims = _d(**dict.fromkeys(OP_DIMS[op], 64.0))
    for pass_ in OP_PASSES[op]:
        assert float(op_flops(op, pass_, dims)) > 0
        assert float(op_bytes(op, pass_, dims, 4.0)) > 0


def test_op_key_round_trip() -> None:
    key = OpKey(OpKind.LAYER_NORM, Pass.BACKWARD)
    assert str(key) == "layer_norm/bwd"
    assert OpKey.parse("layer_norm/bwd") == key
    with pytest.raises(ValueError, match="conv"):
        OpKey.parse("conv/fwd")
