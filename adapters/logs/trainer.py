"""The Hugging Face Trainer's console output: its training tqdm bar, timed by the bar's own clock;
used by ``adapters.logs.parsers.parse_line`` (needs a ``LogContext``).

What the Trainer prints (transformers ``src/transformers/trainer_callback.py``, class
``ProgressCallback``, commit 55093b758b338fdc7903e778509523d755ae080d; ``src/transformers/
trainer.py``, commit 2cda12cbf6e476183e68ec476551fa7e3717394a):

* ``***** Running training *****`` then ``  Total optimization steps = {max_steps:,}`` (Python
  logging at INFO, once per ``train()`` call);
* the training bar, ``tqdm(total=state.max_steps)`` with no description, opened at
  ``on_train_begin`` on the main process and moved by ``state.global_step - current_step`` at
  each ``on_step_end`` (one bar step per optimizer step; a run resumed from a checkpoint jumps
  from 0 to its resumed step at its first update);
* ``***** Running Evaluation *****`` / ``***** Running Prediction *****`` before an evaluation
  loop, whose bar (``tqdm(total=len(eval_dataloader))``, no description either) looks like the
  training bar; when it closes, the training bar goes on from where it was with its own clock.

A tqdm refresh reads ``{pct}%|{bar}| {n}/{total} [{elapsed}<{remaining}, {rate}]``, ``elapsed``
being tqdm's ``format_interval`` of the seconds since the bar opened, truncated to the second:
``MM:SS`` or ``H:MM:SS`` (tqdm/tqdm ``tqdm/std.py``, commit
5dcab08071690868fd6289948d9e3451098478d3). tqdm writes its refreshes to a file with carriage
returns between them; ``read_log`` and ``LogTailer`` split lines there, so each refresh is read
as a line.

Rules (framework ``transformers``):

* **Which bar is training's**: the one whose total equals the last ``Total optimization steps``
  of the log (commas allowed), with nothing or a launcher's prefix (``0:``, ``[default0]:``)
  before it. Without that summary no bar is read: a description-less bar alone could be any
  loop's. After an evaluation or prediction announcement, bars are evaluation's until a reading
  of that total goes on from the training bar's last reading (count and elapsed time not
  smaller): an evaluation bar of the same total starts again from 0 and from 00:00. An
  evaluation before the first training step (``eval_on_start``: ``_inner_training_loop`` calls
  ``_evaluate`` right after ``on_train_begin`` opened the training bar, ``trainer.py`` above)
  has no training reading to go on from: its bars are evaluation's until its metrics line
  (``evaluate`` logs the metrics with ``speed_metrics``' ``{prefix}_runtime``, prefix ``eval``
  or ``eval_<dataset>``, ``src/transformers/trainer_utils.py`` commit
  c599e989ac5fdb9c641254bde826c04f2fc8ebcf; ``ProgressCallback.on_log`` writes them as a dict
  through the open training bar). Else an evaluation bar whose total equals the training
  total by accident would be read as training's, and its end would shut out the training bar.
* **Step time from the bar's clock, never tqdm's rate** (an exponential moving average): the
  difference of ``elapsed`` between two training readings over the optimizer steps between
  them: ``step_time_s = (elapsed1 - elapsed0) / (n1 - n0)``, ``num_iterations = n1 - n0``.
  Elapsed times are whole seconds (truncated), so a span is given only once it holds at least
  ``MIN_SPAN_S`` (the truncation is then at most a tenth of it; successive spans share their
  ends, so the error does not add up over a log), or at the bar's end (``n == total``); the
  readings in between give nothing.
* **No step time across start-up or an evaluation**: the first reading with a step (``n > 0``)
  starts the span and gives a record without a step time (its elapsed time holds start-up and,
  for a resumed run, the resumed steps); so does the first training reading after an
  evaluation (its elapsed time holds the evaluation).
* **Never beside a structured format, one or the other for the whole log**: the bar's records
  are held (``LogContext.bar_held``) until the bar has run ``ADOPT_S`` from its first training
  reading, or reached its end, with no other format's step line in the log (DeepSpeed engine
  lines do not count: they only lend their time); the bar is then adopted
  (``LogContext.bar_adopted``): its held records are given, in order, and later step lines of
  other formats are not read. A step line before that (JSON, Megatron-LM, torchtitan, ...)
  drops the held records and the bar is not read again: the log is read from its step lines.
  A whole log that ends before its bar was adopted gives the held records
  (``LogContext.finish``); a live reader, which cannot tell the end, gives them at the
  adoption, or when told the log is complete (``LogTailer.read(..., final=True)``: the service
  reads an ended job's log so), as the whole-log read does. So a live reader never gives
  records of both formats, and what it gives is what a whole-log read keeps.
"""

from __future__ import annotations

import re
from typing import Final

from adapters.logs import values
from adapters.logs.context import TRAINER_BAR, LogContext, TrainerBarState
from planner.specs.job import ProgressRecord

