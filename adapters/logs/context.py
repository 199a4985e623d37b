"""What earlier lines of one log told the parsers: the state of multi-line log formats.

Some formats cannot be read one line at a time: MLPerf's MLLOG counts samples, tokens or epochs,
not steps, until its header has given the benchmark, the global batch, the sequence length and
the dataset's size (``MllogState``); DeepSpeed-Chat prints a step's
number and its time on two lines; modded-nanogpt prints a cumulative training time; Megatron-LM
averages its step time over the iterations since its previous line; DeepSpeed's engine prints
the wall-clock time of an iteration one line before Megatron-DeepSpeed prints the iteration.
A ``LogContext`` carries that state from line to line of one log; pass the same one to every
``adapters.logs.parsers.parse_line`` call on that log, in log order. It also collects the log's
events (evaluation, run start and stop) and the first and last time the log printed.

A reader that stops part-way and goes on later in another process (the service's
``LogTailer`` after a restart) keeps what later lines depend on with ``LogContext.carried``
(JSON text, stored with its ``TailCursor``) and goes on with ``LogContext.resumed``: the records
that follow are those one unbroken read gives.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Final

from planner.specs.job import ProgressRecord

TRAINER_BAR: Final = "transformers"
"""``ProgressRecord.framework`` of the Hugging Face Trainer bar's records
(``adapters.logs.trainer``)."""
MAX_BAR_HELD: Final = 64
"""Trainer bar records held at most before the bar is adopted (the oldest go first): a bar
gives one record per ``adapters.logs.trainer.MIN_SPAN_S`` of its clock, about 30 before
``ADOPT_S``; a log whose evaluations interrupt the bar every step could give one per step,
and the held records travel with every stored cursor."""
_CARRIED_VERSION: Final = 1
"""Shape of ``LogContext.carried``'s text; another (a later version's) resumes nothing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LogEvent:
    """Something a log says happened that is not a training step, in log order.

    ``name`` is one of ``init_start``, ``init_stop``, ``run_start``, ``run_stop``, ``eval_start``
    and ``eval_stop`` (MLPerf MLLOG interval events, ``timestamp_s`` from ``time_ms``), or
    ``validation`` (a validation result line of Megatron-LM or modded-nanogpt, no timestamp).
    ``iteration`` is the iteration the event happened at: the one the log names (validation) or
    the last training iteration read before it (MLLOG; None before the first).
    """

    name: str
    timestamp_s: float | None = None
    iteration: int | None = None


@dataclass(slots=True)
class MllogState:
    """What an MLPerf MLLOG log said before the current line (``adapters.logs.mlperf``).

    ``benchmark``: ``submission_benchmark``; ``global_batch_size`` and ``sequence_length``
    (``max_sequence_length``) from the header; ``epoch_samples``: ``train_samples`` logged before
    the first progress record (the dataset's size, what one epoch counts); ``count_unit``: the
    unit of the log's ``epoch_num`` and ``tracked_stats`` step counts once decided
    (``samples``, ``tokens`` or ``epochs``); ``first_epoch``: the ``epoch_num`` of the first
    ``epoch_start`` (0 when the log numbers its epochs from 0); ``steps_per_epoch``: decided at
    the first position in epochs; ``epoch_started``: the ``epoch_num`` and time of the current
    epoch's first ``epoch_start`` (every rank may print one); ``epoch_s``: how long the last
    whole epoch lasted; ``epoch_offset``: what to subtract from fractional epoch
    counts, decided at the first (None: none seen); ``trained``: the log stated the samples
    it trained; ``stopped``: ``run_stop`` was read;
    ``last_iteration``: the optimizer step of the last progress record (None before the first).
    """

    benchmark: str | None = None
    global_batch_size: int | None = None
    sequence_length: int | None = None
    epoch_samples: int | None = None
    count_unit: str | None = None
    first_epoch: float | None = None
    steps_per_epoch: float | None = None
    epoch_started: tuple[float | None, float | None] | None = None
    epoch_s: float | None = None
    epoch_offset: float | None = None
    trained: bool = False
    stopped: bool = False
    last_iteration: int | None = None


