"""LogTailer edge cases on real files in a temporary directory."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from datetime import UTC
from pathlib import Path

import pytest

from adapters.logs.tail import LogTailer
from planner.errors import SourcePermanentError
from planner.specs.job import TailCursor

DATA = Path(__file__).resolve().parents[2] / "data" / "logs"


def _meg(iteration: int, ms: float = 100.0, total: int = 1000) -> bytes:
    return (
        f" [2025-01-01 00:00:{iteration % 60:02d}] iteration {iteration:8d}/{total:8d} |"
        f" consumed samples: {iteration * 8:12d} | elapsed time per iteration (ms): {ms:.1f} |"
        " learning rate: 1.000000E-04 | global batch size:     8 | lm loss: 3.000000E+00 |"
    ).encode()


@pytest.fixture
def tailer() -> LogTailer:
    return LogTailer(tz=UTC)


def test_partial_line_then_completion(tmp_path: Path, tailer: LogTailer) -> None:
    log = tmp_path / "job.out"
    line = _meg(10)
    log.write_bytes(b"starting\n" + line[:40])
    records, cursor = tailer.read(TailCursor(path=str(log)))
    assert records == []
    assert cursor.offset_bytes == len(b"starting\n")
    with log.open("ab") as f:
        f.write(line[40:] + b"\n")
    records, cursor = tailer.read(cursor)
    assert [r.iteration for r in records] == [10]
    assert cursor.offset_bytes == log.stat().st_size
    assert tailer.read(cursor) == ([], cursor)


def test_num_iterations_from_previous_line_and_cursor(tmp_path: Path, tailer: LogTailer) -> None:
    log = tmp_path / "job.out"
    log.write_bytes(_meg(10) + b"\n" + _meg(20) + b"\n")
    records, cursor = tailer.read(TailCursor(path=str(log)))
    assert [r.num_iterations for r in records] == [1, 10]
    assert cursor.last_iteration == 20
    with log.open("ab") as f:
        f.write(_meg(25) + b"\n" + _meg(5) + b"\n")  # 5: restarted from a checkpoint
    records, cursor = tailer.read(cursor)
    assert [(r.iteration, r.num_iterations) for r in records] == [(25, 5), (5, 1)]
    assert cursor.last_iteration == 5


def test_rotation_restarts_from_zero(tmp_path: Path, tailer: LogTailer) -> None:
    log = tmp_path / "job.out"
    log.write_bytes(_meg(10) + b"\n" + _meg(20) + b"\n")
    _, cursor = tailer.read(TailCursor(path=str(log)))
    os.rename(log, tmp_path / "job.out.1")
    log.write_bytes(_meg(30) + b"\n" + _meg(40) + b"\n" + _meg(50) + b"\n")
    records, new = tailer.read(cursor)
    assert [(r.iteration, r.num_iterations) for r in records] == [(30, 1), (40, 10), (50, 10)]
    assert new.inode == log.stat().st_ino != cursor.inode


def test_truncation_restarts_from_zero(tmp_path: Path, tailer: LogTailer) -> None:
    log = tmp_path / "job.out"
    log.write_bytes(b"".join(_meg(i) + b"\n" for i in (10, 20, 30)))
    _, cursor = tailer.read(TailCursor(path=str(log)))
    with log.open("r+b") as f:
        f.truncate(0)
        f.write(_meg(5) + b"\n")
    records, new = tailer.read(cursor)
    assert [(r.iteration, r.num_iterations) for r in records] == [(5, 1)]
    assert new.offset_bytes == log.stat().st_size


def test_missing_file_keeps_cursor(tmp_path: Path, tailer: LogTailer) -> None:
    cursor = TailCursor(path=str(tmp_path / "nope.out"), inode=5, offset_bytes=10, size_bytes=10)
    assert tailer.read(cursor) == ([], cursor)


def test_a_directory_is_refused_with_the_reason(tmp_path: Path, tailer: LogTailer) -> None:
    with pytest.raises(SourcePermanentError, match=r"not a regular file \(a directory\)"):
        tailer.read(TailCursor(path=str(tmp_path)))


def test_garbage_binary_and_invalid_utf8(tmp_path: Path, tailer: LogTailer) -> None:
    log = tmp_path / "job.out"
    log.write_bytes(
        b"\x00\xff\xfe garbage \x80\x81\n" + bytes(range(256)) + b"\n" + _meg(10, 99.0) + b"\n"
    )
    records, _ = tailer.read(TailCursor(path=str(log)))
    assert [(r.iteration, r.step_time_s) for r in records] == [(10, pytest.approx(0.099))]


def test_crlf_and_carriage_return_bars(tmp_path: Path, tailer: LogTailer) -> None:
    bar = "Epoch 0:  {p}%|#   | {n}/100 [00:05<00:10,  2.00it/s, v_num=0]"
    log = tmp_path / "job.out"
    text = _meg(10) + b"\r\n" + _meg(20) + b"\r\n"
    text += b"".join(b"\r" + bar.format(p=n, n=n).encode() for n in (1, 2, 3))
    log.write_bytes(text)
    records, cursor = tailer.read(TailCursor(path=str(log)))
    assert [(r.framework, r.iteration) for r in records] == [
        ("megatron", 10),
        ("megatron", 20),
        ("lightning", 1),
        ("lightning", 2),
    ]  # the newest bar refresh has no line end yet
    with log.open("ab") as f:
        f.write(b"\r")
    records, _ = tailer.read(cursor)
    assert [r.iteration for r in records] == [3]


def test_bounded_read_continues_next_call(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    lines = [_meg(i) + b"\n" for i in range(1, 101)]
    log.write_bytes(b"".join(lines))
    tailer = LogTailer(max_read_bytes=len(lines[0]) * 10 + 5, tz=UTC)
    cursor = TailCursor(path=str(log))
    seen: list[int] = []
    for _ in range(20):
        records, cursor = tailer.read(cursor)
        assert len(records) <= 10
        seen += [r.iteration for r in records]
    assert seen == list(range(1, 101))
    assert cursor.last_iteration == 100


def test_very_long_lines_are_skipped(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    tailer = LogTailer(max_read_bytes=4096, max_line_bytes=1024, tz=UTC)
    huge = b"x" * 10_000 + _meg(99)  # ends like a progress line: must still be skipped
    log.write_bytes(_meg(10) + b"\n" + huge + b"\n" + b"y" * 2000 + b"\n" + _meg(20) + b"\n")
    cursor = TailCursor(path=str(log))
    seen: list[int] = []
    for _ in range(10):
        records, cursor = tailer.read(cursor)
        seen += [r.iteration for r in records]
    assert seen == [10, 20]
    assert cursor.offset_bytes == log.stat().st_size


def test_torchtitan_total_from_start_line(tmp_path: Path, tailer: LogTailer) -> None:
    log = tmp_path / "job.out"
    shutil.copy(DATA / "torchtitan_samples.log", log)
    records, _ = tailer.read(TailCursor(path=str(log)))
    assert [(r.iteration, r.train_iters) for r in records[:3]] == [(0, 1000), (1, 1000), (10, 1000)]


def test_recorded_tiny_gpt_log(tailer: LogTailer) -> None:
    records, cursor = tailer.read(TailCursor(path=str(DATA / "tiny_gpt_megatron_900it.log")))
    assert len(records) == 180
    assert records[0].num_iterations == 1
    assert {r.num_iterations for r in records[1:]} == {5}
    assert cursor.last_iteration == 900


def test_a_fifo_swapped_in_after_the_check_does_not_block(
    tmp_path: Path, tailer: LogTailer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log path that turns into a FIFO between the ``stat`` and the ``open`` (a race its
    owner controls): the open does not block and the FIFO is refused, nothing read."""
    regular = tmp_path / "regular.log"
    regular.write_text("x\n")
    fifo = tmp_path / "train.log"
    os.mkfifo(fifo)
    real_stat = os.stat
    monkeypatch.setattr(
        "adapters.files.os.stat",
        lambda path, *a, **k: real_stat(regular if str(path) == str(fifo) else path, *a, **k),
    )

    def unblock() -> None:  # a writer comes and goes: releases a reader blocked in open()
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    timer = threading.Timer(3.0, unblock)
    timer.start()
    try:
        start = time.monotonic()
        with pytest.raises(SourcePermanentError, match="not a regular file"):
            tailer.read(TailCursor(path=str(fifo)))
        assert time.monotonic() - start < 1.0
    finally:
        timer.cancel()
