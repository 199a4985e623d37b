"""Golden tests: real public training logs read whole (tests/data/logs/README.md, second table).

Expected values were read from the files by hand (grep), not from the parsers.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.logs import LogReading, read_log

DATA = Path(__file__).resolve().parents[2] / "data" / "logs"


def _read(name: str) -> LogReading:
    return read_log((DATA / name).read_text(encoding="utf-8"), tz=UTC)


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def _span(reading: LogReading) -> tuple[int, int]:
    return reading.records[0].iteration, reading.records[-1].iteration


def test_mlperf_v30_one_record_per_train_step() -> None:
    reading = _read("mlperf-v3.0-nvidia-gpt3-175b-dgxh100-n64-result_0.log")
    # the total: run_stop after step 288, and trained_samples 1,207,959,552 tokens = 288 x 2048^2
    assert (reading.framework, reading.train_iters) == ("mlperf", 288)
    assert [r.iteration for r in reading.records] == list(range(1, 289))
    first, last = reading.records[0], reading.records[-1]
    assert first.step_time_s == pytest.approx(12.160857439041138)
    assert first.timestamp_s == pytest.approx(1684040096.650)
    assert first.loss == pytest.approx(2.780529260635376)
    assert last.step_time_s == pytest.approx(12.094865560531616)
    assert last.timestamp_s == pytest.approx(1684043924.769)
    # metadata.step 50331648 = 12 steps of 2048 x 2048 tokens, the first evaluation's block
    assert reading.records[11].timestamp_s == pytest.approx(1684040229.769)
    assert reading.first_timestamp_s == pytest.approx(1684039778.377)
    assert reading.last_timestamp_s == pytest.approx(1684043940.681)


def test_mlperf_v30_events() -> None:
    events = _read("mlperf-v3.0-nvidia-gpt3-175b-dgxh100-n64-result_0.log").events
    names = [e.name for e in events]
    assert names[:3] == ["init_start", "init_stop", "run_start"]
    assert names[-1] == "run_stop"
    assert names.count("eval_start") == names.count("eval_stop") == 24
    assert names.count("init_start") == 1  # printed by each of the 512 ranks
    by_name = {e.name: e for e in reversed(events)}  # first of each
    assert by_name["init_start"].timestamp_s == pytest.approx(1684039787.199)
    assert by_name["run_start"].timestamp_s == pytest.approx(1684040083.376)
    assert (by_name["run_start"].iteration, by_name["eval_start"].iteration) == (None, 12)
    assert by_name["eval_start"].timestamp_s == pytest.approx(1684040229.777)
    assert (events[-1].iteration, events[-1].timestamp_s) == (288, pytest.approx(1684043940.681))


def test_mlperf_v31_trimmed_log() -> None:
    reading = _read("mlperf-v3.1-nvidia-gpt3-175b-eos-n1344-result_0.log")
    assert _span(reading) == (1, 220)
    assert reading.train_iters == 220  # 1,211,105,280 tokens trained / (2,688 x 2,048)
    assert len(reading.records) == 220
    assert reading.records[0].step_time_s == pytest.approx(1.5570313930511475)
    assert reading.records[0].timestamp_s == pytest.approx(1696565168.704)
    assert reading.records[0].loss is None  # v3.1 logs no loss on train steps
    assert reading.records[-1].step_time_s == pytest.approx(0.9298620223999023)
    assert reading.records[-1].timestamp_s == pytest.approx(1696565400.816)
    assert [e.name for e in reading.events].count("eval_stop") == 22
    assert reading.first_timestamp_s == pytest.approx(1696564728.691)
    assert reading.last_timestamp_s == pytest.approx(1696565401.886)


def test_megatron_deepspeed_gets_engine_timestamps() -> None:
    reading = _read("megatron-deepspeed-gpt3-125m-8gpu-interrupted.log")
    assert (reading.framework, reading.train_iters) == ("megatron", 1716613)
    assert [r.iteration for r in reading.records] == list(range(10, 2131, 10))
    first, second, last = reading.records[0], reading.records[1], reading.records[-1]
    assert (first.step_time_s, first.num_iterations) == (pytest.approx(0.8496), 1)
    assert first.timestamp_s == _epoch("2022-10-28 23:48:58.641")
    assert first.loss == pytest.approx(10.69056)
    assert (second.step_time_s, second.num_iterations) == (pytest.approx(0.4732), 10)
    assert second.timestamp_s == _epoch("2022-10-28 23:49:03.373")
    assert (last.step_time_s, last.num_iterations) == (pytest.approx(0.5509), 10)
    assert last.timestamp_s == _epoch("2022-10-29 00:11:47.206")
    assert all(r.timestamp_s is not None for r in reading.records)
    # the launcher's first line and the last "Killing subprocess" line
    assert reading.first_timestamp_s == _epoch("2022-10-28 22:56:12.091")
    assert reading.last_timestamp_s == _epoch("2022-10-29 00:11:52.534")
    assert [e.iteration for e in reading.events] == list(range(100, 2101, 100))
    assert {e.name for e in reading.events} == {"validation"}


def test_deepspeed_chat_steps_and_e2e_latency() -> None:
    reading = _read("deepspeed-chat-rlhf-opt1.3b-350m.log")
    assert (reading.framework, reading.train_iters) == ("deepspeed-chat", 477)
    assert [r.iteration for r in reading.records] == list(range(1, 478))
    first, tenth = reading.records[0], reading.records[9]
    assert (first.step_time_s, first.loss, first.timestamp_s) == (7.99, 0.2099609375, None)
    assert (tenth.step_time_s, tenth.loss) == (3.88, 0.2998046875)
    assert tenth.timestamp_s == _epoch("2023-04-18 08:48:36.251")  # the critic's step=10 line
    assert [r.iteration for r in reading.records if r.timestamp_s is not None] == list(
        range(10, 471, 10)
    )
    assert reading.records[-2].step_time_s == 3.85
    last = reading.records[-1]  # step 476 is printed without its E2E line
    assert (last.iteration, last.step_time_s, last.loss) == (477, None, -0.03875732421875)
    assert sum(r.step_time_s or 0.0 for r in reading.records) == pytest.approx(1814.65)
    assert reading.first_timestamp_s == _epoch("2023-04-18 08:48:01.543")
    assert reading.last_timestamp_s == _epoch("2023-04-18 09:18:30.614")


@pytest.mark.parametrize(
    ("name", "total", "first_s", "warmup_s", "train_s", "validations", "first_loss"),
    [
        ("modded-nanogpt-medium-7500steps.log", 7500, 960.506, 965.122, 1756.682, 61, None),
        ("modded-nanogpt-scaleup1b-20344steps.log", 20344, 81.991, 97.257, 34640.282, 164, 22.6211),
    ],
)
def test_modded_nanogpt(
    name: str,
    total: int,
    first_s: float,
    warmup_s: float,
    train_s: float,
    validations: int,
    first_loss: float | None,
) -> None:
    reading = _read(name)
    assert (reading.framework, reading.train_iters) == ("modded-nanogpt", total)
    assert [r.iteration for r in reading.records] == list(range(1, total + 1))
    assert all(r.num_iterations == 1 and r.timestamp_s is None for r in reading.records)
    assert reading.records[0].step_time_s == pytest.approx(first_s)
    assert reading.records[0].loss == first_loss
    # train_time restarts after step 10: step 11 prints only its own time
    eleventh = {7500: 0.221, 20344: 1.662}[total]
    assert reading.records[10].step_time_s == pytest.approx(eleventh)
    spent = sum(r.step_time_s or 0.0 for r in reading.records)
    assert spent == pytest.approx(warmup_s + train_s)  # the 10 warm-up steps + train_time
    assert len(reading.events) == validations
    assert (reading.events[0].iteration, reading.events[-1].iteration) == (0, total)


def test_megatron_ci_deepseek_table() -> None:
    reading = _read("megatron-ci-deepseekv3-proxy-release-h100-golden.json")
    assert (reading.framework, reading.train_iters) == ("megatron-ci", 47680)
    assert len(reading.records) == 9537 - 8  # 8 "nan" samples, step 1 among them
    first, second, last = reading.records[0], reading.records[1], reading.records[-1]
    assert (first.iteration, first.step_time_s, first.num_iterations) == (5, 17.1498, 5)
    assert first.loss == 13.89171
    assert (second.iteration, second.step_time_s, second.num_iterations) == (10, 11.72574, 5)
    assert (last.iteration, last.step_time_s) == (47680, 17.11319)
    assert all(r.timestamp_s is None for r in reading.records)


def test_megatron_ci_nemotron_table() -> None:
    reading = _read("megatron-ci-nemotron3-super-release-gb200-golden.json")
    assert reading.train_iters == 23840
    assert len(reading.records) == 4769 - 2385
    assert [r.iteration for r in reading.records] == list(range(10, 23841, 10))
    first, second = reading.records[0], reading.records[1]
    assert (first.step_time_s, first.num_iterations) == (29.74817, 10)
    assert (second.step_time_s, second.num_iterations) == (13.1398, 10)
    assert reading.records[-1].step_time_s == 13.57023


def test_megatron_s_after_training_line_is_the_job_s_end() -> None:
    """Megatron-LM prints ``[after training is done] datetime: ...`` (``print_datetime``) after
    its final evaluation: the log's last time is that line's, 2 s after the last iteration's
    (the end-to-end test job's final evaluation), not the last iteration's."""
    reading = _read("tiny_gpt_e2e_stall_quiet_1500it.log")
    assert reading.records[-1].iteration == 1500
    assert reading.records[-1].timestamp_s == _epoch("2026-11-26 01:27:30")
    assert reading.last_timestamp_s == _epoch("2026-11-26 01:27:32")