@dataclass(slots=True)
class TrainerBarState:
    """What a Hugging Face Trainer's console output said before the current line
    (``adapters.logs.trainer``).

    ``total``: the ``Total optimization steps`` of the last training summary (None: none yet, no
    bar is read); ``evaluating``: an evaluation or prediction was announced since the last
    training bar reading; ``last``: (count, elapsed s) of the last training bar reading;
    ``anchor``: (count, elapsed s) of the reading the next step time is measured from;
    ``first_s``: the elapsed time (s) of the first training reading with a step;
    ``evaluated``: the announced evaluation printed its metrics (it is over).
    """

    total: int | None = None
    evaluating: bool = False
    evaluated: bool = False
    last: tuple[int, float] | None = None
    anchor: tuple[int, float] | None = None
    first_s: float | None = None


@dataclass(slots=True)
class LogContext:
    """Parser state for one log, updated by ``parse_line(line, context=...)``; see module doc.

    Read-only for callers, except ``megatron_last_iteration``, which a reader resuming a log
    part-way may seed with the last Megatron-LM iteration it already consumed, and
    ``released``, which the reader empties (``adapters.logs.parsers.parse_lines`` does).
    """

    megatron_last_iteration: int | None = None
    """Iteration of the last Megatron-LM interval line (its step time averages since then)."""
    mllog: MllogState = field(default_factory=MllogState)
    trainer: TrainerBarState = field(default_factory=TrainerBarState)
    nanogpt_last: tuple[int, float] | None = None
    """(iteration, cumulative ``train_time`` in ms) of the last modded-nanogpt step line."""
    dschat_epochs: int | None = None
    dschat_batches_per_epoch: int | None = None
    dschat_pending: ProgressRecord | None = None
    """A DeepSpeed-Chat step whose ``E2E latency`` line has not been read yet."""
    deepspeed_stamp: tuple[int, float] | None = None
    """(iteration, epoch seconds) of the last DeepSpeed engine ``step=K`` line."""
    deepspeed_last_iteration: int | None = None
    frameworks: set[str] = field(default_factory=set)
    """Formats of the progress records read so far (DeepSpeed engine lines excluded; a Trainer
    bar's also while its records are held)."""
    bar_adopted: bool = False
    """The Trainer bar is the log's progress: it ran ``adapters.logs.trainer.ADOPT_S`` (or to
    its end) before any other format's step line; later step lines of other formats are not
    read."""
    bar_held: tuple[ProgressRecord, ...] = ()
    """Trainer bar records read before the bar was adopted: given once it is, dropped when
    another format's step line comes first."""
    released: list[ProgressRecord] = field(default_factory=list)
    """Records a line settled for earlier lines (held bar records, at the bar's adoption), to
    come before the record ``parse_line`` returns for that line; the reader empties it."""
    totals: dict[str, int] = field(default_factory=dict)
    """Last iteration total stated per format."""
    events: list[LogEvent] = field(default_factory=list)
    first_timestamp_s: float | None = None
    last_timestamp_s: float | None = None

    def observe_time(self, timestamp_s: float | None) -> None:
        """Widen the span of times the log printed with ``timestamp_s`` (None: no-op)."""
        if timestamp_s is None:
            return
        if self.first_timestamp_s is None or timestamp_s < self.first_timestamp_s:
            self.first_timestamp_s = timestamp_s
        if self.last_timestamp_s is None or timestamp_s > self.last_timestamp_s:
            self.last_timestamp_s = timestamp_s

    def finish(self) -> list[ProgressRecord]:
        """Records held back for a line that never came, at the end of the log (a DeepSpeed-Chat
        step without its ``E2E latency`` line, settled as ``settle`` does; Trainer bar records
        of a log that ended before its bar was adopted, no other format having given steps);
        empties the holds.
        """
        held, self.bar_held = self.bar_held, ()
        pending, self.dschat_pending = self.dschat_pending, None
        settled = self.settle(pending) if pending is not None else None
        return [*held, *([settled] if settled is not None else [])]

    def settle(self, record: ProgressRecord) -> ProgressRecord | None:
        """The record as the log means it, given what came before; None when it only carries a
        time for the next record (see ``adapters.logs.parsers``, "Reading a whole log").
        """
        if record.framework == "deepspeed":
            return self._settle_deepspeed(record)
        if self.bar_adopted and record.framework != TRAINER_BAR:
            return None  # the log's progress is its Trainer bar's (adapters.logs.trainer)
        if record.framework == "megatron":
            last = self.megatron_last_iteration
            if last is not None and record.iteration > last:
                record = dataclasses.replace(record, num_iterations=record.iteration - last)
            self.megatron_last_iteration = record.iteration
        stamp = self.deepspeed_stamp
        if record.timestamp_s is None and stamp is not None and stamp[0] == record.iteration:
            record = dataclasses.replace(record, timestamp_s=stamp[1])
            self.deepspeed_stamp = None
        if record.train_iters is not None:
            self.totals[record.framework] = record.train_iters
        else:
            known = self.totals.get(record.framework)
            if known is not None and known >= record.iteration:
                record = dataclasses.replace(record, train_iters=known)
        self.frameworks.add(record.framework)
        self.observe_time(record.timestamp_s)
        if record.framework != TRAINER_BAR:
            self.bar_held = ()  # another format's steps: the bar is not the log's progress
            return record
        if not self.bar_adopted:
            self.bar_held = (*self.bar_held[-(MAX_BAR_HELD - 1) :], record)
            return None
        self.released.extend(self.bar_held)
        self.bar_held = ()
        return record

    def carried(self) -> str | None:
        """What lines after the last one read depend on (format state, formats and totals seen,
        held records; not the events, the times printed, ``megatron_last_iteration`` nor
        ``released``), as compact JSON text for ``resumed``; None when that is nothing."""
        state: dict[str, object] = {}
        for name in ("mllog", "trainer"):
            changed = _changed(getattr(self, name))
            if changed:
                state[name] = changed
        for name in (
            "nanogpt_last",
            "dschat_epochs",
            "dschat_batches_per_epoch",
            "deepspeed_stamp",
            "deepspeed_last_iteration",
        ):
            if getattr(self, name) is not None:
                state[name] = getattr(self, name)
        if self.dschat_pending is not None:
            state["dschat_pending"] = _record_doc(self.dschat_pending)
        if self.frameworks:
            state["frameworks"] = sorted(self.frameworks)
        if self.totals:
            state["totals"] = self.totals
        if self.bar_adopted:
            state["bar_adopted"] = True
        if self.bar_held:
            state["bar_held"] = [_record_doc(record) for record in self.bar_held]
        if not state:
            return None
        return json.dumps({"version": _CARRIED_VERSION, **state}, separators=(",", ":"))

    @classmethod
    def resumed(cls, carried: str | None) -> LogContext:
        """A context going on where the one whose ``carried`` gave ``carried`` stopped (None,
        text of another version or not of ``carried``: a fresh context)."""
        try:
            state: Any = json.loads(carried) if carried is not None else None
            if not isinstance(state, dict) or state.pop("version", None) != _CARRIED_VERSION:
                return cls()
            pending = state.pop("dschat_pending", None)
            return cls(
                mllog=MllogState(**_tuples(state.pop("mllog", {}))),
                trainer=TrainerBarState(**_tuples(state.pop("trainer", {}))),
                dschat_pending=None if pending is None else ProgressRecord(**pending),
                frameworks=set(state.pop("frameworks", ())),
                totals=dict(state.pop("totals", {})),
                bar_held=tuple(ProgressRecord(**r) for r in state.pop("bar_held", ()))[
                    -MAX_BAR_HELD:
                ],
                **_tuples(state),
            )
        except (ValueError, TypeError, AttributeError, RecursionError):
            return cls()

    def _settle_deepspeed(self, record: ProgressRecord) -> ProgressRecord | None:
        if record.timestamp_s is not None:
            self.deepspeed_stamp = (record.iteration, record.timestamp_s)
            self.observe_time(record.timestamp_s)
        if self.frameworks or record.iteration == self.deepspeed_last_iteration:
            return None  # another format reports the steps, or a second engine's same step
        self.deepspeed_last_iteration = record.iteration
        return record


def _changed(state: MllogState | TrainerBarState) -> dict[str, object]:
    """The fields of a format's state that differ from a fresh one's."""
    fresh = type(state)()
    return {
        f.name: getattr(state, f.name)
        for f in dataclasses.fields(state)
        if getattr(state, f.name) != getattr(fresh, f.name)
    }


def _record_doc(record: ProgressRecord) -> dict[str, object]:
    """A record's fields but those it leaves empty."""
    return {k: v for k, v in dataclasses.asdict(record).items() if v is not None}


def _tuples(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with its JSON arrays back as the tuples they were (one level deep)."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in doc.items()}
