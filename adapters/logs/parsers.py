"""Training-progress parsers for the log formats LLM training frameworks print; pure, no I/O.

``parse_line`` tries each known format on one line and returns a ``ProgressRecord`` or None. It
never raises for any input: garbage, partial, binary or absurd lines give None.

Formats recognised (``ProgressRecord.framework`` in brackets):

* **Megatron-LM** (``megatron``): the ``training_log`` line of ``megatron/training/training.py``,
  one per ``--log-interval``, from 2019 versions (no timestamp, no consumed samples) to current
  ones (``[YYYY-MM-DD HH:MM:SS]`` prefix, ``throughput per GPU (TFLOP/s/GPU)``, ``skipped
  samples``, ``decoupled learning rate``, ``num zeros``, ``params norm``), and the
  Megatron-DeepSpeed variant (``consumed tokens``, ``samples per second``, ``TFLOPs``). The
  ``iteration N/ TOTAL |`` head is searched anywhere in the line, so launcher prefixes
  (``srun -l``'s ``0: ``, torchrun's ``[default0]:``) are fine. ``step_time_s`` is ``elapsed time
  per iteration (ms)``, the mean over the iterations since the previous log line; the parser sets
  ``num_iterations=1`` and ``adapters.logs.tail.LogTailer`` replaces it with the difference to the
  previous iteration when it knows it. ``loss`` is ``lm loss`` (else the first other ``... loss``
  field).
* **NeMo 2 progress printer** (``nemo``): ``Training epoch 0, iteration 20/99 | lr: ... |
  global_step: 20 | reduced_train_loss: 11.03 | train_step_timing in s: 3.553 | ...``;
  ``step_time_s`` from ``train_step_timing in s`` (or ``train_step_timing``).
* **torchtitan** (``torchtitan``): ``step: 10  loss:  9.5  [grad_norm: ..]  memory:
  30.1GiB(38.00%)  tps: 5,123  tflops: 250.1  mfu: 25.3%`` (``wps`` in older versions), with or
  without ANSI colours and with its logger prefix ``[titan] 2025-01-01 12:00:00,000 - root -
  INFO -``. The line has no step time (``tps`` is tokens per second *per device*, and tokens per
  step per device is not on the line), so ``step_time_s`` is None and ``tokens_per_s`` carries
  ``tps`` as printed; consecutive timestamps give the rate (``planner.forecast.observations``).
  torchtitan's start line ``Training starts at step S`` gives a record with ``iteration=S-1``
  and no step time; its ``train_iters`` is the ``total steps T`` on that line (older versions)
  or, with a context, on the ``Trainer is initialized with ... total steps T`` line before it.
* **PyTorch Lightning / NeMo progress bar** (``lightning``): tqdm lines such as
  ``Epoch 0:  45%|████▌     | 450/1000 [02:30<03:03, 3.00it/s, v_num=1, reduced_train_loss=3.2,
  global_step=449.0, train_step_timing in s=0.33]``. ``iteration`` is ``global_step + 1`` when
  the bar shows ``global_step`` (Lightning logs it before the optimizer step completes);
  otherwise the bar count ``n`` in epoch 0 (with ``train_iters`` the bar total; the bar counts
  batches, which equal optimizer steps only without gradient accumulation); later epochs without
  ``global_step`` give None. ``step_time_s`` is ``train_step_timing in s`` (NeMo) when present,
  else the inverse of tqdm's rate (an exponential moving average, tqdm's ``smoothing=0.3``).
  Validation bars are ignored.
* **Hugging Face Trainer bar** (``transformers``; needs a context; ``adapters.logs.trainer``):
  the Trainer's description-less training tqdm bar, the one whose total is the ``Total
  optimization steps`` of its ``***** Running training *****`` summary (no summary: not read),
  evaluation bars left out; ``iteration`` is its count, ``step_time_s`` the difference of its
  ``elapsed`` field between two readings over the steps between them (never tqdm's smoothed
  rate). One or the other for a whole log: its records are held until the bar has run a while
  with no other format's step line (then those are no longer read), dropped if one comes first.
* **torchtune bar** (``torchtune``): its recipes describe their tqdm bar as ``{epoch}|{global
  step}|Loss: {loss}``; ``iteration`` is the global step (the bar's count restarts each epoch),
  ``step_time_s`` the inverse of tqdm's rate (one bar step per optimizer step).
* **Structured JSON** (framework from the object's ``framework`` key, else ``json``): one JSON
  object on the line, optionally after a prefix. ``event``, when present, must be ``step``,
  ``train_step``, ``progress`` or ``iteration``. Accepted keys (first found wins):

  ============== ====================================================================
  field          keys
  ============== ====================================================================
  iteration      ``iteration``, ``step``, ``iter``, ``global_step`` (required)
  train_iters    ``train_iters``, ``total_steps``, ``max_steps``, ``total_iters``
  step_time_s    ``step_time_s``, ``iteration_time_s``, ``step_time`` (seconds);
                 ``step_time_ms``, ``elapsed_time_per_iteration_ms`` (milliseconds)
  num_iterations ``num_iterations`` (iterations the step time averages; default 1)
  timestamp_s    ``time_s``, ``timestamp_s``, ``timestamp``, ``time``, ``ts``: epoch seconds,
                 or an ISO 8601 string
  loss           ``loss``, ``lm_loss``, ``train_loss``
  tokens_per_s   ``tokens_per_s``, ``tokens_per_second``, ``tps``
  ============== ====================================================================

* **Per-rank timings** (``rank_step``): every rank of a job may print, once per logging
  interval, ``{"event": "rank_step", "iteration": 100, "rank": 3, "world_size": 8,
  "compute_time_s": 0.51, "step_time_s": 0.62, "num_iterations": 10, "node": "gpu-17"}``:
  its mean forward+backward time per iteration without gradient-synchronisation waits
  (``compute_time_s``, required), its mean wall time per iteration (``step_time_s``), the
  iterations averaged and its host. These feed live straggler detection
  (``planner.specs.job.RankStepRecord``); ``deploy/dev/tiny_gpt/train.py`` prints them.
* **MLPerf MLLOG** (``mlperf``; ``adapters.logs.mlperf``): ``:::MLLOG {json}`` events of the
  MLPerf Training result logs of every round since v1.0; one record per event that reaches a new
  position in samples, tokens or epochs (training statistics, evaluations, epoch ends), as
  optimizer steps (needs a context).
* **modded-nanogpt** (``modded-nanogpt``; ``adapters.logs.nanogpt``): ``step:N/T
  [train_loss:X ]train_time:Tms step_avg:Ams``; validation lines are not steps.
* **DeepSpeed engine** (``deepspeed``) and **DeepSpeed-Chat** (``deepspeed-chat``;
  ``adapters.logs.deepspeed``): ``[Rank 0] step=K, skipped=S, lr=...`` progress lines and the
  RLHF ``epoch: E|step: N|...`` and ``|E2E latency=Xs |...`` lines.

Reading a whole log: a ``adapters.logs.context.LogContext`` passed to every call on one log, in
order, lets lines use what earlier lines said. With it: MLLOG positions become optimizer steps;
modded-nanogpt steps take their time from the previous step line; DeepSpeed-Chat steps are
given with their ``E2E latency`` (``LogContext.finish`` gives a last step that has none);
DeepSpeed engine lines, once another format reports steps, give None and lend their time to
that format's record of the same iteration; a Megatron-LM record's ``num_iterations`` is the
difference with the previous Megatron-LM iteration (1 for the first, and after a restart from a
checkpoint); a record without ``train_iters`` takes the last one its format stated (torchtitan);
the Hugging Face Trainer's training bar is told from its evaluation bars and timed
(``adapters.logs.trainer``);
validation and MLLOG run events are collected as ``LogEvent`` and every time a line starts with
widens ``first_timestamp_s``..``last_timestamp_s``. ``adapters.logs.reading.read_log`` and
``adapters.logs.tail.LogTailer`` read this way.

Values are validated: a negative, zero-or-less, NaN or infinite iteration count, step time or
iteration total, a total smaller than the iteration, or a step time above 10^6 s make the whole
line None. A step time printed as exactly zero (Megatron's ``.1f`` rounding of a sub-0.05 ms step)
keeps the record with ``step_time_s=None``. A non-finite loss or token rate, or a timestamp outside
2001-2286, only clears that field.

Timestamps printed without a zone (Megatron's ``datetime.now()``, Python logging's ``asctime``)
are read in ``tz``: the caller's choice, by default the host's local zone (as Python's
``datetime.timestamp`` reads naive times), since jobs print their node's local time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from datetime import tzinfo
from typing import Any, Final

from adapters.logs import trainer, values
from adapters.logs.context import LogContext, LogEvent
from adapters.logs.deepspeed import parse_deepspeed
from adapters.logs.mlperf import MARKER as _MLLOG_MARKER
from adapters.logs.mlperf import parse_mllog
from adapters.logs.nanogpt import parse_nanogpt
from planner.specs.job import ProgressRecord, RankStepRecord

MAX_LINE_CHARS: Final = 65_536
"""Lines longer than this (after decoding) are not parsed: no training log line is that long."""

# Megatron-LM and NeMo 2's progress printer: "iteration      100/  500000 |" then "key: value |".
_PIPE_HEAD = re.compile(r"\biteration\s+(?P<it>\d+)\s*/\s*(?P<total>\d+)\s*\|")
_MEGATRON_KEYS: Final = (
    "elapsed time per iteration (ms)",
    "consumed samples",
    "learning rate",
)
_NEMO_HEAD = re.compile(r"\bepoch\s+\d+,\s*$", re.IGNORECASE)
_VALIDATION = re.compile(r"\bvalidation loss at iteration (?P<it>\d+)\s*\|")

# torchtitan: "step: 10  loss:  9.5 ..."
_TITAN_STEP = re.compile(
    rf"\bstep:\s*(?P<step>\d+)\s+loss:\s*(?P<loss>{values.NUMBER})", re.IGNORECASE
)
_TITAN_FIELD = re.compile(rf"\b(?P<key>tps|wps|grad_norm):\s*(?P<value>{values.NUMBER})")
_TITAN_START = re.compile(
    r"Training starts at step (?P<step>\d+)\b(?:.*?\btotal steps (?P<total>\d+))?", re.IGNORECASE
)
_TITAN_INIT = re.compile(
    r"Trainer is initialized with\b.*?\btotal steps (?P<total>\d+)", re.IGNORECASE
)

# torchtune's recipes describe their bar as "{epoch}|{global step}|Loss: {loss}".
_TUNE_DESC = re.compile(
    rf"(?:^|\s)(?P<epoch>\d+)\|(?P<step>\d+)\|Loss:\s*(?P<loss>{values.NUMBER})"
)

# tqdm bar as Lightning formats it:
# "{desc}: {pct}%|{bar}| {n}/{total} [{elapsed}<{left}, {rate}{postfix}]"
_BAR = re.compile(
    r"(?P<desc>[^|\r\n]*?)\s*(?P<pct>\d{1,3})%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+|\?)\s*"
    r"\[(?P<elapsed>[^<\],]*)(?:<(?P<left>[^,\]]*))?,\s*(?P<rate>[\d.]+|\?)\s*(?P<unit>it/s|s/it)"
    r"(?P<postfix>[^\]]*)\]"
)
_EPOCH = re.compile(r"\bEpoch\s+(?P<epoch>\d+)\b")

_JSON_EVENTS: Final = frozenset({"step", "train_step", "progress", "iteration"})
_JSON_ITERATION: Final = ("iteration", "step", "iter", "global_step")
_JSON_TOTAL: Final = ("train_iters", "total_steps", "max_steps", "total_iters")
_JSON_STEP_S: Final = ("step_time_s", "iteration_time_s", "step_time")
_JSON_STEP_MS: Final = ("step_time_ms", "elapsed_time_per_iteration_ms")
_JSON_TIME: Final = ("time_s", "timestamp_s", "timestamp", "time", "ts")
_JSON_LOSS: Final = ("loss", "lm_loss", "train_loss")
_JSON_TOKENS: Final = ("tokens_per_s", "tokens_per_second", "tps")


Record = ProgressRecord | RankStepRecord
"""What one line can carry: job progress, or one rank's timing (``rank_step`` JSON lines)."""


