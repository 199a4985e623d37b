"""Parsers on recorded sample lines of each format (tests/data/logs/README.md)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.logs.parsers import MAX_LINE_CHARS, parse_line
from planner.specs.job import ProgressRecord, RankStepRecord

DATA = Path(__file__).resolve().parents[2] / "data" / "logs"


def _lines(name: str) -> list[str]:
    with open(DATA / name, encoding="utf-8", newline="") as f:  # keep "\r" inside lines
        return f.read().split("\n")[:-1]


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def _parse(line: str) -> ProgressRecord | None:
    return parse_line(line, tz=UTC)


MEGATRON = _lines("megatron_samples.log")
TITAN = _lines("torchtitan_samples.log")
BAR = _lines("lightning_nemo_samples.log")
JSON = _lines("json_samples.log")


@pytest.mark.parametrize(
    ("index", "iteration", "total", "step_s", "loss", "ts"),
    [
        (0, 100, 500000, 1.2345, 3.456789, "2024-05-01 10:00:00"),
        (1, 200, 10000, 2.1, 2.901234, "2025-02-03 04:05:06"),
        (2, 50, 1000, 0.4567, 7.123456, None),
        (3, 300, 300000, 0.8901, 5.4321, None),
        (4, 10, 292968, 3.4567, 10.75, None),
        (5, 110, 500000, 1.2, 3.4, "2024-05-01 10:00:10"),
    ],
)
def test_megatron_variants(
    index: int, iteration: int, total: int, step_s: float, loss: float, ts: str | None
) -> None:
    record = _parse(MEGATRON[index])
    assert record is not None
    assert record.framework == "megatron"
    assert record.iteration == iteration
    assert record.train_iters == total
    assert record.step_time_s == pytest.approx(step_s)
    assert record.num_iterations == 1
    assert record.loss == pytest.approx(loss)
    assert record.timestamp_s == (None if ts is None else _epoch(ts))


@pytest.mark.parametrize("index", [6, 7, 8, 9])
def test_megatron_non_progress_lines(index: int) -> None:
    assert _parse(MEGATRON[index]) is None


def test_megatron_moe_loss_is_not_taken_for_lm_loss() -> None:
    record = _parse(MEGATRON[1])
    assert record is not None
    assert record.loss == pytest.approx(2.901234)


def test_recorded_tiny_gpt_lines_all_parse() -> None:
    lines = (DATA / "tiny_gpt_megatron_900it.log").read_text().splitlines()
    records = [r for r in map(_parse, lines) if r is not None]
    assert [r.iteration for r in records] == list(range(5, 901, 5))
    assert all(r.train_iters == 900 and r.step_time_s is not None for r in records)
    assert all(r.timestamp_s is not None for r in records)


def test_torchtitan_start_line_gives_total() -> None:
    record = _parse(TITAN[0])
    assert record == ProgressRecord(
        iteration=0,
        train_iters=1000,
        timestamp_s=_epoch("2025-01-01 12:00:00"),
        framework="torchtitan",
    )


@pytest.mark.parametrize(
    ("index", "step", "loss", "tps", "ts"),
    [
        (1, 1, 12.2504, 1024.0, _epoch("2025-01-01 12:00:30")),
        (2, 10, 9.5, 5123.0, _epoch("2025-01-01 12:00:40.5")),
        (3, 20, 8.1234, 6001.0, _epoch("2025-06-01 08:00:00.123")),
        (4, 10, 9.5, 5123.0, None),
    ],
)
def test_torchtitan_steps(index: int, step: int, loss: float, tps: float, ts: float | None) -> None:
    record = _parse(TITAN[index])
    assert record is not None
    assert (record.framework, record.iteration, record.step_time_s) == ("torchtitan", step, None)
    assert record.loss == pytest.approx(loss)
    assert record.tokens_per_s == tps
    assert record.timestamp_s == (None if ts is None else pytest.approx(ts))


def test_lightning_nemo_bar_uses_global_step_and_timing() -> None:
    record = _parse(BAR[0])
    assert record is not None
    assert (record.framework, record.iteration, record.train_iters) == ("lightning", 450, None)
    assert record.step_time_s == pytest.approx(0.33)
    assert record.loss == pytest.approx(3.2)


def test_lightning_bar_rate_in_epoch_zero() -> None:
    record = _parse(BAR[1])
    assert record is not None
    assert (record.iteration, record.train_iters) == (100, 1000)
    assert record.step_time_s == pytest.approx(0.5)
    assert record.loss == pytest.approx(5.12)


def test_lightning_bar_later_epoch_without_global_step_is_unknown() -> None:
    assert _parse(BAR[2]) is None


def test_lightning_bar_seconds_per_iteration() -> None:
    line = BAR[2].replace("v_num=3", "v_num=3, global_step=149.0")
    record = _parse(line)
    assert record is not None
    assert (record.iteration, record.step_time_s) == (150, pytest.approx(1.5))


def test_carriage_return_updates_last_wins() -> None:
    record = _parse(BAR[3])
    assert record is not None
    assert record.iteration == 3
    assert record.step_time_s == pytest.approx(1 / 0.46)


def test_validation_bar_ignored() -> None:
    assert _parse(BAR[4]) is None


def test_nemo_progress_printer() -> None:
    record = _parse(BAR[5])
    assert record is not None
    assert (record.framework, record.iteration, record.train_iters) == ("nemo", 20, 99)
    assert record.step_time_s == pytest.approx(3.553)
    assert record.loss == pytest.approx(11.03)


def test_json_lines() -> None:
    first, second, third, *rejected = (_parse(line) for line in JSON)
    assert first == ProgressRecord(
        iteration=19, train_iters=300, step_time_s=0.14, framework="json"
    )
    assert second == ProgressRecord(
        iteration=40,
        train_iters=1000,
        step_time_s=0.25,
        num_iterations=10,
        timestamp_s=_epoch("2025-03-04 05:06:07"),
        loss=4.5,
        tokens_per_s=123456.0,
        framework="custom",
    )
    assert third is not None
    assert (third.iteration, third.step_time_s, third.timestamp_s) == (7, 1.5, 1735732800.0)
    assert rejected == [None, None, None]


@pytest.mark.parametrize(
    "line",
    [
        "",
        "\x00\x01\x02\xff garbage",
        "iteration",
        " iteration      100/  500000 | consumed samples",
        " iteration      100/      50 | elapsed time per iteration (ms): 12.0 |",
        " iteration      100/  500000 | elapsed time per iteration (ms): -5.0 |",
        " iteration      100/  500000 | elapsed time per iteration (ms): nan |",
        " iteration      100/  500000 | elapsed time per iteration (ms): inf |",
        " iteration      100/  500000 | elapsed time per iteration (ms): 1e12 |",
        "Epoch 0:  45%|████▌     | 450/1000 [02:30<03:03,  3.00it/s, train_step_timing in s=nan]",
        '{"event": "step", "step": 1e300, "step_time_s": 0.1}',
        '{"event": "step", "step": -1, "step_time_s": 0.1}',
        '{"event": "step", "step": true, "step_time_s": 0.1}',
        '{"step": 3, "step_time_s": 0.1, "num_iterations": 0}',
        "[" * 1000 + "]" * 1000,
        "{" * 300,
        "x" * (MAX_LINE_CHARS + 1),
    ],
)
def test_garbage_and_absurd_values_give_none(line: str) -> None:
    assert _parse(line) is None


def test_zero_step_time_keeps_progress() -> None:
    record = _parse(" iteration      100/  500000 | elapsed time per iteration (ms): 0.0 |")
    assert record is not None
    assert (record.iteration, record.step_time_s) == (100, None)


def test_nan_loss_clears_only_the_loss() -> None:
    record = _parse(MEGATRON[2].replace("7.123456E+00", "nan"))
    assert record is not None
    assert record.loss is None
    assert record.step_time_s == pytest.approx(0.4567)


def test_timestamp_zone() -> None:
    naive = parse_line(MEGATRON[0], tz=UTC)
    assert naive is not None
    assert naive.timestamp_s == _epoch("2024-05-01 10:00:00")


@given(st.text(max_size=300))
def test_never_raises_on_text(line: str) -> None:
    record = parse_line(line, tz=UTC)
    if record is not None:
        assert record.iteration >= 0
        assert record.step_time_s is None or (
            math.isfinite(record.step_time_s) and record.step_time_s > 0
        )


@given(st.binary(max_size=300))
def test_never_raises_on_decoded_bytes(data: bytes) -> None:
    parse_line(data.decode("utf-8", errors="replace"), tz=UTC)


@given(st.sampled_from(MEGATRON + TITAN + BAR + JSON), st.integers(0, 400), st.text(max_size=5))
def test_never_raises_on_mangled_samples(line: str, cut: int, junk: str) -> None:
    parse_line(line[:cut] + junk + line[cut:], tz=UTC)


def test_rank_step_lines() -> None:
    line = (
        '{"event": "rank_step", "iteration": 10, "rank": 1, "world_size": 2, '
        '"compute_time_s": 0.05, "step_time_s": 0.068, "num_iterations": 5, "node": "node1", '
        '"time_s": 1795244708.05}'
    )
    record = parse_line(line)
    assert record == RankStepRecord(
        iteration=10,
        rank=1,
        world_size=2,
        compute_time_s=0.05,
        step_time_s=0.068,
        num_iterations=5,
        timestamp_s=1795244708.05,
        node="node1",
    )
    assert parse_line(line.replace('"rank": 1', '"rank": 2')) is None  # rank >= world size
    assert parse_line(line.replace("0.05,", "-1,")) is None
    assert parse_line('{"event": "rank_step", "iteration": 10}') is None
