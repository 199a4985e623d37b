"""A log read as complete (``LogTailer.read(..., final=True)``: its job ended) gives what a
whole-log read (``adapters.logs.reading.read_log``) gives for the same file: the records held
for a line that will not come (a Trainer bar not yet adopted, a DeepSpeed-Chat step without its
``E2E latency`` line) and the last line without its line end, once."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC
from pathlib import Path

import pytest

from adapters.logs.reading import read_log
from adapters.logs.tail import LogTailer
from adapters.logs.trainer import ADOPT_S, MIN_SPAN_S
from planner.specs.job import ProgressRecord, TailCursor
from tests.adapters.logs.test_log_formats import DSCHAT_STEP, E2E, EPOCHS
from tests.adapters.logs.test_trainer_bar import bar, summary
from tests.service.test_service import megatron_line

STEP_S = 2.0
STEPS = 60


def _trainer_text() -> bytes:
    """A Trainer-only log of 60 steps of 2 s (start-up 4 s) whose job was killed at step 60
    of 1000: its bar ran 118 s, well under ``ADOPT_S``, and never reached its end."""
    assert STEP_S * (STEPS - 1) < ADOPT_S
    readings = [(0, 0.0)] + [(n, 4.0 + STEP_S * (n - 1)) for n in range(1, STEPS + 1)]
    return ("\n".join(summary(1000)) + "\n" + bar(readings, 1000)).encode()


def _progress(records: list[object]) -> list[ProgressRecord]:
    return [r for r in records if isinstance(r, ProgressRecord)]


def _stored(cursor: TailCursor) -> TailCursor:
    """The cursor as the service stores and loads it (a JSON document of its fields)."""
    return TailCursor(**json.loads(json.dumps(dataclasses.asdict(cursor))))


@pytest.mark.parametrize("restart", [False, True])
def test_a_killed_trainer_jobs_bar_is_given_by_the_final_read(
    tmp_path: Path, restart: bool
) -> None:
    """Tailed while it grows (reads ending anywhere, a tqdm bar never ends its line) the bar
    gives nothing: its records are held for ``ADOPT_S``. The final read (by the same tailer,
    or by a new one from the stored cursor: a planner restart) gives the whole log's records;
    a second final read gives nothing and the cursor holds no record."""
    text = _trainer_text()
    log = tmp_path / "job.out"
    tailer = LogTailer(tz=UTC)
    cursor = TailCursor(path=str(log))
    for end in [*range(0, len(text), 113), len(text)]:
        log.write_bytes(text[:end])
        records, cursor = tailer.read(cursor)
        assert records == []
    if restart:
        tailer, cursor = LogTailer(tz=UTC), _stored(cursor)
    final, cursor = tailer.read(cursor, final=True)
    whole = read_log(text.decode(), tz=UTC)
    assert whole.framework == "transformers"
    assert _progress(final) == list(whole.records)
    assert MIN_SPAN_S == 5 * STEP_S
    # step 1 untimed, then spans of MIN_SPAN_S (5 steps): the last one ends at step 56
    assert [r.iteration for r in whole.records] == [1, *range(6, STEPS + 1, 5)]
    timed = [r.step_time_s for r in whole.records if r.step_time_s is not None]
    assert timed == pytest.approx([STEP_S] * len(timed))
    assert cursor.offset_bytes == cursor.size_bytes == len(text)
    assert cursor.parser_state is not None
    assert "bar_held" not in cursor.parser_state
    for reader in (tailer, LogTailer(tz=UTC)):
        assert reader.read(_stored(cursor), final=True) == ([], _stored(cursor))


def test_a_quiet_log_is_finished_without_reading(tmp_path: Path) -> None:
    """The log did not change since the last read (nothing left to read): the final read gives
    the held records from the cursor's context, and nothing a second time."""
    text = _trainer_text() + b"\n"  # the bar closed: its last refresh was read already
    log = tmp_path / "job.out"
    log.write_bytes(text)
    tailer = LogTailer(tz=UTC)
    held, cursor = tailer.read(TailCursor(path=str(log)))
    assert held == []
    assert tailer.unchanged([cursor]) == {str(log)}
    final, after = tailer.read(cursor, final=True)
    assert _progress(final) == list(read_log(text.decode(), tz=UTC).records)
    assert (after.inode, after.offset_bytes, after.size_bytes) == (
        cursor.inode,
        cursor.offset_bytes,
        cursor.size_bytes,
    )
    assert tailer.read(after, final=True) == ([], after)


