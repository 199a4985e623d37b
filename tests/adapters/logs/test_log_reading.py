"""read_log and read_iteration_table on small texts: detection, errors, invariants; the tailer
reading the multi-line formats across calls."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import UTC
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.logs import LogTailer, read_iteration_table, read_log
from adapters.logs.parsers import Record
from planner.errors import SpecError
from planner.specs.job import ProgressRecord, TailCursor

DATA = Path(__file__).resolve().parents[2] / "data" / "logs"


def _table(values: object, **fields: object) -> str:
    metric = {"start_step": 1, "end_step": 20, "step_interval": 5, "values": values}
    return json.dumps({"iteration-time": {**metric, **fields}}, indent=4)


def test_table_records_and_gaps() -> None:
    text = _table({"10": "nan", "5": 2.0, "15": 3.0, "20": 0.0, "1": float("nan")})
    records = read_iteration_table(text)
    assert [(r.iteration, r.step_time_s, r.num_iterations) for r in records] == [
        (5, 2.0, 5),
        (15, 3.0, 10),
    ]
    assert {(r.train_iters, r.timestamp_s, r.loss, r.framework) for r in records} == {
        (20, None, None, "megatron-ci")
    }


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ('{\n  "iteration-time": {"start_step": 1,', "table", "line 2"),
        ("[1, 2]", "table", "JSON object"),
        ('{"lm loss": {}, "num-zeros": {}}', "iteration-time", "'lm loss', 'num-zeros'"),
        ('{"iteration-time": 3}', "iteration-time", "start_step"),
        (_table({}, end_step=None), "iteration-time.end_step", "None"),
        (_table({}, step_interval=True), "iteration-time.step_interval", "True"),
        (_table({}, end_step=0), "iteration-time.end_step", ">= 1"),
        (_table([1.0]), "iteration-time.values", "object"),
        (_table({"5a": 1.0}), "iteration-time.values.5a", "whole number"),
        (_table({"25": 1.0}), "iteration-time.values.25", "1..20"),
        (_table({"5": "fast"}), "iteration-time.values.5", "'fast'"),
        (_table({"5": -1.0}), "iteration-time.values.5", "-1.0"),
        (_table({"5": 1e300}), "iteration-time.values.5", "1e+300"),
        (_table({"5": 10**400}), "iteration-time.values.5", "finite"),
        (_table({"5": "nan", "10": 0}), "iteration-time.values", "every sample"),
    ],
)
def test_table_errors_name_the_field(text: str, field: str, words: str) -> None:
    with pytest.raises(SpecError) as info:
        read_iteration_table(text)
    assert info.value.field == field
    assert words in info.value.message


def test_read_log_detects_tables_and_json_lines() -> None:
    one_line = _table({"5": 2.0}).replace("\n", "")
    assert read_log(one_line).framework == "megatron-ci"
    json_lines = read_log((DATA / "json_samples.log").read_text())
    assert json_lines.framework == "json"
    with pytest.raises(SpecError) as info:
        read_log('{\n  "iteration-time": [')
    assert info.value.field == "table"


def test_read_log_megatron_totals_and_intervals() -> None:
    reading = read_log((DATA / "tiny_gpt_megatron_900it.log").read_text(), tz=UTC)
    assert (reading.framework, reading.train_iters) == ("megatron", 900)
    assert [r.iteration for r in reading.records] == list(range(5, 901, 5))
    assert [r.num_iterations for r in reading.records[:3]] == [1, 5, 5]
    assert reading.first_timestamp_s == reading.records[0].timestamp_s


def test_read_log_keeps_the_main_format() -> None:
    lines = [
        "step:1/3 train_time:10ms step_avg:nanms",
        " iteration        5/      10 | elapsed time per iteration (ms): 12.0 |",
        "step:2/3 train_time:20ms step_avg:nanms",
    ]
    reading = read_log("\n".join(lines))
    assert (reading.framework, reading.train_iters) == ("modded-nanogpt", 3)
    assert [r.iteration for r in reading.records] == [1, 2]


@pytest.mark.parametrize("text", ["", "\n\n", "hello\nworld", "step:5/3 train_time:1ms"])
def test_read_log_without_progress(text: str) -> None:
    with pytest.raises(SpecError) as info:
        read_log(text)
    assert info.value.field == "log"
    assert "MLPerf MLLOG" in info.value.message


@given(st.text(max_size=400))
def test_read_log_raises_only_spec_errors(text: str) -> None:
    try:
        reading = read_log(text, tz=UTC)
    except SpecError:
        return
    assert reading.records
    assert all(r.framework == reading.framework for r in reading.records)


_JSON = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


@given(
    st.dictionaries(st.sampled_from(["start_step", "end_step", "step_interval", "values"]), _JSON),
    st.dictionaries(st.text("0123456789", max_size=3), _JSON, max_size=5),
)
def test_table_raises_only_spec_errors(
    fields: dict[str, object], values: dict[str, object]
) -> None:
    metric = {"start_step": 1, "end_step": 500, "step_interval": 5, "values": values, **fields}
    try:
        records = read_iteration_table(json.dumps({"iteration-time": metric}))
    except SpecError:
        return
    assert all(r.step_time_s is not None and math.isfinite(r.step_time_s) for r in records)
    assert all(r.num_iterations >= 1 for r in records)


MLPERF = "mlperf-v3.0-nvidia-gpt3-175b-dgxh100-n64-result_0.log"


def test_tailer_reads_mllog_across_calls(tmp_path: Path) -> None:
    data = (DATA / MLPERF).read_bytes()
    cut = data.index(b"\n", len(data) // 2) + 1
    log = tmp_path / "result.txt"
    log.write_bytes(data[:cut])
    tailer = LogTailer(tz=UTC)
    first, cursor = tailer.read(TailCursor(path=str(log)))
    with log.open("ab") as f:
        f.write(data[cut:])
    second, _ = tailer.read(cursor)
    whole = read_log(data.decode(), tz=UTC).records
    assert first + second == list(whole)
    assert first
    assert second
    # A new reader (a service restart) goes on with the header the cursor carries, as the
    # first one did; one without it (a cursor stored by an older version) cannot tell steps
    # from tokens: nothing, not garbage.
    assert cursor.parser_state is not None
    assert LogTailer(tz=UTC).read(cursor)[0] == second
    older = dataclasses.replace(cursor, parser_state=None)
    assert LogTailer(tz=UTC).read(older)[0] == []


def _tailed_in_parts(log: Path, *, new_tailer_each_read: bool) -> list[Record]:
    """The records of ``log`` tailed in reads of at most 40,000 bytes, by one tailer or by a new
    one at each read from the cursor as the service stores it (a JSON document)."""
    tailer = LogTailer(tz=UTC, max_read_bytes=40_000)
    cursor = TailCursor(path=str(log))
    records: list[Record] = []
    while True:
        if new_tailer_each_read:
            tailer = LogTailer(tz=UTC, max_read_bytes=40_000)
            cursor = TailCursor(**json.loads(json.dumps(dataclasses.asdict(cursor))))
        got, after = tailer.read(cursor)
        records += got
        if after.offset_bytes == cursor.offset_bytes:
            return records
        cursor = after


@pytest.mark.parametrize(
    "name",
    sorted(p.relative_to(DATA).as_posix() for p in DATA.rglob("*.log")),
)
def test_a_new_tailer_at_each_read_gives_what_one_tailer_gives(name: str) -> None:
    """Every recorded log (Megatron-LM, Megatron-DeepSpeed with engine lines, MLPerf MLLOG of
    each round, modded-nanogpt, DeepSpeed-Chat, torchtitan, Lightning, JSON): what a planner
    restarted before every read gives is what one planner gives (what each format learnt from
    earlier lines travels with the cursor)."""
    one = _tailed_in_parts(DATA / name, new_tailer_each_read=False)
    assert one
    assert _tailed_in_parts(DATA / name, new_tailer_each_read=True) == one


def test_tailer_gives_megatron_deepspeed_lines_their_time(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_bytes((DATA / "megatron-deepspeed-gpt3-125m-8gpu-interrupted.log").read_bytes())
    records, cursor = LogTailer(tz=UTC).read(TailCursor(path=str(log)))
    megatron = [r for r in records if isinstance(r, ProgressRecord) and r.framework == "megatron"]
    assert len(megatron) == 213
    assert all(r.timestamp_s is not None for r in megatron)
    assert cursor.last_iteration == 2130