def parse_line(
    line: str, *, tz: tzinfo | None = None, context: LogContext | None = None
) -> Record | None:
    """Parse one log line into a progress record, or None when it carries no training progress.

    ``line`` may hold carriage-return separated progress-bar updates; the last one that parses
    wins. ANSI colour codes are ignored. ``tz`` is the zone of timestamps printed without one
    (None: the host's local zone). ``context`` is the state of the log the line comes from
    (``LogContext``; None: the line is read on its own), updated by the call: see "Reading a
    whole log" in the module doc. Never raises.
    """
    if len(line) > MAX_LINE_CHARS or not line:
        return None
    if context is not None:
        context.observe_time(values.leading_timestamp(values.ANSI.sub("", line).lstrip(), tz))
    for segment in reversed(line.split("\r")):
        record = _parse_segment(segment, tz, context)
        if record is not None:
            if context is not None and isinstance(record, ProgressRecord):
                return context.settle(record)
            return record
    return None


def parse_lines(
    lines: Iterable[str], *, tz: tzinfo | None = None, context: LogContext
) -> list[Record]:
    """The records of consecutive ``lines`` of one log (``parse_line`` on each with ``context``),
    in log order, with those a line settled for earlier ones (``LogContext.released``: Trainer
    bar records held until the bar was adopted) before its own."""
    records: list[Record] = []
    for line in lines:
        record = parse_line(line, tz=tz, context=context)
        if context.released:
            records.extend(context.released)
            context.released.clear()
        if record is not None:
            records.append(record)
    return records


