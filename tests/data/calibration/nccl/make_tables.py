"""Writes the constructed nccl-tests tables of this directory (see README.md: NOT measured).

Each table follows nccl-tests' output format; its times follow an alpha-beta curve whose
asymptotic bus bandwidth is the figure quoted in planner/perf/efficiency_constants.json
(nvlink_busbw_fraction: "DGX H100: ~360-370 of 450 GB/s"; network_busbw_fraction: "~42-46 of
50 GB/s (NDR) per GPU"), plus a deterministic +-3 % ripple. Run: python make_tables.py
"""

from __future__ import annotations

import math
from pathlib import Path

HERE = Path(__file__).parent
HEADER_NEW = (
    "#                                                              out-of-place"
    "                       in-place          \n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
    "            (us)  (GB/s)  (GB/s)       \n"
)
HEADER_OLD = (
    "#                                                     out-of-place"
    "                       in-place          \n"
    "#       size         count      type   redop     time   algbw   busbw  error"
    "     time   algbw   busbw  error\n"
    "#        (B)    (elements)                       (us)  (GB/s)  (GB/s)"
    "            (us)  (GB/s)  (GB/s)       \n"
)


def factor(coll: str, n: int) -> float:
    return {"all_reduce": 2 * (n - 1) / n, "sendrecv": 1.0}.get(coll, (n - 1) / n)


def table(
    coll: str,
    n_ranks: int,
    hosts: list[str],
    alpha_us: float,
    busbw_gbs: float,
    *,
    old: bool = False,
    inplace_na: bool = False,
    max_exp: int = 33,
) -> str:
    gpus_per_host = n_ranks // len(hosts)
    out = [
        f"# nThread 1 nGpus {gpus_per_host} minBytes 8 maxBytes {2**max_exp} step: 2(factor) "
        "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n",
        "#\n",
        "# Using devices\n",
    ]
    for r in range(n_ranks):
        host = hosts[r // gpus_per_host]
        d = r % gpus_per_host
        out.append(
            f"#  Rank {r:2d} Group  0 Pid {4000 + r // gpus_per_host:6d} on {host:>12s} "
            f"device {d:2d} [0x{0x18 + 0x10 * d:02x}] NVIDIA H100 80GB HBM3\n"
        )
    out.append("#\n")
    out.append(HEADER_OLD if old else HEADER_NEW)
    busbws = []
    for e in range(3, max_exp + 1):
        size = 2**e
        count = size // 4
        ripple = 1.0 + 0.03 * math.sin(1.7 * e)
        t_us = (alpha_us + factor(coll, n_ranks) * size / (busbw_gbs * 1e3)) * ripple
        t2 = t_us * (1.0 + 0.01 * math.cos(e))
        algbw, algbw2 = size / t_us / 1e3, size / t2 / 1e3
        bus, bus2 = algbw * factor(coll, n_ranks), algbw2 * factor(coll, n_ranks)
        busbws.append(bus)
        redop = "sum" if coll in ("all_reduce", "reduce_scatter") else "none"
        if old:
            left = f"{size:12d}  {count:12d}     float  {redop:>6s}"
            ok = "  0e+00"
        else:
            left = f"{size:12d}  {count:12d}     float  {redop:>6s}      -1"
            ok = "      0"
        right = (
            f"   {'N/A':>6s}  {'N/A':>6s}  {'N/A':>6s}    N/A"
            if inplace_na
            else f" {t2:8.2f} {algbw2:7.2f} {bus2:7.2f}{ok}"
        )
        out.append(f"{left} {t_us:8.2f} {algbw:7.2f} {bus:7.2f}{ok}{right}\n")
    out.append("# Out of bounds values : 0 OK\n")
    out.append(f"# Avg bus bandwidth    : {sum(busbws) / len(busbws):.4f} \n#\n\n")
    return "".join(out)


if __name__ == "__main__":
    one = ["dgx-h100-01"]
    two = ["dgx-h100-01", "dgx-h100-02"]
    files = {
        "all_reduce_perf_dgx_h100_8gpu.txt": table("all_reduce", 8, one, 18.0, 365.0),
        "all_gather_perf_dgx_h100_8gpu_old_format.txt": table(
            "all_gather", 8, one, 12.0, 360.0, old=True
        ),
        "reduce_scatter_perf_dgx_h100_2node_16gpu.txt": table(
            "reduce_scatter", 16, two, 30.0, 44.0 * 15 / 16 * 8 / 7.5
        ),
        "alltoall_perf_dgx_h100_8gpu.txt": table(
            "alltoall", 8, one, 20.0, 340.0, inplace_na=True, max_exp=30
        ),
        "sendrecv_perf_dgx_h100_8gpu.txt": table("sendrecv", 8, one, 8.0, 370.0, max_exp=30),
    }
    for name, text in files.items():
        (HERE / name).write_text(text, encoding="utf-8")
