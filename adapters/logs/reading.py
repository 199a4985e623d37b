"""A whole finished training log read at once: its progress records, total and format.

``read_log`` is what replaying a past job needs (``planner eta replay LOG``): every format
``adapters.logs.parsers.parse_line`` knows, plus Megatron-LM's CI golden-value tables
(``adapters.logs.tables``), detected from the content. Pure: the caller reads the file.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, tzinfo
from typing import Final

from adapters.logs import values
from adapters.logs.context import LogContext, LogEvent
from adapters.logs.parsers import parse_lines
from adapters.logs.tables import read_iteration_table
from planner.errors import SpecError
from planner.specs.job import ProgressRecord

_LINE_END: Final = re.compile(r"\r\n|\r|\n")
_FORMATS: Final = (
    "Megatron-LM / Megatron-DeepSpeed, NeMo, torchtitan, Lightning, JSON lines, MLPerf MLLOG, "
    "modded-nanogpt, DeepSpeed, DeepSpeed-Chat, the Hugging Face Trainer's training bar (after "
    "its 'Total optimization steps' summary), Megatron-LM CI golden-value tables"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LogReading:
    """What a finished log says about its job's progress.

    ``records`` are the progress records of the log's main format in log order, as ``parse_line``
    gives them with a ``LogContext`` (each record's ``step_time_s`` averages over the
    ``num_iterations`` iterations since the format's previous record; ``timestamp_s`` is the time
    the log printed for it, or None). Iterations may repeat or go back where the job restarted from
    a checkpoint. ``framework`` is that format (``megatron``, ``mlperf``, ``modded-nanogpt``,
    ``deepspeed-chat``, ``megatron-ci``, ...): the one with most records when a log mixes several
    (records of the others are dropped; a Hugging Face Trainer bar's, ``transformers``, and
    another format's step lines are never both read: ``adapters.logs.trainer``).
    ``train_iters`` is the total number of iterations the log states (the last stated on a kept
    record: Megatron-LM ``N/T``, modded-nanogpt ``step:N/T``, torchtitan's start line,
    DeepSpeed-Chat's epochs x generation batches, a CI table's ``end_step``; an MLPerf run's
    cap, then what it trained once it ended: ``adapters.logs.mlperf``), None when it states none.
    ``events`` are evaluation and run start/stop events in log order (``LogEvent``).
    ``first_timestamp_s`` and ``last_timestamp_s`` are the earliest and latest times the log
    printed on any line (launcher and framework log lines, MLLOG ``time_ms``), epoch seconds,
    None when it printed none: the span includes start-up before the first record and teardown
    after the last.
    """

    records: tuple[ProgressRecord, ...]
    train_iters: int | None
    framework: str
    events: tuple[LogEvent, ...] = ()
    first_timestamp_s: float | None = None
    last_timestamp_s: float | None = None


def read_log(text: str, *, tz: tzinfo | None = None) -> LogReading:
    """Read a whole finished log (text of any supported format) into a ``LogReading``.

    A JSON object of metrics, or a text whose first line is a lone ``{``, is read as a
    Megatron-LM CI golden table (``read_iteration_table``); anything else line by line with one
    ``LogContext``, lines ending at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (tqdm refreshes), as
    ``LogTailer`` splits them.
    ``tz`` is the zone of times printed without one (None: the host's local zone).

    Raises ``SpecError`` (field ``log``) when no line carries training progress, or the CI
    table's ``SpecError`` when a golden table is malformed.
    """
    if _is_table(text):
        table = read_iteration_table(text)
        return LogReading(
            records=tuple(table), train_iters=table[-1].train_iters, framework="megatron-ci"
        )
    context = LogContext()
    lines = _LINE_END.split(text)
    found = [r for r in parse_lines(lines, tz=tz, context=context) if isinstance(r, ProgressRecord)]
    found.extend(context.finish())
    if not found:
        raise SpecError(
            "log",
            f"no training progress found in {len(text)} characters; formats read: {_FORMATS} "
            "(see adapters/logs/parsers.py for the lines each prints)",
        )
    # a Trainer bar's records and another format's step lines never both come
    # (adapters.logs.trainer: one or the other for the whole log)
    counts = Counter(record.framework for record in found)
    framework = max(counts, key=lambda name: counts[name])  # first seen wins a tie
    records = tuple(record for record in found if record.framework == framework)
    totals = [record.train_iters for record in records if record.train_iters is not None]
    # The last total the format stated, also one stated after its last record (an MLPerf run's
    # trained samples and run_stop, logged once training is over).
    stated = context.totals.get(framework, totals[-1] if totals else None)
    return LogReading(
        records=records,
        train_iters=stated,
        framework=framework,
        events=tuple(context.events),
        first_timestamp_s=context.first_timestamp_s,
        last_timestamp_s=context.last_timestamp_s,
    )


def read_job_log(text: str) -> tuple[list[ProgressRecord], int | None, str, float | None]:
    """A finished job's log read whole (``read_log``; times printed without a zone taken as
    UTC, so a replay is the same on every machine): its progress records, the total
    iterations it states (None: none), its format, and the latest time it printed (None: none).
    Raises ``SpecError`` (field ``log``) when no line carries training progress."""
    reading = read_log(text, tz=UTC)
    return list(reading.records), reading.train_iters, reading.framework, reading.last_timestamp_s


def _is_table(text: str) -> bool:
    """True when ``text`` is a golden table: one JSON object of metrics, or a document whose
    first line is a lone ``{`` (a pretty-printed object, read as a table so that a malformed one
    gets its JSON error); JSON lines logs have a whole object on each line.
    """
    body = text.lstrip()
    if not body.startswith("{"):
        return False
    if body.split("\n", 1)[0].strip() == "{":
        return True
    obj = values.json_object(body)
    return (
        obj is not None
        and bool(obj)
        and all(isinstance(v, dict) and "values" in v for v in obj.values())
    )
