"""The Hugging Face Trainer's training bar read from its console output (``adapters.logs.trainer``).

The logs are written for the project in the shape the Trainer prints them to a file: its
``***** Running training *****`` summary, then tqdm refreshes separated by carriage returns (no
line end until the bar closes), the Trainer's logger writing on after a refresh, evaluation bars
of their own total or of the training bar's. Elapsed times are printed as tqdm prints them,
truncated to the second (``MM:SS``, ``H:MM:SS``).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable
from datetime import UTC
from pathlib import Path

import pytest

from adapters.logs.context import MAX_BAR_HELD, LogContext
from adapters.logs.parsers import parse_line
from adapters.logs.reading import read_log
from adapters.logs.tail import LogTailer
from adapters.logs.trainer import ADOPT_S, MIN_SPAN_S
from planner.errors import SpecError
from planner.specs.job import ProgressRecord, TailCursor

HEAD = "[INFO|trainer.py:{line}] 2025-03-10 09:00:01,100 >> "


def summary(total: int) -> list[str]:
    return [
        HEAD.format(line=2369) + "***** Running training *****",
        HEAD.format(line=2370) + "  Num examples = 48,000",
        HEAD.format(line=2376) + "  Gradient Accumulation steps = 2",
        HEAD.format(line=2377) + f"  Total optimization steps = {total:,}",
    ]


def clock(seconds: float) -> str:
    """tqdm's ``format_interval``: whole seconds, ``MM:SS`` or ``H:MM:SS``."""
    minutes, s = divmod(int(seconds), 60)
    h, m = divmod(minutes, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def refresh(n: int, total: int, elapsed_s: float, prefix: str = "") -> str:
    """One tqdm refresh; the rate printed is deliberately not the bar's pace (never read)."""
    pct = 100 * n // total
    return f"{prefix}{pct:3d}%|##        | {n}/{total} [{clock(elapsed_s)}<01:30,  9.99s/it]"


def bar(readings: Iterable[tuple[int, float]], total: int, prefix: str = "") -> str:
    """A bar's refreshes as a file holds them: each after a carriage return, no line end."""
    return "".join("\r" + refresh(n, total, t, prefix) for n, t in readings)


def test_training_bar_is_timed_by_its_elapsed_field_across_an_evaluation() -> None:
    """Start-up 4 s, then 2 s per step; an evaluation of 6 s after step 12, its bar of another
    total, the same total, or under a launcher's prefix; training goes on with its own clock."""
    for prefix, eval_total in (("", 25), ("", 1500), ("0: ", 25), ("[default0]:", 1500)):
        first = [(0, 0.0)] + [(n, 4.0 + 2.0 * (n - 1)) for n in range(1, 13)]
        announce = HEAD.format(line=4200) + "***** Running Evaluation *****"
        evaluation = [(n, float(n)) for n in range(6)]
        resumed = [(n, 26.0 + 6.0 + 2.0 * (n - 12)) for n in range(13, 19)]
        text = "\n".join(
            [
                *summary(1500),
                bar(first, 1500, prefix) + announce,
                HEAD.format(line=4202) + "  Num examples = 200",
                bar(evaluation, eval_total, prefix),
                "{'eval_loss': 2.31, 'eval_runtime': 6.0, 'epoch': 0.01}",
                bar(resumed, 1500, prefix),
            ]
        )
        reading = read_log(text + "\n", tz=UTC)
        assert reading.framework == "transformers"
        assert reading.train_iters == 1500
        # step 1 holds start-up, step 13 the evaluation: neither is timed
        got = [(r.iteration, r.step_time_s, r.num_iterations) for r in reading.records]
        assert got == [(1, None, 1), (6, 2.0, 5), (11, 2.0, 5), (13, None, 1), (18, 2.0, 5)]
        assert all(r.train_iters == 1500 for r in reading.records)


@pytest.mark.parametrize("step_s", [1.0, 1.3, 400.0])
def test_step_times_add_up_to_the_bar_clock_and_its_end_is_read(step_s: float) -> None:
    """Steps of 1 s, 1.3 s (elapsed times truncated) and 400 s (``H:MM:SS``) over a 20-step
    bar: spans of at least ``MIN_SPAN_S``, the last one shorter at the bar's end; the timed
    steps add up to the bar's clock from its first step to its last."""
    elapsed = {n: 3.0 + step_s * (n - 1) for n in range(1, 21)}
    text = "\n".join([*summary(20), bar([(0, 0.0), *elapsed.items()], 20)])
    records = read_log(text + "\n", tz=UTC).records
    assert records[0].step_time_s is None
    assert records[-1].iteration == 20
    timed = records[1:]
    assert sum(r.num_iterations for r in timed) == 19
    clocked = math.floor(elapsed[20]) - math.floor(elapsed[1])
    total_s = sum(r.step_time_s * r.num_iterations for r in timed if r.step_time_s is not None)
    assert total_s == pytest.approx(clocked)
    for r in timed[:-1]:
        assert r.step_time_s is not None
        assert r.step_time_s * r.num_iterations >= MIN_SPAN_S
        assert r.step_time_s == pytest.approx(step_s, rel=0.1)
    if step_s >= MIN_SPAN_S:
        assert [r.iteration for r in records] == list(range(1, 21))


@pytest.mark.parametrize("eval_total", [40, 7])
def test_an_evaluation_before_the_first_step_is_not_training(eval_total: int) -> None:
    """``eval_on_start``: the training bar opens (0 of 40), an evaluation of 12 s runs before
    the first step with its own bar, of the training total by accident or not, its metrics
    line ends it; then 40 steps of 2 s on the training bar's clock (which ran through the
    evaluation). Only the training bar is read, its first step untimed."""
    evaluation = [(n, 12.0 * n / eval_total) for n in range(1, eval_total + 1)]
    training = [(n, 12.0 + 3.0 + 2.0 * n) for n in range(1, 41)]
    text = "\n".join(
        [
            *summary(40),
            bar([(0, 0.0)], 40) + HEAD.format(line=4200) + "***** Running Evaluation *****",
            HEAD.format(line=4202) + "  Num examples = 280",
            bar(evaluation, eval_total),
            "{'eval_loss': 2.9, 'eval_runtime': 12.1, 'eval_samples_per_second': 23.1, 'epoch': 0}",
            bar(training, 40),
        ]
    )
    records = read_log(text + "\n", tz=UTC).records
    got = [(r.iteration, r.step_time_s) for r in records]
    assert got == [
        (1, None),
        (6, 2.0),
        (11, 2.0),
        (16, 2.0),
        (21, 2.0),
        (26, 2.0),
        (31, 2.0),
        (36, 2.0),
        (40, 2.0),
    ]


def test_a_run_resumed_from_a_checkpoint_does_not_time_its_jump() -> None:
    """A resumed run's bar jumps from 0 to the resumed step at its first update (after the
    checkpoint's load and the skipped batches): that reading starts the span."""
    readings = [(0, 0.0), (501, 40.0)] + [(n, 40.0 + 2.0 * (n - 501)) for n in range(502, 512)]
    text = "\n".join([*summary(1000), bar(readings, 1000)])
    got = [(r.iteration, r.step_time_s) for r in read_log(text + "\n", tz=UTC).records]
    assert got == [(501, None), (506, 2.0), (511, 2.0)]


def test_without_the_training_summary_no_bar_is_read() -> None:
    """The same bar is read after its summary and not without it (no guessing which bar is
    training's); nor after a summary of another total."""
    readings = [(n, 2.0 * n) for n in range(0, 21)]
    with_summary = read_log("\n".join([*summary(20), bar(readings, 20)]) + "\n", tz=UTC)
    assert [r.iteration for r in with_summary.records] == [1, 6, 11, 16, 20]
    for head in ([], summary(40)):
        with pytest.raises(SpecError, match="no training progress"):
            read_log("\n".join([*head, bar(readings, 20)]) + "\n", tz=UTC)


def _json_step(step: int) -> str:
    return "\n" + json.dumps({"event": "step", "step": step, "time_s": 1.7e9 + 2.1 * step}) + "\n"


def _bar_with_step_lines(first_step_line: int, every: int, step_s: float) -> list[str]:
    """A Trainer script's output that also prints JSON step lines: the summary, then each bar
    refresh (``step_s`` apart) as written, a step line at ``first_step_line`` and every
    ``every`` steps after it, up to step 60 of 60."""
    parts = ["\n".join(summary(60)) + "\n", "\r" + refresh(0, 60, 0.0)]
    for step in range(1, 61):
        parts.append("\r" + refresh(step, 60, step_s * step))
        if step >= first_step_line and (step - first_step_line) % every == 0:
            parts.append(_json_step(step))
    return parts


def _tailed_at_each_write(parts: list[str], path: Path) -> list[ProgressRecord]:
    """What a tailer gives reading the log after each part is written."""
    tailer = LogTailer(tz=UTC)
    cursor = TailCursor(path=str(path))
    tailed: list[ProgressRecord] = []
    with path.open("w") as out:
        for part in parts:
            out.write(part)
            out.flush()
            records, cursor = tailer.read(cursor)
            tailed += [r for r in records if isinstance(r, ProgressRecord)]
    return tailed


def test_step_lines_before_the_bar_is_adopted_are_read_and_the_bar_never(tmp_path: Path) -> None:
    """The first JSON step line after 30 s of bar (before ``ADOPT_S``): tailed live, no bar
    record ever comes (its records were held, then dropped), only the JSON lines; read whole,
    the same."""
    parts = _bar_with_step_lines(first_step_line=15, every=15, step_s=2.0)
    assert ADOPT_S > 2.0 * 15
    tailed = _tailed_at_each_write(parts, tmp_path / "job.out")
    assert {r.framework for r in tailed} == {"json"}
    assert [r.iteration for r in tailed] == [15, 30, 45, 60]
    reading = read_log("".join(parts), tz=UTC)
    assert reading.framework == "json"
    assert list(reading.records) == tailed


def test_a_bar_adopted_before_any_step_line_stays_the_logs_progress(tmp_path: Path) -> None:
    """The first JSON step line after the bar ran past ``ADOPT_S`` (steps of 10 s, first line
    at step 40): tailed live, the bar's records (held until ``ADOPT_S``, then given in order)
    and never a JSON line; read whole, the same records, the bar's format."""
    parts = _bar_with_step_lines(first_step_line=40, every=10, step_s=10.0)
    assert ADOPT_S <= 10.0 * (40 - 1)
    tailed = _tailed_at_each_write(parts, tmp_path / "job.out")
    assert {r.framework for r in tailed} == {"transformers"}
    assert [r.iteration for r in tailed] == list(range(1, 61))
    reading = read_log("".join(parts), tz=UTC)
    assert reading.framework == "transformers"
    assert list(reading.records) == tailed
    # held until the bar has run ADOPT_S from its first step (at 10 s): step 31's refresh,
    # read once the next one begins (a tailer reads a bar one refresh late)
    until_step_31 = _tailed_at_each_write(parts[: 2 + 31], tmp_path / "held.out")
    assert until_step_31 == []
    until_step_32 = _tailed_at_each_write(parts[: 2 + 32], tmp_path / "adopted.out")
    assert [r.iteration for r in until_step_32] == list(range(1, 32))


def test_a_tailed_bar_gives_what_the_whole_log_gives(tmp_path: Path) -> None:
    """The bar tailed while it grows, reads ending anywhere (inside a refresh too): the same
    records as the finished log read whole, the last refresh read once it is complete."""
    readings = [(0, 0.0)] + [(n, 5.0 + 1.5 * n) for n in range(1, 41)]
    text = ("\n".join(summary(40)) + "\n" + bar(readings, 40) + "\n").encode()
    log = tmp_path / "job.out"
    tailer = LogTailer(tz=UTC)
    cursor = TailCursor(path=str(log))
    tailed: list[tuple[int, float | None]] = []
    for end in [*range(0, len(text), 97), len(text)]:
        log.write_bytes(text[:end])
        records, cursor = tailer.read(cursor)
        tailed += [(r.iteration, r.step_time_s) for r in records if isinstance(r, ProgressRecord)]
    whole = read_log(text.decode(), tz=UTC).records
    assert tailed == [(r.iteration, r.step_time_s) for r in whole]
    assert tailed[-1][0] == 40


def _stored(cursor: TailCursor) -> TailCursor:
    """The cursor as the service stores and loads it (a JSON document of its fields)."""
    return TailCursor(**json.loads(json.dumps(dataclasses.asdict(cursor))))


@pytest.mark.parametrize("resume", ["new tailer", "context dropped"])
def test_a_bar_read_on_from_a_stored_cursor_gives_what_one_tailer_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resume: str
) -> None:
    """A Trainer bar of 2.5 s steps (an evaluation of 20 s of the training total after step 70,
    read ends anywhere, inside a refresh too) read by a new tailer at every read from the cursor
    as the service stores it (a planner restart), or by one tailer that keeps one log's context
    while it reads two (its contexts dropped): the records one tailer gives, the whole log's,
    held ones included (the bar is adopted at 300 s)."""
    readings = [(0, 0.0)] + [(n, 4.0 + 2.5 * n) for n in range(1, 71)]
    evaluation = [(n, 2.0 * n) for n in range(11)]
    resumed = [(n, 4.0 + 2.5 * n + 20.0) for n in range(71, 201)]
    text = (
        "\n".join(
            [
                *summary(200),
                bar(readings, 200) + HEAD.format(line=4200) + "***** Running Evaluation *****",
                bar(evaluation, 200),
                "{'eval_loss': 2.31, 'eval_runtime': 20.0, 'epoch': 0.35}",
                bar(resumed, 200),
            ]
        ).encode()
        + b"\n"
    )
    log, other = tmp_path / "job.out", tmp_path / "other.out"
    other.write_text("\n".join(summary(10)) + "\n")
    if resume == "context dropped":
        monkeypatch.setattr("adapters.logs.tail.MAX_CONTEXTS", 1)
    tailer = LogTailer(tz=UTC)
    cursor, other_cursor = TailCursor(path=str(log)), TailCursor(path=str(other))
    tailed: list[ProgressRecord] = []
    for end in [*range(0, len(text), 211), len(text)]:
        log.write_bytes(text[:end])
        if resume == "new tailer":
            tailer = LogTailer(tz=UTC)
        records, cursor = tailer.read(_stored(cursor))
        tailed += [r for r in records if isinstance(r, ProgressRecord)]
        with other.open("a") as out:
            out.write(refresh(1, 10, 1.0) + "\n")
        _, other_cursor = tailer.read(other_cursor)
    whole = read_log(text.decode(), tz=UTC).records
    assert tailed == list(whole)
    assert whole[-1].iteration == 200
    assert 71 in [r.iteration for r in whole]  # after the evaluation: untimed, then timed again
    timed = [r.step_time_s for r in whole if r.step_time_s is not None]
    assert timed == pytest.approx([2.5] * len(timed), rel=0.2)  # clocks of whole seconds


