"""Synthetic operator samples with known power-law times (shared by the calibration tests)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.calibration import OpKind, OpSample, Pass
from planner.calibration.design import design

PEAK_FLOP_PER_S = 50e9
BANDWIDTH_BYTES_PER_S = 10e9
OVERHEAD_S = 5e-6


def synthetic_time_s(sample_flop: float, sample_bytes: float) -> float:
    """Roofline plus a launch overhead: what a device with these peaks would measure."""
    return max(sample_flop / PEAK_FLOP_PER_S, sample_bytes / BANDWIDTH_BYTES_PER_S) + OVERHEAD_S


def make_samples(
    scale: float = 0.25, seed: int = 0, ops: tuple[OpKind, ...] | None = None, noise: float = 0.02
) -> list[OpSample]:
    rng = np.random.default_rng(seed)
    out: list[OpSample] = []
    from planner.calibration.ops import OP_PASSES

    for point in design("cpu", np.random.default_rng(seed), scale=scale, ops=ops):
        for pass_ in OP_PASSES[point.op]:
            probe = OpSample(
                op=point.op,
                pass_=pass_,
                dtype=point.dtype,
                dims={k: float(v) for k, v in point.dims.items()},
                time_median_s=1.0,
            )
            t = synthetic_time_s(probe.flop, probe.bytes) * float(np.exp(rng.normal(0, noise)))
            out.append(
                OpSample(
                    op=point.op,
                    pass_=pass_,
                    dtype=point.dtype,
                    dims=probe.dims,
                    time_median_s=t,
                    time_p25_s=t * 0.98,
                    time_p75_s=t * 1.02,
                    time_min_s=t * 0.97,
                    num_repeats=7,
                    num_warmup=2,
                    device="cpu",
                    device_name="Synthetic CPU",
                    torch_version="0.0",
                    num_threads=1,
                    hostname="test",
                    timestamp="2026-01-01T00:00:00+00:00",
                )
            )
    return out


@pytest.fixture(scope="session")
def gemm_samples() -> list[OpSample]:
    return make_samples(scale=0.25, ops=(OpKind.GEMM,))


@pytest.fixture(scope="session")
def small_samples() -> list[OpSample]:
    """About 6 points per op (GEMM 24): enough to fit every op quickly."""
    return make_samples(scale=0.2)


__all__ = ["Pass", "make_samples", "synthetic_time_s"]
