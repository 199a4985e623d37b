"""The multi-line log formats (MLPerf MLLOG, modded-nanogpt, DeepSpeed, DeepSpeed-Chat) line by
line, with and without a LogContext, and never raising on garbage."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.logs import LogContext, parse_line
from planner.specs.job import ProgressRecord

DATA = Path(__file__).resolve().parents[2] / "data" / "logs"


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def _mllog(key: str, value: object, time_ms: int = 1684040096650, **metadata: object) -> str:
    event = {"namespace": "", "time_ms": time_ms, "event_type": "POINT_IN_TIME", "key": key}
    return ":::MLLOG " + json.dumps({**event, "value": value, "metadata": metadata})


def _feed(lines: list[str], context: LogContext) -> list[ProgressRecord]:
    records = [parse_line(line, tz=UTC, context=context) for line in lines]
    return [r for r in records if isinstance(r, ProgressRecord)]


STEP = _mllog("tracked_stats", {"train_step_timing": 12.5, "reduced_train_loss": 2.7}, step=8192)
HEADER = [
    _mllog("submission_benchmark", "gpt3"),
    _mllog("global_batch_size", 2),
    _mllog("max_sequence_length", 2048),
]


def test_mllog_step_needs_the_header() -> None:
    assert parse_line(STEP) is None  # one line cannot tell tokens from steps
    context = LogContext()
    assert parse_line(STEP, context=context) is None
    assert _feed([*HEADER, STEP], context) == [
        ProgressRecord(
            iteration=2,  # 8192 tokens / (2 x 2048)
            step_time_s=12.5,
            timestamp_s=1684040096.65,
            loss=2.7,
            framework="mlperf",
        )
    ]


@pytest.mark.parametrize(
    "line",
    [
        _mllog("tracked_stats", {"train_step_timing": 12.5}, step=1000),  # under half a step
        _mllog("tracked_stats", {"validation_step_timing": 5.0}, step=8192),
        _mllog("tracked_stats", {"train_step_timing": -1.0}, step=8192),
        _mllog("tracked_stats", {"train_step_timing": "fast"}, step=8192),
        _mllog("tracked_stats", {"train_step_timing": 1.0}, step=-8192),
        _mllog("tracked_stats", {"train_step_timing": 1.0}),
        _mllog("tracked_stats", [1, 2], step=8192),
        _mllog("eval_accuracy", 2.69, step=8192),
        ':::MLLOG {"key": "tracked_stats", "step": 5, "step_time_s": 1.0}',  # not generic JSON
        ":::MLLOG {not json",
        ":::MLLOG",
    ],
)
def test_mllog_lines_without_progress(line: str) -> None:
    context = LogContext()
    _feed(HEADER, context)
    assert parse_line(line, context=context) is None


def test_mllog_events_and_times() -> None:
    context = LogContext()
    lines = [
        _mllog("init_start", None, time_ms=1_700_000_000_000),
        _mllog("init_start", None, time_ms=1_700_000_000_500),
        _mllog("global_batch_size", 2, time_ms=1_700_000_000_600),
        _mllog("max_sequence_length", 2048, time_ms=1_700_000_000_600),
        _mllog("run_start", None, time_ms=1_700_000_001_000),
        STEP.replace("1684040096650", "1700000002000"),
        _mllog("eval_start", None, time_ms=1_700_000_003_000),
    ]
    assert len(_feed(lines, context)) == 1
    assert [(e.name, e.timestamp_s, e.iteration) for e in context.events] == [
        ("init_start", 1_700_000_000.0, None),
        ("run_start", 1_700_000_001.0, None),
        ("eval_start", 1_700_000_003.0, 2),
    ]
    assert (context.first_timestamp_s, context.last_timestamp_s) == (1.7e9, 1_700_000_003.0)


def test_nanogpt_line_alone_uses_step_avg() -> None:
    record = parse_line("step:125/7500 train_time:25517ms step_avg:221.89ms")
    assert record == ProgressRecord(
        iteration=125,
        train_iters=7500,
        step_time_s=pytest.approx(0.22189),
        num_iterations=115,  # timed since the clock restarted after step 10
        framework="modded-nanogpt",
    )
    first = parse_line("step:1/20344 train_loss:22.6211 train_time:81991ms step_avg:nanms")
    assert first is not None
    assert (first.step_time_s, first.loss) == (81.991, 22.6211)
    fifth = parse_line("step:5/20344 train_loss:9.1 train_time:88000ms step_avg:nanms")
    assert fifth is not None
    assert (fifth.iteration, fifth.step_time_s) == (5, None)


@pytest.mark.parametrize(
    "line",
    [
        "step:125/7500 val_loss:4.5156 train_time:25705ms step_avg:223.52ms",
        "step:125/100 train_time:25517ms step_avg:221.89ms",
        "step:5/100 train_time:-3ms step_avg:1.00ms",
        "step:5/100 train_time:infms step_avg:1.00ms",
        "step:5/100 train_loss:2.0 train_time:10ms",
    ],
)
def test_nanogpt_non_steps_and_absurd_lines(line: str) -> None:
    assert parse_line(line) is None


def test_nanogpt_validation_event_and_step_difference() -> None:
    context = LogContext()
    lines = [
        "step:10/50 train_time:1000ms step_avg:nanms",
        "step:10/50 val_loss:4.0 train_time:1010ms step_avg:nanms",
        "step:11/50 train_time:100ms step_avg:nanms",
        "step:15/50 train_time:500ms step_avg:100.00ms",
    ]
    records = _feed(lines, context)
    assert [(r.iteration, r.step_time_s, r.num_iterations) for r in records] == [
        (10, None, 1),  # no previous line and step_avg is nan: unknown
        (11, 0.1, 1),  # the clock went back: the new step's own time
        (15, 0.1, 4),
    ]
    assert [(e.name, e.iteration) for e in context.events] == [("validation", 10)]


ENGINE = (
    "[2022-10-28 23:48:58,641] [INFO] [logging.py:68:log_dist] [Rank 0] step=10, skipped=0, "
    "lr=[5.308416e-07, 5.308416e-07], mom=[(0.9, 0.95), (0.9, 0.95)]"
)
MEGATRON = (
    " iteration       10/ 1716613 | consumed samples:         2560 | elapsed time per "
    "iteration (ms): 849.6 | learning rate: 5.308E-07 | global batch size:   256 |"
)


def test_deepspeed_engine_line() -> None:
    assert parse_line(ENGINE, tz=UTC) == ProgressRecord(
        iteration=10, timestamp_s=_epoch("2022-10-28 23:48:58.641"), framework="deepspeed"
    )


def test_deepspeed_engine_time_goes_to_the_next_record_of_its_iteration() -> None:
    context = LogContext()
    first = _feed([ENGINE, MEGATRON], context)
    assert [r.framework for r in first] == ["deepspeed", "megatron"]
    assert first[1].timestamp_s == _epoch("2022-10-28 23:48:58.641")
    later = _feed([ENGINE.replace("step=10", "step=20"), MEGATRON.replace("10/", "30/")], context)
    assert [(r.framework, r.iteration, r.timestamp_s) for r in later] == [("megatron", 30, None)]
    again = _feed([MEGATRON], context)  # a restart back at 10: the time was used already
    assert [(r.iteration, r.timestamp_s, r.num_iterations) for r in again] == [(10, None, 1)]


DSCHAT_STEP = "epoch: 0|step: 9|ppo_ep: 1|act_loss: 0.2998046875|cri_loss: 0.16|unsuper_loss: 0.0"
E2E = "|E2E latency=3.88s |Gather latency=0.00s (0.00%) |Generate time=2.54s (65.36%) |"
EPOCHS = "Beginning of Epoch 1/2, Total Generation Batches 477"


def test_deepspeed_chat_alone() -> None:
    assert parse_line(DSCHAT_STEP) == ProgressRecord(
        iteration=10, loss=0.2998046875, framework="deepspeed-chat"
    )
    assert parse_line(DSCHAT_STEP.replace("epoch: 0", "epoch: 1")) is None  # epoch size unknown
    assert parse_line(E2E) is None


def test_deepspeed_chat_with_context() -> None:
    context = LogContext()
    second_epoch = DSCHAT_STEP.replace("epoch: 0", "epoch: 1")
    records = _feed([EPOCHS, DSCHAT_STEP, E2E, second_epoch, second_epoch, E2E], context)
    assert [(r.iteration, r.train_iters, r.step_time_s) for r in records] == [
        (10, 954, 3.88),
        (487, 954, None),  # its E2E line never came
        (487, 954, 3.88),
    ]
    assert parse_line(DSCHAT_STEP, context=context) is None
    assert [r.iteration for r in context.finish()] == [10]
    assert context.finish() == []


def test_deepspeed_chat_absurd_latency_keeps_the_step() -> None:
    context = LogContext()
    assert _feed([DSCHAT_STEP, E2E.replace("3.88", "1e9")], context) == []
    assert [(r.iteration, r.step_time_s) for r in context.finish()] == [(10, None)]


SAMPLES = [
    line
    for name, count in (
        ("mlperf-v3.0-nvidia-gpt3-175b-dgxh100-n64-result_0.log", 620),
        ("deepspeed-chat-rlhf-opt1.3b-350m.log", 70),
        ("megatron-deepspeed-gpt3-125m-8gpu-interrupted.log", 2730),
        ("modded-nanogpt-medium-7500steps.log", 130),
    )
    for line in (DATA / name).read_text(encoding="utf-8").split("\n")[count - 60 : count]
]


@given(st.lists(st.text(max_size=200), max_size=20))
def test_context_never_raises_on_text(lines: list[str]) -> None:
    context = LogContext()
    for record in _feed(lines, context):
        assert record.iteration >= 0
        assert record.num_iterations >= 1
        assert record.step_time_s is None or (
            math.isfinite(record.step_time_s) and record.step_time_s > 0
        )
    context.finish()


@given(
    st.lists(
        st.tuples(st.sampled_from(SAMPLES), st.integers(0, 300), st.text(max_size=5)), max_size=20
    )
)
def test_context_never_raises_on_mangled_samples(mangles: list[tuple[str, int, str]]) -> None:
    context = LogContext()
    for line, cut, junk in mangles:
        mangled = line[:cut] + junk + line[cut:]
        parse_line(mangled, tz=UTC)
        parse_line(mangled, tz=UTC, context=context)
    context.finish()
