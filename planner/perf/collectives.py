"""Ring-collective cost model (alpha-beta; Thakur et al. 2005, as used by NCCL's ring algorithm).

``bytes_`` is the full buffer size per rank, ``bandwidth_bytes_per_s`` the per-GPU link bandwidth
(one direction) already scaled by the achievable fraction (busbw / link bandwidth).
"""

from __future__ import annotations

LATENCY_S = 5e-6
"""Per ring step latency, seconds (order of NCCL's intra-node LL/Simple launch+hop cost)."""


def _steps(n: int) -> int:
    return max(n - 1, 0)


def all_reduce_time_s(bytes_: float, n: int, bandwidth_bytes_per_s: float) -> float:
    """Ring all-reduce: ``2(n-1)/n · bytes / bw + 2(n-1)·α``; zero when ``n == 1``."""
    if n <= 1:
        return 0.0
    return 2.0 * (n - 1) / n * bytes_ / bandwidth_bytes_per_s + 2 * _steps(n) * LATENCY_S


def all_gather_time_s(bytes_: float, n: int, bandwidth_bytes_per_s: float) -> float:
    """Ring all-gather (or reduce-scatter) of an output of ``bytes_``: ``(n-1)/n · bytes / bw``."""
    if n <= 1:
        return 0.0
    return (n - 1) / n * bytes_ / bandwidth_bytes_per_s + _steps(n) * LATENCY_S


reduce_scatter_time_s = all_gather_time_s


def all_to_all_time_s(bytes_: float, n: int, bandwidth_bytes_per_s: float) -> float:
    """All-to-all of ``bytes_`` per rank: ``(n-1)/n`` of it leaves the GPU."""
    return all_gather_time_s(bytes_, n, bandwidth_bytes_per_s)


def p2p_time_s(bytes_: float, bandwidth_bytes_per_s: float) -> float:
    """One point-to-point send of ``bytes_``."""
    return bytes_ / bandwidth_bytes_per_s + LATENCY_S
