"""The operators the sampling harness times and the regressors model: shapes, FLOPs, bytes.

Every operator the step model decomposes a transformer layer into (``planner.perf.engine``) has
an ``OpKind`` here, with the shape dimensions that describe one call, its FLOPs and the bytes it
must move at ``dtype_bytes`` bytes per element. The counts follow the engine's conventions so
that a sampled time and an engine query describe the same work:

* ``gemm``: ``(m x k) @ (k x n)``, ``2mnk`` FLOPs, ``e(mk + kn + mn)`` bytes (forward only: the
  engine issues the backward pass as a data-gradient and a weight-gradient GEMM of transposed
  shapes, which are GEMMs of this same op);
* ``attention``: causal scaled-dot-product attention over ``batch x heads`` sequences of
  ``seq`` tokens and ``head_dim`` channels; forward executes the causal half of ``4·b·h·s²·d``,
  i.e. ``2·b·h·s²·d`` FLOPs, backward ``2.5x`` that (FlashAttention-2, Dao 2023: five matmuls
  incl. recomputing the scores), the engine's ``FLASH_BWD_FLOP_RATIO``;
* ``layer_norm``, ``rms_norm``: ``tokens x width``; forward reads x and writes y, backward
  reads x and dy and writes dx;
* ``gelu``, ``silu``: activation of ``tokens x width``; ``swiglu``: ``silu(a) * b`` of two
  ``tokens x width`` halves; ``add``: the residual add (forward only, its backward is a copy);
* ``embedding``: ``tokens`` look-ups into a ``vocab x width`` table (backward scatters into a
  dense gradient of the table);
* ``cross_entropy``: ``tokens x vocab`` logits (softmax + log-likelihood, its gradient);
* ``adam``: one ``torch.optim.Adam`` step over ``num_params`` parameters (fp32 states: read
  param, grad, m, v; write param, m, v).

FLOPs of memory-bound ops are rough per-element counts; they enter the regressors only as one
feature among others.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "ALL_DIMS",
    "DTYPE_BYTES",
    "MEMORY_BOUND_OPS",
    "OP_DIMS",
    "OP_PASSES",
    "STREAMING_OPS",
    "OpKey",
    "OpKind",
    "Pass",
    "op_bytes",
    "op_flops",
]

FloatArray = NDArray[np.float64]

FLASH_BWD_FLOP_RATIO = 2.5
"""Attention backward FLOPs / forward FLOPs (same value as ``planner.perf.engine``)."""


class OpKind(StrEnum):
    """Operator types sampled and modelled (module docstring)."""

    GEMM = "gemm"
    ATTENTION = "attention"
    LAYER_NORM = "layer_norm"
    RMS_NORM = "rms_norm"
    GELU = "gelu"
    SILU = "silu"
    SWIGLU = "swiglu"
    ADD = "add"
    EMBEDDING = "embedding"
    CROSS_ENTROPY = "cross_entropy"
    ADAM = "adam"


class Pass(StrEnum):
    """Which pass of an operator a sample times."""

    FORWARD = "fwd"
    BACKWARD = "bwd"
    STEP = "step"


ALL_DIMS: tuple[str, ...] = (
    "m",
    "n",
    "k",
    "batch",
    "heads",
    "seq",
    "head_dim",
    "tokens",
    "width",
    "vocab",
    "num_params",
)
"""Every shape dimension a sample row may carry; each op uses the subset in ``OP_DIMS``."""

OP_DIMS: dict[OpKind, tuple[str, ...]] = {
    OpKind.GEMM: ("m", "n", "k"),
    OpKind.ATTENTION: ("batch", "heads", "seq", "head_dim"),
    OpKind.LAYER_NORM: ("tokens", "width"),
    OpKind.RMS_NORM: ("tokens", "width"),
    OpKind.GELU: ("tokens", "width"),
    OpKind.SILU: ("tokens", "width"),
    OpKind.SWIGLU: ("tokens", "width"),
    OpKind.ADD: ("tokens", "width"),
    OpKind.EMBEDDING: ("tokens", "width", "vocab"),
    OpKind.CROSS_ENTROPY: ("tokens", "vocab"),
    OpKind.ADAM: ("num_params",),
}
"""The shape dimensions of each op, in the order the regressors read them."""

OP_PASSES: dict[OpKind, tuple[Pass, ...]] = {
    OpKind.GEMM: (Pass.FORWARD,),
    OpKind.ATTENTION: (Pass.FORWARD, Pass.BACKWARD),
    OpKind.LAYER_NORM: (Pass.FORWARD, Pass.BACKWARD),
    OpKind.RMS_NORM: (Pass.FORWARD, Pass.BACKWARD),
    OpKind.GELU: (Pass.FORWARD, Pass.BACKWARD),
    OpKind.SILU: (Pass.FORWARD, Pass.BACKWARD),
    OpKind.SWIGLU: (Pass.FORWARD, Pass.BACKWARD),
    OpKind.ADD: (Pass.FORWARD,),
    OpKind.EMBEDDING: (Pass.FORWARD, Pass.BACKWARD),
    OpKind.CROSS_ENTROPY: (Pass.FORWARD, Pass.BACKWARD),
    OpKind.ADAM: (Pass.STEP,),
}
"""The passes each op is sampled in."""

STREAMING_OPS: tuple[OpKind, ...] = (
    OpKind.LAYER_NORM,
    OpKind.RMS_NORM,
    OpKind.GELU,
    OpKind.SILU,
    OpKind.SWIGLU,
    OpKind.ADD,
)
"""Element-wise ops that stream their tensors once (the engine's per-layer memory-bound work;
pooled into one model by ``planner.calibration.model``)."""

MEMORY_BOUND_OPS: tuple[OpKind, ...] = (*STREAMING_OPS, OpKind.EMBEDDING, OpKind.CROSS_ENTROPY)
"""Ops whose time the engine models as HBM traffic (``memory_bytes_per_s``)."""

DTYPE_BYTES: dict[str, float] = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0}
"""Bytes per element of the dtypes the harness samples (PyTorch names)."""


@dataclass(frozen=True, slots=True)
class OpKey:
    """One modelled operator: an op kind in one pass (``"attention/bwd"``)."""

    op: OpKind
    pass_: Pass

    def __str__(self) -> str:
        return f"{self.op}/{self.pass_}"

    @classmethod
    def parse(cls, text: str) -> OpKey:
        """``"gemm/fwd"`` -> ``OpKey``; ``ValueError`` for unknown names."""
        op, _, p = text.partition("/")
        return cls(OpKind(op), Pass(p))


def _dims(op: OpKind, dims: dict[str, FloatArray]) -> list[FloatArray]:
    return [np.asarray(dims[name], dtype=np.float64) for name in OP_DIMS[op]]


def op_flops(op: OpKind, pass_: Pass, dims: dict[str, FloatArray]) -> FloatArray:
    """FLOPs of one call, shape of the broadcast dims (module docstring)."""
    d = _dims(op, dims)
    bwd = pass_ is Pass.BACKWARD
    if op is OpKind.GEMM:
        m, n, k = d
        return 2.0 * m * n * k
    if op is OpKind.ATTENTION:
        b, h, s, hd = d
        fwd = 2.0 * b * h * s * s * hd
        return fwd * FLASH_BWD_FLOP_RATIO if bwd else fwd
    if op in (OpKind.LAYER_NORM, OpKind.RMS_NORM):
        t, w = d
        return (8.0 if bwd else 5.0) * t * w
    if op in (OpKind.GELU, OpKind.SILU):
        t, w = d
        return (12.0 if bwd else 8.0) * t * w
    if op is OpKind.SWIGLU:
        t, w = d
        return (14.0 if bwd else 9.0) * t * w
    if op is OpKind.ADD:
        t, w = d
        return t * w
    if op is OpKind.EMBEDDING:
        t, w, _ = d
        return t * w  # a gathered (forward) or accumulated (backward) row per token
    if op is OpKind.CROSS_ENTROPY:
        t, v = d
        return (3.0 if bwd else 5.0) * t * v
    (p,) = d  # adam
    return 12.0 * p


def op_bytes(
    op: OpKind, pass_: Pass, dims: dict[str, FloatArray], dtype_bytes: float | FloatArray
) -> FloatArray:
    """Bytes one call must move at ``dtype_bytes`` per element (module docstring)."""
    d = _dims(op, dims)
    e = np.asarray(dtype_bytes, dtype=np.float64)
    bwd = pass_ is Pass.BACKWARD
    if op is OpKind.GEMM:
        m, n, k = d
        return e * (m * k + k * n + m * n)
    if op is OpKind.ATTENTION:
        b, h, s, hd = d
        return e * (8.0 if bwd else 4.0) * b * h * s * hd
    if op in (OpKind.LAYER_NORM, OpKind.RMS_NORM, OpKind.GELU, OpKind.SILU):
        t, w = d
        return e * (3.0 if bwd else 2.0) * t * w
    if op is OpKind.SWIGLU:
        t, w = d
        return e * (5.0 if bwd else 3.0) * t * w
    if op is OpKind.ADD:
        t, w = d
        return e * 3.0 * t * w
    if op is OpKind.EMBEDDING:
        t, w, v = d
        return e * (t * w + v * w) + 8.0 * t if bwd else e * 2.0 * t * w + 8.0 * t
    if op is OpKind.CROSS_ENTROPY:
        t, v = d
        return e * (2.0 if bwd else 1.0) * t * v + 8.0 * t
    (p,) = d  # adam: fp32 states whatever the model dtype
    return 28.0 * p