def _parse_segment(segment: str, tz: tzinfo | None, context: LogContext | None) -> Record | None:
    text = values.ANSI.sub("", segment).strip()
    if not text or "\x00" in text:
        return None
    parsers: tuple[Callable[[str, tzinfo | None, LogContext | None], Record | None], ...] = (
        (_parse_mllog,) if _MLLOG_MARKER in text else _PARSERS
    )
    for parser in parsers:
        try:
            record = parser(text, tz, context)
        except (values.InvalidLineError, ValueError, OverflowError, TypeError, RecursionError):
            return None
        if record is not None:
            return record
    return None


def _parse_mllog(text: str, tz: tzinfo | None, context: LogContext | None) -> Record | None:
    return parse_mllog(text, context)


def _parse_nanogpt(text: str, tz: tzinfo | None, context: LogContext | None) -> Record | None:
    return parse_nanogpt(text, context)


def _megatron_validation(text: str, tz: tzinfo | None, context: LogContext | None) -> Record | None:
    """Megatron-LM's ``validation loss at iteration N | ...`` line: None, and an event."""
    m = _VALIDATION.search(text)
    if m is not None and context is not None:
        name = "validation"
        context.events.append(LogEvent(name=name, iteration=values.iteration(float(m["it"]))))
    return None


# --- Megatron-LM and NeMo 2 progress printer ------------------------------------------------


