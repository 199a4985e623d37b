"""modded-nanogpt's step lines (KellerJordan/modded-nanogpt ``train_gpt.py``, records of 2024-2025);
used by ``adapters.logs.parsers.parse_line``.

Formats (one per step on the master process; the log file starts with the script's own source):

* ``step:N/T [train_loss:X ]train_time:Tms step_avg:Ams``: step ``N`` of ``T`` done.
  ``train_time`` is the cumulative training time in ms, without validation (the script stops its
  clock around it) and restarted from zero after the 10 warm-up steps (``step:11`` prints only
  its own time); ``step_avg`` is ``train_time`` over the steps timed since that restart (``nan``
  for the first 12 steps).
* ``step:N/T val_loss:X train_time:Tms step_avg:Ams``: a validation result at step ``N``, not a
  training step: None, and a ``validation`` event with a context.

Record (framework ``modded-nanogpt``): ``iteration`` N, ``train_iters`` T, ``loss`` the
``train_loss`` when printed. The step time, with a context that holds the previous step line
(N', T'): (T - T') / (N - N') over ``num_iterations`` N - N', or T / (N - N') when the clock went
back (the restart after warm-up, just after line N'), so that the step times summed over a log add
up to its training time. Without one: ``step_avg`` over the ``round(T / A)`` steps it averages;
``train_time`` over one step for ``step:1``; else None. No timestamps.
"""

from __future__ import annotations

import math
import re
from typing import Final

from adapters.logs import values
from adapters.logs.context import LogContext, LogEvent
from planner.specs.job import ProgressRecord

_LINE: Final = re.compile(
    rf"\bstep:(?P<it>\d+)/(?P<total>\d+)\s+(?:(?P<kind>train_loss|val_loss):(?P<loss>{values.NUMBER})\s+)?"
    rf"train_time:(?P<ms>{values.NUMBER})ms\s+step_avg:(?P<avg>{values.NUMBER})ms"
)


def parse_nanogpt(text: str, context: LogContext | None) -> ProgressRecord | None:
    """The record of one modded-nanogpt step line, or None (see module doc).

    Raises ``values.InvalidLineError`` (or ValueError) for absurd values.
    """
    m = _LINE.search(text)
    if m is None:
        return None
    iteration = values.iteration(float(m["it"]))
    train_iters = values.total(float(m["total"]), iteration)
    train_ms = values.number(m["ms"])
    if not math.isfinite(train_ms) or train_ms < 0:
        raise values.InvalidLineError
    if m["kind"] == "val_loss":
        if context is not None:
            context.events.append(LogEvent(name="validation", iteration=iteration))
        return None
    step_s, num_iterations = _step_time(iteration, train_ms, values.number(m["avg"]), context)
    record = ProgressRecord(
        iteration=iteration,
        train_iters=train_iters,
        step_time_s=values.step_time(step_s),
        num_iterations=num_iterations,
        loss=values.finite(values.number(m["loss"])) if m["loss"] else None,
        framework="modded-nanogpt",
    )
    if context is not None:
        context.nanogpt_last = (iteration, train_ms)
    return record


def _step_time(
    iteration: int, train_ms: float, avg_ms: float, context: LogContext | None
) -> tuple[float | None, int]:
    """(mean step time in s or None, iterations it covers) of a step line."""
    last = context.nanogpt_last if context is not None else None
    if last is not None and iteration > last[0]:
        steps = iteration - last[0]
        spent_ms = train_ms - last[1] if train_ms >= last[1] else train_ms
        return spent_ms / steps / 1000.0, steps
    if math.isfinite(avg_ms) and avg_ms > 0:
        steps = min(max(round(train_ms / avg_ms), 1), max(iteration, 1))
        return avg_ms / 1000.0, steps
    if iteration == 1:
        return train_ms / 1000.0, 1
    return None, 1
