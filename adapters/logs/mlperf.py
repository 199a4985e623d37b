"""MLPerf Training's MLLOG lines (``:::MLLOG {json}``), as NVIDIA's NeMo GPT-3 submissions print
them (MLPerf Training v3.0 and v3.1, ``mlcommons/training_results_v3.x``,
``NVIDIA/results/*/gpt3/result_*.txt``); used by ``adapters.logs.parsers.parse_line``.

Each event is one JSON object: ``{"namespace": "", "time_ms": <epoch ms>, "event_type":
"POINT_IN_TIME" | "INTERVAL_START" | "INTERVAL_END", "key": ..., "value": ..., "metadata":
{...}}``, any prefix before ``:::MLLOG`` (``srun -l`` labels) ignored.

* A training step is a ``tracked_stats`` event whose ``value`` holds ``train_step_timing`` (the
  step's time, s); ``reduced_train_loss``, when present, is its loss. Its ``metadata.step`` is
  not a step number but the tokens consumed since the run started (``global_batch_size`` x
  ``max_sequence_length`` per optimizer step: 4,194,304 = 2,048 x 2,048 for the first step of the
  v3.0 log), so the record's ``iteration`` is ``metadata.step`` divided by that product, both
  read from the log's header events; a step before the header (or not a whole number of steps)
  gives None, never a guessed iteration. Steps count from the run's start, not from the
  checkpoint it resumed from (``init_checkpoint_step``, 3,000 in the v3.0 log).
  ``timestamp_s`` is ``time_ms`` / 1000; there is no ``train_iters`` (a run stops when it
  reaches its target evaluation loss).
* ``tracked_stats`` events with ``validation_step_timing``, ``validation_epoch_timing``,
  ``train_epoch_timing`` or ``throughput`` are not training steps (None).
* ``init_start`` (the first one: every rank prints it), ``init_stop``, ``run_start``,
  ``eval_start``, ``eval_stop`` and ``run_stop`` give None and, with a context, a ``LogEvent``
  at ``time_ms`` and the last training iteration read; every event's ``time_ms`` counts towards
  the log's first and last timestamp. Other keys (submission and optimizer settings,
  ``block_*``, ``epoch_*``, ``eval_accuracy``, ``cache_clear``) give None.

Without a context no line gives a record: the iteration cannot be known from one line.
"""

from __future__ import annotations

import math
from typing import Any, Final

from adapters.logs import values
from adapters.logs.context import LogContext, LogEvent
from planner.specs.job import ProgressRecord

MARKER: Final = ":::MLLOG"
_EVENTS: Final = frozenset(
    {"init_start", "init_stop", "run_start", "eval_start", "eval_stop", "run_stop"}
)


def parse_mllog(text: str, context: LogContext | None) -> ProgressRecord | None:
    """The record of one ``:::MLLOG`` line, or None; updates ``context`` (see module doc).

    Raises ``values.InvalidLineError`` (or ValueError) for absurd values in a training step.
    """
    start = text.find(MARKER)
    if start < 0:
        return None
    obj = values.json_object(text[start + len(MARKER) :].strip())
    if obj is None or context is None:
        return None
    key = obj.get("key")
    time_s = _time_s(obj.get("time_ms"))
    context.observe_time(time_s)
    if key == "tracked_stats":
        return _train_step(obj, time_s, context)
    if key == "global_batch_size":
        context.mlperf_global_batch_size = _count(obj.get("value"))
    elif key == "max_sequence_length":
        context.mlperf_sequence_length = _count(obj.get("value"))
    elif key in _EVENTS and not (
        key == "init_start" and any(e.name == "init_start" for e in context.events)
    ):
        context.events.append(
            LogEvent(name=str(key), timestamp_s=time_s, iteration=context.mlperf_last_iteration)
        )
    return None


def _train_step(
    obj: dict[str, Any], time_s: float | None, context: LogContext
) -> ProgressRecord | None:
    value, metadata = obj.get("value"), obj.get("metadata")
    if not isinstance(value, dict) or not isinstance(metadata, dict):
        return None
    timing = value.get("train_step_timing")
    if timing is None:
        return None
    tokens = _number(metadata.get("step"))
    batch, sequence = context.mlperf_global_batch_size, context.mlperf_sequence_length
    if tokens is None or batch is None or sequence is None:
        return None
    per_step = batch * sequence
    steps = tokens / per_step
    if tokens % per_step != 0:
        return None
    step_s = _number(timing)
    if step_s is None:
        raise values.InvalidLineError
    record = ProgressRecord(
        iteration=values.iteration(steps),
        step_time_s=values.step_time(step_s),
        timestamp_s=time_s,
        loss=values.finite(_number(value.get("reduced_train_loss"))),
        framework="mlperf",
    )
    context.mlperf_last_iteration = record.iteration
    return record


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _count(value: object) -> int | None:
    number = _number(value)
    if number is None or not math.isfinite(number) or number < 1 or number != int(number):
        return None
    return int(number) if number < values.MAX_ITERATION else None


def _time_s(value: object) -> float | None:
    ms = _number(value)
    return values.epoch_s(ms / 1000.0) if ms is not None else None
