"""Space-filling designs of operator shapes to sample (pure; randomness through a Generator).

Zhang et al. 2025 sample each operator over the shapes its model can take and fit a regressor
per operator; a full grid of every dimension is wasteful, so the shapes here come from a
scrambled Sobol sequence over the *logarithm* of each dimension (``scipy.stats.qmc.Sobol``;
Owen scrambling), mapped into per-device bounds, rounded to multiples that real models use
(``multiple_of``), and kept in Sobol order while they satisfy the op's cost caps
(``max_flop``, ``max_elements``), so that any prefix of the design is balanced. The dtype of
each point is one more Sobol coordinate over the profile's dtypes.

Profiles: ``cpu`` keeps every call below ~30 ms on one core (a full run of the ~300 points
takes about two minutes); ``cuda`` spans the projection/MLP GEMMs and attention of 1B-70B models.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import qmc

from planner.calibration.ops import DTYPE_BYTES, OP_DIMS, STREAMING_OPS, OpKind, Pass, op_flops
from planner.errors import CalibrationError

__all__ = ["PROFILES", "DesignPoint", "OpDomain", "design"]


@dataclass(frozen=True, slots=True, kw_only=True)
class OpDomain:
    """Where and how densely one op is sampled.

    ``bounds`` maps each dimension of ``OP_DIMS[op]`` to ``(low, high)`` elements (sampled
    log-uniformly), ``multiple_of`` rounds a dimension to a multiple, ``max_flop`` caps the
    forward FLOPs of a call and ``max_elements`` the product of the dimensions.
    """

    op: OpKind
    num_points: int
    bounds: Mapping[str, tuple[float, float]]
    multiple_of: Mapping[str, int] = field(default_factory=dict)
    max_flop: float = math.inf
    max_elements: float = math.inf

    def __post_init__(self) -> None:
        if set(self.bounds) != set(OP_DIMS[self.op]):
            raise CalibrationError(
                f"{self.op} domain needs bounds for exactly {', '.join(OP_DIMS[self.op])}"
            )
        for name, (lo, hi) in self.bounds.items():
            if not 1 <= lo <= hi:
                raise CalibrationError(f"{self.op}.{name}: bounds must satisfy 1 <= low <= high")


@dataclass(frozen=True, slots=True, kw_only=True)
class DesignPoint:
    """One shape to time: op, dtype and the integer dimensions of ``OP_DIMS[op]``."""

    op: OpKind
    dtype: str
    dims: Mapping[str, int]


_TOK = {"tokens": 16, "width": 16}

PROFILES: dict[str, tuple[tuple[str, ...], tuple[OpDomain, ...]]] = {
    "cpu": (
        ("float32",),
        (
            OpDomain(
                op=OpKind.GEMM,
                num_points=160,
                bounds={"m": (64, 4096), "n": (64, 2048), "k": (64, 2048)},
                multiple_of={"m": 16, "n": 16, "k": 16},
                max_flop=2e9,
            ),
            OpDomain(
                op=OpKind.ATTENTION,
                num_points=64,
                bounds={"batch": (1, 8), "heads": (1, 8), "seq": (32, 512), "head_dim": (16, 128)},
                multiple_of={"seq": 16, "head_dim": 8},
                max_flop=1e9,
            ),
            *(
                OpDomain(
                    op=op,
                    num_points=32,
                    bounds={"tokens": (64, 8192), "width": (64, 4096)},
                    multiple_of=_TOK,
                    max_elements=8e6,
                )
                for op in STREAMING_OPS
            ),
            OpDomain(
                op=OpKind.EMBEDDING,
                num_points=32,
                bounds={"tokens": (64, 4096), "width": (64, 1024), "vocab": (512, 32768)},
                multiple_of={"tokens": 16, "width": 16, "vocab": 64},
                max_elements=16e6 * 4096,
            ),
            OpDomain(
                op=OpKind.CROSS_ENTROPY,
                num_points=32,
                bounds={"tokens": (64, 4096), "vocab": (512, 32768)},
                multiple_of={"tokens": 16, "vocab": 64},
                max_elements=16e6,
            ),
            OpDomain(op=OpKind.ADAM, num_points=16, bounds={"num_params": (1e4, 2e7)}),
        ),
    ),
    "cuda": (
        ("bfloat16",),
        (
            OpDomain(
                op=OpKind.GEMM,
                num_points=160,
                bounds={"m": (256, 32768), "n": (256, 32768), "k": (256, 16384)},
                multiple_of={"m": 64, "n": 64, "k": 64},
                max_flop=5e13,
            ),
            OpDomain(
                op=OpKind.ATTENTION,
                num_points=64,
                bounds={
                    "batch": (1, 16),
                    "heads": (4, 64),
                    "seq": (512, 16384),
                    "head_dim": (64, 128),
                },
                multiple_of={"seq": 128, "head_dim": 64},
                max_flop=5e13,
            ),
            *(
                OpDomain(
                    op=op,
                    num_points=24,
                    bounds={"tokens": (1024, 65536), "width": (1024, 32768)},
                    multiple_of={"tokens": 128, "width": 128},
                    max_elements=2e9,
                )
                for op in STREAMING_OPS
            ),
            OpDomain(
                op=OpKind.EMBEDDING,
                num_points=20,
                bounds={"tokens": (1024, 65536), "width": (1024, 16384), "vocab": (32000, 262144)},
                multiple_of={"tokens": 128, "width": 128, "vocab": 128},
                max_elements=1e9 * 65536,
            ),
            OpDomain(
                op=OpKind.CROSS_ENTROPY,
                num_points=20,
                bounds={"tokens": (1024, 32768), "vocab": (32000, 262144)},
                multiple_of={"tokens": 128, "vocab": 128},
                max_elements=4e9,
            ),
            OpDomain(op=OpKind.ADAM, num_points=16, bounds={"num_params": (1e6, 2e9)}),
        ),
    ),
}
"""Per-device dtypes and op domains (module docstring)."""


def _points(
    domain: OpDomain, dtypes: tuple[str, ...], num: int, rng: np.random.Generator
) -> list[DesignPoint]:
    names = OP_DIMS[domain.op]
    dim = len(names) + (1 if len(dtypes) > 1 else 0)
    m = max(4, math.ceil(math.log2(max(num, 1) * 8)))
    unit = qmc.Sobol(dim, scramble=True, rng=rng).random_base2(m)
    lo = np.log2([domain.bounds[n][0] for n in names])
    hi = np.log2([domain.bounds[n][1] for n in names])
    out: list[DesignPoint] = []
    seen: set[tuple[object, ...]] = set()
    for row in unit:
        raw = np.exp2(lo + row[: len(names)] * (hi - lo))
        dims: dict[str, int] = {}
        for name, value in zip(names, raw, strict=True):
            mult = domain.multiple_of.get(name, 1)
            low_b, high_b = domain.bounds[name]
            rounded = max(mult, round(value / mult) * mult)
            dims[name] = int(min(max(rounded, low_b), high_b))
        dtype = (
            dtypes[min(int(row[-1] * len(dtypes)), len(dtypes) - 1)]
            if len(dtypes) > 1
            else dtypes[0]
        )
        arrays = {k: np.asarray(float(v)) for k, v in dims.items()}
        if float(op_flops(domain.op, Pass.FORWARD, arrays)) > domain.max_flop:
            continue
        if math.prod(dims.values()) > domain.max_elements:
            continue
        key = (dtype, *dims.values())
        if key in seen:
            continue
        seen.add(key)
        out.append(DesignPoint(op=domain.op, dtype=dtype, dims=dims))
        if len(out) == num:
            break
    return out


def design(
    profile: str,
    rng: np.random.Generator,
    *,
    scale: float = 1.0,
    ops: tuple[OpKind, ...] | None = None,
    dtypes: tuple[str, ...] | None = None,
) -> list[DesignPoint]:
    """The shapes to sample on a device ``profile`` (``"cpu"`` or ``"cuda"``), op by op.

    ``scale`` multiplies every op's number of points (at least 1 each: ``scale=0.01`` gives a
    tiny design for tests), ``ops`` restricts the ops and ``dtypes`` overrides the profile's
    dtypes. Raises ``CalibrationError`` for an unknown profile or dtype.
    """
    if profile not in PROFILES:
        raise CalibrationError(
            f"unknown device profile {profile!r}; use one of {', '.join(PROFILES)}"
        )
    default_dtypes, domains = PROFILES[profile]
    chosen = dtypes or default_dtypes
    unknown = [d for d in chosen if d not in DTYPE_BYTES]
    if unknown:
        raise CalibrationError(f"unknown dtype(s) {unknown}; use {', '.join(DTYPE_BYTES)}")
    out: list[DesignPoint] = []
    for domain in domains:
        if ops is not None and domain.op not in ops:
            continue
        num = max(1, round(domain.num_points * scale))
        out.extend(_points(domain, chosen, num, rng))
    return out
