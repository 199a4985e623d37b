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
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from planner.specs.job import ProgressRecord


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
    ``anchor``: (count, elapsed s) of the reading the next step time is measured from.
    """

    total: int | None = None
    evaluating: bool = False
    last: tuple[int, float] | None = None
    anchor: tuple[int, float] | None = None


@dataclass(slots=True)
class LogContext:
    """Parser state for one log, updated by ``parse_line(line, context=...)``; see module doc.

    Read-only for callers, except ``megatron_last_iteration``, which a reader resuming a log
    part-way may seed with the last Megatron-LM iteration it already consumed.
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
    """Formats of the progress records given so far (DeepSpeed engine lines excluded)."""
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
        step without its ``E2E latency`` line), settled as ``settle`` does; empties the hold.
        """
        pending, self.dschat_pending = self.dschat_pending, None
        settled = self.settle(pending) if pending is not None else None
        return [settled] if settled is not None else []

    def settle(self, record: ProgressRecord) -> ProgressRecord | None:
        """The record as the log means it, given what came before; None when it only carries a
        time for the next record (see ``adapters.logs.parsers``, "Reading a whole log").
        """
        if record.framework == "deepspeed":
            return self._settle_deepspeed(record)
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
        return record

    def _settle_deepspeed(self, record: ProgressRecord) -> ProgressRecord | None:
        if record.timestamp_s is not None:
            self.deepspeed_stamp = (record.iteration, record.timestamp_s)
            self.observe_time(record.timestamp_s)
        if self.frameworks or record.iteration == self.deepspeed_last_iteration:
            return None  # another format reports the steps, or a second engine's same step
        self.deepspeed_last_iteration = record.iteration
        return record