def test_deepspeed_engine_lines_do_not_stop_the_bar() -> None:
    """A Trainer job under DeepSpeed: the engine's ``step=K`` lines (every 10 steps, with the
    time they were logged) are not step lines of the script's own, so the bar is read."""
    engine = "[2025-03-10 09:00:{s:02d},000] [INFO] [logging.py:96:log_dist] [Rank 0] step={k}, "
    engine += "skipped=0, lr=[2e-05], mom=[(0.9, 0.95)]"
    lines = [*summary(40), engine.format(s=1, k=0)]
    readings = [(n, 2.0 * n) for n in range(0, 41)]
    for start in range(0, 41, 10):
        lines.append(bar(readings[start : start + 10], 40))
        lines.append(engine.format(s=start // 2 + 1, k=start + 10))
    reading = read_log("\n".join(lines) + "\n", tz=UTC)
    assert reading.framework == "transformers"
    assert [r.iteration for r in reading.records] == [1, 6, 11, 16, 21, 26, 31, 36, 40]


def test_trainer_lines_never_raise_on_garbage() -> None:
    context = LogContext()
    for line in (
        "  Total optimization steps = 0",
        "  Total optimization steps = 99999999999999999999",
        "  Total optimization steps = 10",
        " 50%|#####     | 5/10 [99:99<00:01, 1.0it/s]",
        " 50%|#####     | 5/10 [:<00:01, 1.0it/s]",
        " 50%|#####     | 99999999999999999999/10 [00:01<00:01, 1.0it/s]",
        " 60%|######    | 6/10 [00:01<00:01, 1.0it/s]***** Running Prediction *****",
        " 70%|#######   | 7/10 [99999999999:00:00<00:01, 1.0it/s]",
    ):
        parse_line(line, tz=UTC, context=context)


def test_records_held_before_the_bar_is_adopted_are_bounded() -> None:
    """A log whose evaluations interrupt the bar after every step (each first reading after an
    evaluation gives a record) within the first ``ADOPT_S`` of its clock: at most
    ``MAX_BAR_HELD`` records are held, the latest, and the stored cursor's state stays small."""
    context = LogContext()
    for line in summary(5000):
        parse_line(line, context=context)
    announce = HEAD.format(line=4200) + "***** Running Evaluation *****"
    for n in range(1, 1001):
        parse_line(refresh(n, 5000, n * 0.25), context=context)
        parse_line(announce, context=context)
    assert not context.bar_adopted
    assert len(context.bar_held) == MAX_BAR_HELD
    assert context.bar_held[-1].iteration == 1000
    carried = context.carried()
    assert carried is not None
    assert len(carried) < 200 * MAX_BAR_HELD
    assert len(LogContext.resumed(carried).bar_held) == MAX_BAR_HELD
