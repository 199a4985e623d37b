"""nccl-tests output tables: both layouts, in-place N/A, tiers, errors; fit on parsed rows.

The tables under tests/data/calibration/nccl are constructed in nccl-tests' format (see the
README there), not measured.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.nccl import parse_nccl_tests
from planner.calibration import Collective, Tier, fit_collectives
from planner.errors import CalibrationError

DATA = Path(__file__).parents[2] / "data" / "calibration" / "nccl"


def _read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "collective", "ranks", "tier", "rows", "busbw_gbs"),
    [
        ("all_reduce_perf_dgx_h100_8gpu.txt", Collective.ALL_REDUCE, 8, Tier.SCALE_UP, 62, 365),
        (
            "all_gather_perf_dgx_h100_8gpu_old_format.txt",
            Collective.ALL_GATHER,
            8,
            Tier.SCALE_UP,
            62,
            360,
        ),
        (
            "reduce_scatter_perf_dgx_h100_2node_16gpu.txt",
            Collective.REDUCE_SCATTER,
            16,
            Tier.SCALE_OUT,
            62,
            44,
        ),
        ("alltoall_perf_dgx_h100_8gpu.txt", Collective.ALL_TO_ALL, 8, Tier.SCALE_UP, 28, 340),
        ("sendrecv_perf_dgx_h100_8gpu.txt", Collective.SEND_RECV, 8, Tier.SCALE_UP, 56, 370),
    ],
)
def test_tables_parse_and_fit(
    name: str, collective: Collective, ranks: int, tier: Tier, rows: int, busbw_gbs: float
) -> None:
    table = parse_nccl_tests(_read(name), source=name)
    assert (table.collective, table.num_ranks, table.tier) == (collective, ranks, tier)
    assert len(table.samples) == rows
    assert table.device_names == ("NVIDIA H100 80GB HBM3",)
    first = table.samples[0]
    assert first.size_bytes == 8
    assert first.time_s < 1e-4  # microseconds -> seconds
    (model,) = fit_collectives(table.samples)
    assert model.bus_bandwidth_bytes_per_s / 1e9 == pytest.approx(busbw_gbs, rel=0.02)
    assert model.held_out_mape < 0.05


def test_in_place_na_and_wrong_rows_are_dropped() -> None:
    table = parse_nccl_tests(_read("alltoall_perf_dgx_h100_8gpu.txt"), source="alltoall_perf")
    assert not any(s.in_place for s in table.samples)
    text = _read("all_reduce_perf_dgx_h100_8gpu.txt")
    lines = text.splitlines()
    idx = next(i for i, line in enumerate(lines) if line.strip().startswith("8 "))
    fields = lines[idx].split()
    fields[8] = "3"  # out-of-place #wrong
    lines[idx] = "  ".join(fields)
    table = parse_nccl_tests("\n".join(lines), collective="all_reduce")
    assert table.num_wrong_rows == 1
    assert len(table.samples) == 61


def test_collective_from_argument_and_tier_override() -> None:
    text = _read("all_reduce_perf_dgx_h100_8gpu.txt")
    table = parse_nccl_tests(text, collective="reduce_scatter", tier="scale_out", source="x.txt")
    assert table.collective is Collective.REDUCE_SCATTER
    assert table.tier is Tier.SCALE_OUT


def test_errors_name_the_problem() -> None:
    text = _read("all_reduce_perf_dgx_h100_8gpu.txt")
    with pytest.raises(CalibrationError, match="cannot tell which nccl-tests binary"):
        parse_nccl_tests(text, source="results.txt")
    with pytest.raises(CalibrationError, match="only all_reduce"):
        parse_nccl_tests(text, source="broadcast_perf.txt")
    with pytest.raises(CalibrationError, match="no nccl-tests table header"):
        parse_nccl_tests("# nThread 1 nGpus 8\n8 2 float\n", collective="all_reduce")
    broken = text.replace("      0    17.33", "    17.33", 1)
    with pytest.raises(CalibrationError, match=r"all_reduce_perf:\d+: 12 columns, the table"):
        parse_nccl_tests(broken, source="all_reduce_perf")
    bad = text.replace("17.50", "fast", 1)
    with pytest.raises(CalibrationError, match="'fast', not a number"):
        parse_nccl_tests(bad, source="all_reduce_perf")
