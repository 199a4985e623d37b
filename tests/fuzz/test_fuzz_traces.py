"""Traces (``read_op_trace``, ``read_step_times``, ``read_layout``): CSV text, real parquet
bytes corrupted, and meta files edited give a trace or a ``SpecError``."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given
from hypothesis import strategies as st

from adapters.traces import read_layout, read_op_trace, read_step_times
from adapters.traces.reader import REQUIRED_COLUMNS
from planner.specs.trace import TraceLayout
from tests.fuzz.strategies import FEW, FUZZ, NASTY_TEXT, edited_text, outcome

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
LAYOUT = TraceLayout(name="fuzz", data_parallel=2, pipeline_parallel=2, world_size=4)
META = (DATA / "bytedance-straggler-meta-ST.yaml").read_text()


def _small_parquet() -> bytes:
    table = pq.read_table(DATA / "bytedance-straggler-trace-ST.parquet").slice(0, 50)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


PARQUET = _small_parquet()
HEADER = ",".join(REQUIRED_COLUMNS)
CELLS = st.one_of(
    st.integers(-3, 5).map(str), st.sampled_from(["fwd", "bwd", "fwd-recv", "", "nan", "1e999"]),
    NASTY_TEXT.filter(lambda t: "\n" not in t and "\r" not in t), st.floats().map(repr),
)  # fmt: skip


@FUZZ
@given(st.lists(st.lists(CELLS, min_size=1, max_size=9), max_size=6), st.booleans())
def test_csv_traces(rows: list[list[str]], skip: bool) -> None:
    text = "\n".join([HEADER, *(",".join(row) for row in rows)])
    outcome(read_op_trace, "t.csv", LAYOUT, skip_bad_rows=skip, data=text.encode())


@FEW
@given(st.data())
def test_corrupted_parquet(data: st.DataObject) -> None:
    raw = bytearray(PARQUET)
    for _ in range(data.draw(st.integers(1, 8))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    body = bytes(raw if data.draw(st.booleans()) else raw[:cut])
    outcome(read_op_trace, "t.parquet", LAYOUT, skip_bad_rows=True, data=body)


@FUZZ
@given(st.binary(max_size=200), st.sampled_from(["t.parquet", "t.csv"]))
def test_any_bytes(body: bytes, name: str) -> None:
    outcome(read_op_trace, name, LAYOUT, data=body)
    outcome(read_step_times, name, data=body)


@FUZZ
@given(st.lists(st.lists(CELLS, min_size=3, max_size=3), max_size=8))
def test_step_time_tables(rows: list[list[str]]) -> None:
    text = "\n".join(["step,rank,time_s", *(",".join(row) for row in rows)])
    outcome(read_step_times, "s.csv", data=text.encode())


@FUZZ
@given(st.data())
def test_edited_meta(data: st.DataObject) -> None:
    outcome(read_layout, "m.yaml", data=data.draw(edited_text(META)).encode())


def test_dictionary_indices_past_the_dictionary_are_a_spec_error() -> None:
    """A corrupt byte in the op-type column's dictionary-encoded data page can decode into
    indices past the end of its dictionary; every such file is refused with a ``SpecError``
    naming the file (found by the corruption fuzz above as an ``IndexError``)."""
    sink = pa.BufferOutputStream()
    table = pq.read_table(pa.BufferReader(PARQUET))
    pq.write_table(table, sink, compression="none", use_dictionary=["optype"])
    clean = sink.getvalue().to_pybytes()
    chunk = pq.ParquetFile(pa.BufferReader(clean)).metadata.row_group(0).column(4)
    assert chunk.path_in_schema == "optype"
    start = chunk.data_page_offset
    refused = []
    for position in range(start, chunk.dictionary_page_offset + chunk.total_compressed_size):
        raw = bytearray(clean)
        raw[position] = 0xFF
        result = outcome(read_op_trace, "t.parquet", LAYOUT, skip_bad_rows=True, data=bytes(raw))
        if "Dictionary indices" in str(result):
            assert "t.parquet" in str(result)
            refused.append(position)
    assert refused  # some corruption of the page did reach past the dictionary
