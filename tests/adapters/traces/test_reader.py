"""Trace reader: real files, CSV, and broken input (clear SpecError or counted skips)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

from adapters.traces import read_layout, read_op_trace, read_step_times
from planner.errors import SpecError

DATA = Path(__file__).resolve().parents[2] / "data" / "traces"
ST = DATA / "bytedance-straggler-trace-ST.parquet"


@pytest.fixture(scope="module")
def layout():  # type: ignore[no-untyped-def]
    return read_layout(DATA / "bytedance-straggler-meta-ST.yaml")


def _csv(tmp_path: Path, table: pa.Table) -> Path:
    path = tmp_path / "trace.csv"
    if pa.types.is_dictionary(table.schema.field("optype").type):
        table = table.set_column(
            table.schema.get_field_index("optype"),
            "optype",
            table.column("optype").cast(pa.string()),
        )
    pa_csv.write_csv(table, path)
    return path


def test_reads_the_real_trace(layout) -> None:  # type: ignore[no-untyped-def]
    trace = read_op_trace(ST, layout)
    assert trace.num_ops == 6784
    assert trace.num_skipped_rows == 0
    assert layout.world_size == 8
    assert layout.name == "ST"


def test_csv_equals_parquet(tmp_path: Path, layout) -> None:  # type: ignore[no-untyped-def]
    table = pq.read_table(ST)
    a = read_op_trace(ST, layout)
    b = read_op_trace(_csv(tmp_path, table), layout)
    assert (a.optype == b.optype).all()
    assert abs(a.duration_s - b.duration_s).max() < 1e-6


def test_missing_column_is_named(tmp_path: Path, layout) -> None:  # type: ignore[no-untyped-def]
    table = pq.read_table(ST).drop_columns(["duration"])
    with pytest.raises(SpecError, match="duration") as err:
        read_op_trace(_csv(tmp_path, table), layout)
    assert err.value.field.endswith(":duration")


def test_negative_duration_names_the_row_or_is_skipped(tmp_path: Path, layout) -> None:  # type: ignore[no-untyped-def]
    table = pq.read_table(ST)
    durations = table.column("duration").to_pylist()
    durations[5] = -1.0
    table = table.set_column(
        table.schema.get_field_index("duration"), "duration", pa.array(durations, pa.float32())
    )
    path = _csv(tmp_path, table)
    with pytest.raises(SpecError, match="row 5"):
        read_op_trace(path, layout)
    trace = read_op_trace(path, layout, skip_bad_rows=True)
    assert trace.num_skipped_rows == 1
    assert trace.num_ops == 6783


def test_unknown_op_type_is_named(tmp_path: Path, layout) -> None:  # type: ignore[no-untyped-def]
    table = pq.read_table(ST)
    ops = [str(x) for x in table.column("optype").to_pylist()]
    ops[7] = "warp-drive"
    table = table.set_column(table.schema.get_field_index("optype"), "optype", pa.array(ops))
    with pytest.raises(SpecError, match=r"row 7.*warp-drive"):
        read_op_trace(_csv(tmp_path, table), layout)


def test_rank_outside_layout(tmp_path: Path) -> None:
    small = read_layout(DATA / "bytedance-straggler-meta-ST.yaml")
    from dataclasses import replace

    with pytest.raises(SpecError, match="stage"):
        read_op_trace(ST, replace(small, pipeline_parallel=2, world_size=4))


def test_garbage_and_missing_files(tmp_path: Path, layout) -> None:  # type: ignore[no-untyped-def]
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"not parquet")
    with pytest.raises(SpecError, match="cannot read"):
        read_op_trace(junk, layout)
    with pytest.raises(SpecError, match="no such file"):
        read_op_trace(tmp_path / "absent.csv", layout)
    meta = tmp_path / "meta.yaml"
    meta.write_text("dp_size: 2\n")
    with pytest.raises(SpecError, match="pp_size"):
        read_layout(meta)
    meta.write_text("dp_size: 2\npp_size: 2\nworld_size: 5\n")
    with pytest.raises(SpecError, match="world_size"):
        read_layout(meta)


def test_step_times_long_table(tmp_path: Path) -> None:
    path = tmp_path / "steps.csv"
    path.write_text("step,rank,time_s\n1,a,1.0\n1,b,1.1\n2,a,1.0\n2,b,\n3,b,-4\n")
    series = read_step_times(path)
    assert series.ranks == ("a", "b")
    assert series.steps.tolist() == [1, 2]
    assert series.times_s[1, 1] != series.times_s[1, 1]  # NaN gap
    path.write_text("step,rank,time_s\n1,a,1.0\n1,a,1.1\n")
    with pytest.raises(SpecError, match="duplicate"):
        read_step_times(path)


# Crashes the fuzz tests (tests/fuzz/test_fuzz_traces.py) found: each is a SpecError now.
HEADER = "dp_rank,stage,step,optype,start_ts,duration,seq_id\n"


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (HEADER.encode() + b"\n", "no usable rows"),  # every column empty: null-typed
        (HEADER.encode() + b"0,0,0,0,0,1,0\n", "unknown op type"),  # optype read as int64
        (b"\x80\r", "cannot read as a table"),  # a column name that is not UTF-8
        (HEADER.encode() + b"0,0,1e300,fwd,0,1,0\n", "beyond"),  # step beyond int64
    ],
    ids=["empty-columns", "numeric-optype", "non-utf8-name", "huge-step"],
)
def test_malformed_csv_is_a_spec_error(tmp_path: Path, body: bytes, match: str) -> None:
    path = tmp_path / "trace.csv"
    path.write_bytes(body)
    layout = read_layout(DATA / "bytedance-straggler-meta-ST.yaml")
    with pytest.raises(SpecError, match=match):
        read_op_trace(path, layout)


def test_huge_steps_are_gaps_in_step_times(tmp_path: Path) -> None:
    path = tmp_path / "steps.csv"
    path.write_text("step,rank,time_s\n1,a,1.0\n1e300,a,1.0\n")
    assert read_step_times(path).steps.tolist() == [1]


def test_only_regular_files_are_read(tmp_path: Path) -> None:
    """(``/dev/zero`` is tested through the CLI, in a memory-limited child process.)"""
    with pytest.raises(SpecError, match=r"not a regular file \(a directory\)"):
        read_layout(tmp_path)
    with pytest.raises(SpecError, match=r"not a regular file \(a directory\)"):
        read_op_trace(tmp_path, read_layout(DATA / "bytedance-straggler-meta-ST.yaml"))
