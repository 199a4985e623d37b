"""Physical limits of a timing sample: values beyond them were never measured (pure).

A calibration learns from the rows a sampling run wrote, and an uploaded row is data anyone with
an operator token can type: ``m = n = k = 1e30`` once became a stored "GEMM peak of 2.0e83
GFLOP/s". Each limit below is far beyond any real machine and names its source, so a real
sample never trips one and an absurd one is refused with the column, the value and why:

* :data:`MAX_GEMM_DIM`: cuBLAS takes a GEMM's ``m``, ``n`` and ``k`` as 32-bit ``int``
  (``cublasGemmEx``, cuBLAS API reference) and PyTorch checks they fit before calling it.
* :data:`MAX_ELEMENTS`: no tensor holds more elements than the process can address bytes:
  x86-64 and Arm64 give 48-bit virtual addresses (Intel SDM vol. 3A, 4.5; Arm ARMv8-A
  VMSA), CUDA's unified address space 49 bits; 2**49 bounds every shape dimension, the
  elements of an operand and the bytes one call moves.
* :data:`MIN_TIME_S`: one cycle of a 5 GHz clock is 0.2 ns, and a timed call is at least a
  function call (a kernel launch on a GPU: microseconds); no timing is below a nanosecond.
* :data:`MAX_TIME_S`: a day; the harness times each shape ``num_repeats`` times in one run.
* :data:`MAX_FLOP_PER_S`: the fastest device in the catalog (NVIDIA GB300: 1.5e16 dense FP4
  FLOP/s, NVIDIA's Blackwell Ultra datasheet) times about 6.7.
* :data:`MAX_BYTES_PER_S`: 125x the fastest HBM in the catalog (8e12 B/s, B200/B300), above
  the aggregate on-chip SRAM bandwidth of any GPU (H100: about 3.3e13 B/s of shared memory,
  132 SMs x 128 B/clock x 1.98 GHz).
* :data:`MAX_RANKS`: a million ranks, five times the largest GPU cluster built (xAI's
  Colossus, 200,000 GPUs in 2025).
* :data:`MAX_BUS_BYTES_PER_S`: over 100x NVLink 5's 9e11 B/s per GPU and direction (NVIDIA
  GB200 NVL72), the fastest link in the catalog.
"""

from __future__ import annotations

import math

from planner.errors import CalibrationError

__all__ = [
    "MAX_BUS_BYTES_PER_S",
    "MAX_BYTES_PER_S",
    "MAX_ELEMENTS",
    "MAX_FLOP_PER_S",
    "MAX_GEMM_DIM",
    "MAX_RANKS",
    "MAX_TIME_S",
    "MIN_TIME_S",
    "check_at_most",
    "check_time",
]

MAX_GEMM_DIM = 2**31 - 1
MAX_ELEMENTS = 2**49
MIN_TIME_S = 1e-9
MAX_TIME_S = 86400.0
MAX_FLOP_PER_S = 1e17
MAX_BYTES_PER_S = 1e15
MAX_RANKS = 2**20
MAX_BUS_BYTES_PER_S = 1e14

#: Why each limit holds, as the error says it (module docstring for the sources).
WHY = {
    "gemm_dim": "cuBLAS and PyTorch take a GEMM's m, n and k as 32-bit ints",
    "elements": "no process can address more bytes (48-bit CPU, 49-bit CUDA virtual addresses)",
    "time": "no timed call is faster than a nanosecond or slower than a day",
    "flop_rate": "about 7x the fastest device's peak (GB300: 1.5e16 FLOP/s)",
    "byte_rate": "125x the fastest HBM (8e12 B/s) and above any on-chip SRAM bandwidth",
    "ranks": "five times the largest GPU cluster built (200,000 GPUs)",
    "bus_rate": "over 100x NVLink 5 (9e11 B/s per GPU and direction)",
}


def check_at_most(column: str, value: float, limit: float, why: str) -> None:
    """Raise ``CalibrationError`` naming ``column`` when ``value`` is over ``limit`` (the
    physical limit; ``why`` is a key of :data:`WHY`)."""
    if not value <= limit:
        shown = f"{int(limit):,}" if float(limit).is_integer() and limit < 1e15 else f"{limit:g}"
        raise CalibrationError(
            f"column {column!r} is {value:.6g}, over the physical limit of {shown} "
            f"({WHY[why]}); fix the sample"
        )


def check_time(column: str, value: float) -> None:
    """Raise ``CalibrationError`` naming ``column`` when a time (seconds; NaN: not given) is
    outside ``[MIN_TIME_S, MAX_TIME_S]``."""
    if math.isnan(value):
        return
    if not MIN_TIME_S <= value <= MAX_TIME_S:
        raise CalibrationError(
            f"column {column!r} is {value:.6g} s, outside the physical limits of "
            f"{MIN_TIME_S:g}-{MAX_TIME_S:g} s ({WHY['time']}); fix the sample"
        )