def _pipe_fields(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for part in text.split("|"):
        key, sep, value = part.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    return fields


def _parse_pipe(
    text: str, tz: tzinfo | None, context: LogContext | None = None
) -> ProgressRecord | None:
    head = _PIPE_HEAD.search(text)
    if head is None:
        return None
    fields = _pipe_fields(text[head.end() :])
    iteration = values.iteration(float(head["it"]))
    train_iters = values.total(float(head["total"]), iteration)
    prefix = text[: head.start()]
    if any(key in fields for key in _MEGATRON_KEYS):
        framework = "megatron"
        ms = fields.get("elapsed time per iteration (ms)")
        step_time_s = values.step_time(values.number(ms) / 1000.0) if ms is not None else None
        loss_key = "lm loss" if "lm loss" in fields else _first_loss_key(fields)
    elif _NEMO_HEAD.search(prefix) or "train_step_timing in s" in fields:
        framework = "nemo"
        timing = fields.get("train_step_timing in s", fields.get("train_step_timing"))
        step_time_s = values.step_time(values.number(timing)) if timing is not None else None
        loss_key = next(
            (k for k in ("reduced_train_loss", "train_loss", "loss") if k in fields), None
        )
    else:
        return None
    loss = values.finite(values.number(fields[loss_key])) if loss_key is not None else None
    return ProgressRecord(
        iteration=iteration,
        train_iters=train_iters,
        step_time_s=step_time_s,
        num_iterations=1,
        timestamp_s=values.timestamp(prefix, tz),
        loss=loss,
        framework=framework,
    )


def _first_loss_key(fields: Mapping[str, str]) -> str | None:
    for key in fields:
        if key.endswith("loss") and key != "loss scale":
            return key
    return None


# --- torchtitan -----------------------------------------------------------------------------


def _parse_torchtitan(
    text: str, tz: tzinfo | None, context: LogContext | None = None
) -> ProgressRecord | None:
    m = _TITAN_STEP.search(text)
    if m is None:
        start = _TITAN_START.search(text)
        if start is None:
            _torchtitan_total(text, context)
            return None
        step = values.iteration(float(start["step"]))
        if step < 1:
            raise values.InvalidLineError
        total = float(start["total"]) if start["total"] is not None else None
        return ProgressRecord(
            iteration=step - 1,
            train_iters=values.total(total, step - 1),
            timestamp_s=values.timestamp(text[: start.start()], tz),
            framework="torchtitan",
        )
    iteration = values.iteration(float(m["step"]))
    tokens_per_s: float | None = None
    for field in _TITAN_FIELD.finditer(text, m.end()):
        if field["key"] in ("tps", "wps"):
            tokens_per_s = values.positive(values.number(field["value"]))
    return ProgressRecord(
        iteration=iteration,
        timestamp_s=values.timestamp(text[: m.start()], tz),
        loss=values.finite(values.number(m["loss"])),
        tokens_per_s=tokens_per_s,
        framework="torchtitan",
    )


def _torchtitan_total(text: str, context: LogContext | None) -> None:
    """Current torchtitan states its total on ``Trainer is initialized with ... total steps T``
    and no longer on its start line: keep it for the records that follow (``LogContext.totals``).
    """
    if context is None or "initialized" not in text:
        return
    init = _TITAN_INIT.search(text)
    total = values.total(float(init["total"]), 0) if init is not None else None
    if total is not None:
        context.totals["torchtitan"] = total


# --- Lightning / NeMo tqdm bar --------------------------------------------------------------


def _bar_postfix(postfix: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for part in postfix.split(","):
        key, sep, value = part.partition("=")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


def _parse_bar(
    text: str, tz: tzinfo | None, context: LogContext | None = None
) -> ProgressRecord | None:
    m = _BAR.search(text) if "%|" in text else None  # the check spares a slow search
    if m is None:
        trainer.read_summary(text, context)
        return None
    epoch = _EPOCH.search(m["desc"])
    if epoch is None:
        # not Lightning's: torchtune's bar, else the Hugging Face Trainer's training bar (told
        # from its evaluation bars by its summary, timed by its elapsed field), else a
        # validation, test or predict bar
        tune = _TUNE_DESC.search(text, 0, m.start("pct"))
        if tune is not None:
            return ProgressRecord(
                iteration=values.iteration(float(tune["step"])),
                step_time_s=_bar_step_time(m),
                loss=values.finite(values.number(tune["loss"])),
                framework="torchtune",
            )
        record = trainer.read_bar(m["desc"], m["n"], m["total"], m["elapsed"], context)
        # the Trainer's logger writes on after a bar refresh without a line end of its own
        trainer.read_summary(text[m.end() :], context)
        return record
    fields = _bar_postfix(m["postfix"])
    step_time_s: float | None
    timing = fields.get("train_step_timing in s", fields.get("train_step_timing"))
    if timing is not None:
        step_time_s = values.step_time(values.number(timing))
    else:
        step_time_s = _bar_step_time(m)
    train_iters: int | None = None
    if "global_step" in fields:
        iteration = values.iteration(values.number(fields["global_step"]) + 1.0)
    elif int(epoch["epoch"]) == 0:
        iteration = values.iteration(float(m["n"]))
        if m["total"] != "?":
            train_iters = values.total(float(m["total"]), iteration)
    else:
        return None
    loss_key = next(
        (k for k in ("reduced_train_loss", "train_loss", "train_loss_step", "loss") if k in fields),
        None,
    )
    return ProgressRecord(
        iteration=iteration,
        train_iters=train_iters,
        step_time_s=step_time_s,
        timestamp_s=values.timestamp(text[: m.start("pct")], tz),
        loss=values.finite(values.number(fields[loss_key])) if loss_key is not None else None,
        framework="lightning",
    )


def _bar_step_time(m: re.Match[str]) -> float | None:
    """Seconds per bar step from tqdm's rate (an exponential moving average, ``smoothing=0.3``)."""
    if m["rate"] == "?":
        return None
    rate = values.number(m["rate"])
    per_it = rate if m["unit"] == "s/it" else (1.0 / rate if rate > 0 else 0.0)
    return values.step_time(per_it)


# --- structured JSON ------------------------------------------------------------------------


def _parse_json(text: str, tz: tzinfo | None, context: LogContext | None = None) -> Record | None:
    start = text.find("{")
    if start < 0 or not text.endswith("}"):
        return None
    obj = values.json_object(text[start:])
    if obj is None:
        return None
    event = obj.get("event")
    if event == "rank_step":
        return _rank_step(obj, tz)
    if event is not None and event not in _JSON_EVENTS:
        return None
    raw_iteration = _json_number(obj, _JSON_ITERATION)
    if raw_iteration is None:
        return None
    iteration = values.iteration(raw_iteration)
    step_s = _json_number(obj, _JSON_STEP_S)
    if step_s is None:
        step_ms = _json_number(obj, _JSON_STEP_MS)
        step_s = step_ms / 1000.0 if step_ms is not None else None
    raw_n = _json_number(obj, ("num_iterations",))
    num_iterations = 1 if raw_n is None else values.iteration(raw_n)
    if num_iterations < 1:
        raise values.InvalidLineError
    framework = obj.get("framework")
    return ProgressRecord(
        iteration=iteration,
        train_iters=values.total(_json_number(obj, _JSON_TOTAL), iteration),
        step_time_s=values.step_time(step_s),
        num_iterations=num_iterations,
        timestamp_s=_json_time(obj, tz),
        loss=values.finite(_json_optional(obj, _JSON_LOSS)),
        tokens_per_s=values.positive(_json_optional(obj, _JSON_TOKENS)),
        framework=framework if isinstance(framework, str) and framework else "json",
    )


def _rank_step(obj: Mapping[str, Any], tz: tzinfo | None) -> RankStepRecord | None:
    """A ``rank_step`` line: one rank's timing of one logging interval (see the module doc)."""
    iteration = _json_number(obj, ("iteration",))
    rank = _json_number(obj, ("rank",))
    world = _json_number(obj, ("world_size",))
    compute_s = _json_number(obj, ("compute_time_s",))
    if iteration is None or rank is None or world is None or compute_s is None:
        return None
    rank_i, world_i = values.iteration(rank), values.iteration(world)
    if rank_i >= world_i:
        raise values.InvalidLineError
    compute = values.step_time(compute_s)
    if compute is None:
        return None
    raw_n = _json_number(obj, ("num_iterations",))
    num_iterations = 1 if raw_n is None else values.iteration(raw_n)
    if num_iterations < 1:
        raise values.InvalidLineError
    node = obj.get("node")
    return RankStepRecord(
        iteration=values.iteration(iteration),
        rank=rank_i,
        world_size=world_i,
        compute_time_s=compute,
        step_time_s=values.step_time(_json_optional(obj, ("step_time_s",))),
        num_iterations=num_iterations,
        timestamp_s=_json_time(obj, tz),
        node=node if isinstance(node, str) and node else None,
    )


def _json_number(obj: Mapping[str, Any], keys: tuple[str, ...]) -> float | None:
    """The first of ``keys`` present in ``obj`` as a float; InvalidLineError for a non-number."""
    for key in keys:
        if key in obj and obj[key] is not None:
            value = obj[key]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise values.InvalidLineError
            return float(value)
    return None


def _json_optional(obj: Mapping[str, Any], keys: tuple[str, ...]) -> float | None:
    """Like ``_json_number`` for an optional field: a non-number gives None, not an error."""
    try:
        return _json_number(obj, keys)
    except values.InvalidLineError:
        return None


def _json_time(obj: Mapping[str, Any], tz: tzinfo | None) -> float | None:
    for key in _JSON_TIME:
        value = obj.get(key)
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            return values.epoch_s(float(value))
        if isinstance(value, str):
            return values.timestamp(value, tz)
        return None
    return None


_PARSERS: Final[tuple[Callable[[str, tzinfo | None, LogContext | None], Record | None], ...]] = (
    _parse_json,
    _parse_pipe,
    _parse_torchtitan,
    _parse_bar,
    _parse_nanogpt,
    parse_deepspeed,
    _megatron_validation,
)