FRAMEWORK: Final = TRAINER_BAR
"""``ProgressRecord.framework`` of the Trainer bar's records."""
ADOPT_S: Final = 300.0
"""Bar time (s, from its first training reading) after which a bar no other format's step line
came beside is the log's progress (its records held until then): a judgement, not measured. A
script whose own step lines first come later than that (a logger every ``logging_steps``) is
read from its bar, which counts the same optimizer steps; the service's first ETA from a bar
comes that much bar time later."""
MIN_SPAN_S: Final = 10.0
"""Least bar time (s) one step time spans, but at the bar's end: elapsed times are truncated to
whole seconds, so a span of at least 10 s is off by under 10 % (tqdm ``format_interval``)."""

_TOTAL: Final = re.compile(r"\bTotal optimization steps = (?P<total>\d[\d,]*)")
_ANNOUNCEMENT: Final = re.compile(r"\*{5} Running (?P<what>training|Evaluation|Prediction) \*{5}")
# An evaluation's metrics, printed as a dict once it is over: ``'eval_runtime': 6.0`` (or
# ``'eval_<dataset>_runtime'`` for each of several evaluation datasets).
_RUNTIME: Final = "_runtime'"
_METRICS: Final = re.compile(r"'eval(?:_[^']*)?_runtime':")
# What a launcher puts before a rank's line: ``srun -l``'s ``0:``, torchrun's ``[default0]:``.
_LAUNCHER_PREFIX: Final = re.compile(r"\s*(?:\d+:|\[(?:default|rank)\d+\]:)?\s*")
_ELAPSED: Final = re.compile(r"\s*(?:(?P<h>\d+):)?(?P<m>\d{1,2}):(?P<s>\d{2})\s*")


def read_summary(text: str, context: LogContext | None) -> None:
    """Keep what a Trainer summary line says in ``context.trainer``: ``Running training`` starts
    a new training bar (total unknown until its ``Total optimization steps``), ``Running
    Evaluation`` / ``Prediction`` marks the bars that follow as evaluation's, its metrics line
    (``'eval_runtime'``) ends it."""
    if context is None or not ("*****" in text or "optimization steps" in text or _RUNTIME in text):
        return
    announced = _ANNOUNCEMENT.search(text)
    if announced is not None:
        if announced["what"] == "training":
            context.trainer = TrainerBarState()
        else:
            context.trainer.evaluating, context.trainer.evaluated = True, False
        return
    if _METRICS.search(text) is not None:
        context.trainer.evaluated = context.trainer.evaluating
        return
    summary = _TOTAL.search(text)
    if summary is not None:
        bar = context.trainer
        total = values.total(values.number(summary["total"]), 0)
        if total != bar.total:
            context.trainer = TrainerBarState(total=total, evaluating=bar.evaluating)


def read_bar(
    desc: str, n: str, total: str, elapsed: str, context: LogContext | None
) -> ProgressRecord | None:
    """The record of one refresh of a description-less tqdm bar (its ``desc``, count ``n``,
    ``total`` and ``elapsed`` fields as printed), or None: see the module doc."""
    if context is None or context.trainer.total is None or not total.isdigit():
        return None
    bar = context.trainer
    if int(total) != bar.total or context.frameworks - {FRAMEWORK}:
        return None
    if not _LAUNCHER_PREFIX.fullmatch(desc):
        return None
    clock = _ELAPSED.fullmatch(elapsed)
    if clock is None:
        return None
    reading = (
        values.iteration(float(n)),
        float(int(clock["h"] or 0) * 3600 + int(clock["m"]) * 60 + int(clock["s"])),
    )
    last = bar.last
    if last is not None and (reading[0] < last[0] or reading[1] < last[1]):
        return None  # not the training bar going on: an evaluation bar of the same total
    if last is None and bar.evaluating and not bar.evaluated:
        return None  # an evaluation before the first training step (eval_on_start) runs on
    if reading[0] == 0:
        return None  # the bar opened, no step yet
    bar.last = reading
    if bar.first_s is None:
        bar.first_s = reading[1]
    if reading[1] - bar.first_s >= ADOPT_S or reading[0] >= bar.total:
        context.bar_adopted = True
    if bar.anchor is None or bar.evaluating:
        resumed = bar.anchor is None or reading[0] > bar.anchor[0]
        bar.anchor, bar.evaluating = reading, False
        return _record(reading[0], bar.total, None, 1) if resumed else None
    steps = reading[0] - bar.anchor[0]
    span_s = reading[1] - bar.anchor[1]
    if steps <= 0 or (span_s < MIN_SPAN_S and reading[0] < bar.total):
        return None
    bar.anchor = reading
    return _record(reading[0], bar.total, span_s / steps if span_s > 0 else None, steps)


def _record(n: int, total: int, step_time_s: float | None, steps: int) -> ProgressRecord:
    return ProgressRecord(
        iteration=n,
        train_iters=values.total(float(total), n),
        step_time_s=values.step_time(step_time_s),
        num_iterations=steps,
        framework=FRAMEWORK,
    )