def test_the_last_line_without_its_end_is_read_when_the_log_is_complete(tmp_path: Path) -> None:
    """A Megatron-LM log whose last line was cut before its line end: a live read leaves it for
    a line end that will not come, the final read gives it, as the whole log read does; an
    over-long unterminated last line is still skipped."""
    lines = [megatron_line(i, 100, 400.0) for i in range(10, 51, 10)]
    text = "".join(lines).rstrip("\n")
    log = tmp_path / "job.out"
    log.write_text(text)
    tailer = LogTailer(tz=UTC)
    live, cursor = tailer.read(TailCursor(path=str(log)))
    assert [r.iteration for r in _progress(live)] == [10, 20, 30, 40]
    final, cursor = tailer.read(cursor, final=True)
    assert [r.iteration for r in _progress(final)] == [50]
    assert _progress(live + final) == list(read_log(text, tz=UTC).records)
    assert cursor.offset_bytes == cursor.size_bytes == len(text)
    assert tailer.read(cursor, final=True) == ([], cursor)

    overlong = "".join(lines) + megatron_line(60, 100, 400.0).rstrip("\n") + " " * 2000
    log.write_text(overlong)
    short = LogTailer(tz=UTC, max_line_bytes=1000)
    live, cursor = short.read(TailCursor(path=str(log)))
    final, cursor = short.read(cursor, final=True)
    assert [r.iteration for r in _progress(live + final)] == [10, 20, 30, 40, 50]
    assert cursor.offset_bytes == len(overlong)


def test_a_deepspeed_chat_step_without_its_latency_line_is_given_at_the_end(
    tmp_path: Path,
) -> None:
    """A DeepSpeed-Chat step waits for its ``E2E latency`` line; the job ended before it came:
    the final read settles it, untimed, as the whole log read does."""
    second = DSCHAT_STEP.replace("step: 9", "step: 19")
    text = "\n".join([EPOCHS, DSCHAT_STEP, E2E, second]) + "\n"
    log = tmp_path / "job.out"
    log.write_text(text)
    tailer = LogTailer(tz=UTC)
    live, cursor = tailer.read(TailCursor(path=str(log)))
    assert [(r.iteration, r.step_time_s) for r in _progress(live)] == [(10, 3.88)]
    final, cursor = LogTailer(tz=UTC).read(_stored(cursor), final=True)
    assert [(r.iteration, r.step_time_s) for r in _progress(final)] == [(20, None)]
    assert _progress(live + final) == list(read_log(text, tz=UTC).records)
    assert cursor.parser_state is not None
    assert "dschat_pending" not in cursor.parser_state


def test_a_backlog_longer_than_one_read_is_finished_once_read_to_its_end(tmp_path: Path) -> None:
    """The bar's log read first at its job's end, 700 bytes per read: each final read goes on
    where the last stopped and holds the bar's records until the one that reaches the end;
    in all, the whole log's records, once."""
    text = _trainer_text()
    log = tmp_path / "job.out"
    log.write_bytes(text)
    tailer = LogTailer(tz=UTC, max_read_bytes=700)
    cursor = TailCursor(path=str(log))
    given: list[list[ProgressRecord]] = []
    while cursor.offset_bytes < len(text):
        records, cursor = tailer.read(cursor, final=True)
        given.append(_progress(records))
    assert len(given) > 3
    assert all(records == [] for records in given[:-1])
    assert given[-1] == list(read_log(text.decode(), tz=UTC).records)
