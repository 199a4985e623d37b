"""Reading what Slurm's ``--json`` commands print: the JSON reader, job states, time limits, ids.

Inputs are the texts printed by Slurm 22.05 (``squeue --json`` and ``sinfo --json``: plugin
openapi/v0.0.38; ``sacct --json``: openapi/dbv0.0.38); the tests replay outputs recorded from a
real 22.05.8 cluster (``tests/data/slurm/README.md``). Unknown extra keys are ignored and missing
optional keys take defaults, so later plugin versions that only add keys parse too. Integer fields
given in the 23.02+ shape ``{"set": bool, "infinite": bool, "number": int}`` are accepted as well.

Output that is not what the command should print (not JSON, no ``jobs``/``nodes`` list, a field of
the wrong type) raises :class:`SourcePermanentError` naming the command and the field. A non-empty
``errors`` list raises :class:`SourceTemporaryError` when it says the controller could not be
reached (in 22.05 a stopped slurmctld makes ``squeue --json`` exit 0 with
``{"error": "Unspecified error", "error_number": -1, "source": "slurm_load_jobs"}`` and ``sinfo
--json`` with ``{"error": "Unspecified error", "errno": -1}``), and :class:`SourcePermanentError`
otherwise.

Times are POSIX epoch seconds; Slurm's 0 ("not set") becomes ``None``. The per-command parsers
live in :mod:`adapters.slurm.squeue`, :mod:`adapters.slurm.sinfo` and :mod:`adapters.slurm.sacct`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from adapters.slurm.hostlist import expand_hostlist
from planner.errors import SourcePermanentError, SourceTemporaryError
from planner.specs.job import JobStatus

SCHEDULER = "slurm"
SOURCE_SQUEUE = "slurm:squeue"
SOURCE_SINFO = "slurm:sinfo"
SOURCE_SACCT = "slurm:sacct"

# Slurm's special 32-bit values: INFINITE (0xffffffff) and NO_VAL (0xfffffffe).
INFINITE32 = 0xFFFFFFFF
NO_VAL32 = 0xFFFFFFFE
# A job submitted without --time to a partition with MaxTime=INFINITE reports a 365-day limit
# once it runs (``scontrol``: TimeLimit=365-00:00:00, ``squeue --json``: 525600); its end_time is
# start + 1 year. Limits this long mean "unlimited".
_UNLIMITED_MINUTES = 365 * 24 * 60
_UNLIMITED_WORDS = frozenset({"UNLIMITED", "INFINITE", "NONE", "N/A", "PARTITION_LIMIT", ""})

_STATE_MAP: Mapping[str, JobStatus] = {
    "PENDING": JobStatus.PENDING,
    "PD": JobStatus.PENDING,
    "REQUEUED": JobStatus.PENDING,
    "RQ": JobStatus.PENDING,
    "REQUEUE_FED": JobStatus.PENDING,
    "RF": JobStatus.PENDING,
    "REQUEUE_HOLD": JobStatus.PENDING,
    "RH": JobStatus.PENDING,
    "RESV_DEL_HOLD": JobStatus.PENDING,
    "RD": JobStatus.PENDING,
    "RUNNING": JobStatus.RUNNING,
    "R": JobStatus.RUNNING,
    # CONFIGURING: resources allocated, nodes still booting; RESIZING/SIGNALING: still running.
    "CONFIGURING": JobStatus.RUNNING,
    "CF": JobStatus.RUNNING,
    "RESIZING": JobStatus.RUNNING,
    "RS": JobStatus.RUNNING,
    "SIGNALING": JobStatus.RUNNING,
    "SI": JobStatus.RUNNING,
    "COMPLETING": JobStatus.COMPLETING,
    "CG": JobStatus.COMPLETING,
    "STAGE_OUT": JobStatus.COMPLETING,
    "SO": JobStatus.COMPLETING,
    "SUSPENDED": JobStatus.SUSPENDED,
    "S": JobStatus.SUSPENDED,
    "STOPPED": JobStatus.SUSPENDED,
    "ST": JobStatus.SUSPENDED,
    "COMPLETED": JobStatus.COMPLETED,
    "CD": JobStatus.COMPLETED,
    "FAILED": JobStatus.FAILED,
    "F": JobStatus.FAILED,
    "NODE_FAIL": JobStatus.FAILED,
    "NF": JobStatus.FAILED,
    "OUT_OF_MEMORY": JobStatus.FAILED,
    "OOM": JobStatus.FAILED,
    "BOOT_FAIL": JobStatus.FAILED,
    "BF": JobStatus.FAILED,
    "SPECIAL_EXIT": JobStatus.FAILED,
    "SE": JobStatus.FAILED,
    "CANCELLED": JobStatus.CANCELLED,
    "CA": JobStatus.CANCELLED,
    # PREEMPTED: the scheduler ended the job to make room (it may be requeued as a new record).
    "PREEMPTED": JobStatus.CANCELLED,
    "PR": JobStatus.CANCELLED,
    "REVOKED": JobStatus.CANCELLED,
    "RV": JobStatus.CANCELLED,
    "TIMEOUT": JobStatus.TIMEOUT,
    "TO": JobStatus.TIMEOUT,
    "DEADLINE": JobStatus.TIMEOUT,
    "DL": JobStatus.TIMEOUT,
}

# ESLURM_REST_EMPTY_RESULT: "Nothing found with query" (sacct --json over an empty window).
_EMPTY_RESULT = 9003
_TEMPORARY_ERROR_HINTS = (
    "unable to contact",
    "connect failure",
    "connection refused",
    "timed out",
    "timeout",
    "zero bytes were transmitted",
    "unspecified error",
)


def slurm_state_to_status(state: str) -> JobStatus:
    """Map a Slurm job state to a :class:`JobStatus`; unknown → ``UNKNOWN``.

    Accepts long or short names and decorations: ``"RUNNING"``, ``"CA"``, ``"CANCELLED by 0"``,
    ``"CANCELLED+"``, ``"RUNNING,COMPLETING"``.

    ``NODE_FAIL``, ``OUT_OF_MEMORY``, ``BOOT_FAIL`` map to FAILED; ``PREEMPTED`` to CANCELLED;
    ``DEADLINE`` to TIMEOUT; ``STOPPED`` to SUSPENDED; requeued/held states to PENDING. A
    ``COMPLETING`` flag on another state wins (the job still holds its nodes).
    """
    words = [w for w in re.split(r"[\s,+|]+", state.strip().upper()) if w]
    if not words:
        return JobStatus.UNKNOWN
    if "COMPLETING" in words[1:]:
        return JobStatus.COMPLETING
    return _STATE_MAP.get(words[0], JobStatus.UNKNOWN)


def parse_time_limit_s(value: object) -> float | None:
    """Slurm time limit → seconds, or ``None`` for unlimited / not set.

    Accepts minutes as an int (``squeue``/``sacct`` JSON), ``None``, the 23.02+ shape
    ``{"set", "infinite", "number"}``, and strings as ``scontrol`` prints them (``"UNLIMITED"``,
    ``"30"`` minutes, ``"MM:SS"``, ``"HH:MM:SS"``, ``"D-HH"``, ``"D-HH:MM"``, ``"D-HH:MM:SS"``).
    Limits of 365 days or more are Slurm's stand-in for INFINITE and give ``None``.
    Raises ``ValueError`` for a string it cannot read.
    """
    minutes: float
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, Mapping):
        if value.get("infinite") or not value.get("set", True):
            return None
        return parse_time_limit_s(value.get("number"))
    if isinstance(value, int | float):
        if value in (INFINITE32, NO_VAL32) or value < 0:
            return None
        minutes = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if text.upper() in _UNLIMITED_WORDS:
            return None
        seconds = _parse_duration_text_s(text)
        minutes = seconds / 60.0
    else:
        raise ValueError(f"time limit {value!r} is neither minutes nor a Slurm duration")
    if minutes >= _UNLIMITED_MINUTES:
        return None
    return minutes * 60.0


def _parse_duration_text_s(text: str) -> float:
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
    if match is None:
        raise ValueError(f"time limit {text!r} is not a Slurm duration ([D-]HH:MM:SS or minutes)")
    days_s, first, second, third = match.groups()
    days = int(days_s) if days_s else 0
    parts = [int(p) for p in (first, second, third) if p is not None]
    if days_s is not None:
        # D-HH, D-HH:MM, D-HH:MM:SS
        hours, mins, secs = ([*parts, 0, 0])[:3]
    elif len(parts) == 1:
        hours, mins, secs = 0, parts[0], 0  # minutes
    elif len(parts) == 2:
        hours, mins, secs = 0, parts[0], parts[1]  # MM:SS
    else:
        hours, mins, secs = parts  # HH:MM:SS
    return float(((days * 24 + hours) * 60 + mins) * 60 + secs)


_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class _UnexpectedError(Exception):
    """Not the shape ``loads_in_pieces`` reads piece by piece: ``json.loads`` decides."""


def loads_in_pieces(text: str) -> Any:
    """``json.loads(text)``, decoding a top-level object's lists one element at a time.

    The same result for the same text (anything else, invalid JSON included, is decoded or
    refused by ``json.loads`` itself, with its usual errors), but a 40 MB ``squeue --json`` of
    10,000 jobs is decoded in 10,000 small calls instead of one that holds the interpreter for
    a third of a second, so the service's HTTP threads keep answering while the ingest loop
    reads it.
    """
    try:
        return _pieces(text)
    except (_UnexpectedError, ValueError, RecursionError):
        return json.loads(text)


def _skip(text: str, i: int) -> int:
    match = _WS.match(text, i)
    return i if match is None else match.end()


def _expect(text: str, i: int, chars: str) -> str:
    if i >= len(text) or text[i] not in chars:
        raise _UnexpectedError
    return text[i]


#: Recognises an element of a streamed list by its text (one the caller read before): what
#: the caller made of it then, or None.
Known = Callable[[str], object | None]


def _element_end(text: str, i: int) -> int:
    """Where the object element starting at ``text[i]`` ends, guessed from pretty-printed
    output (its closing brace on its own line, indented as its opening one); 0: no guess. A
    guess only picks the text to look up: text equal to a whole element read before *is* that
    element (an object ends at its own closing brace), so a wrong guess only misses."""
    if not text.startswith("{", i):
        return 0
    indent = i - (text.rfind("\n", 0, i) + 1)
    close = "\n" + " " * indent + "}"
    end = text.find(close, i)
    return 0 if end < 0 else end + len(close)


def _members(
    text: str, streamed: Callable[[str], bool], known: Known | None = None
) -> Iterator[tuple[str, str, Any]]:
    """The top-level object of ``text`` piece by piece, in order: ``(key, "list", None)`` when
    the list value of a key that ``streamed`` accepts begins, then ``(key, "item", element)`` for
    each of its elements as it is decoded; ``(key, "value", value)`` for any other value. Raises
    ``_UnexpectedError`` (or ``ValueError``) on anything that is not one JSON object.

    With ``known``, an element whose text ``known`` recognises is not decoded: ``(key, "known",
    what known returned)``; the others come as ``(key, "item", (element, its text))``."""
    i = _skip(text, 0)
    _expect(text, i, "{")
    i = _skip(text, i + 1)
    end = "}" if i < len(text) and text[i] == "}" else ","
    while end == ",":
        _expect(text, i, '"')
        key, i = _DECODER.raw_decode(text, i)
        _expect(text, _skip(text, i), ":")
        i = _skip(text, _skip(text, i) + 1)
        if i < len(text) and text[i] == "[" and streamed(key):
            yield key, "list", None
            i = _skip(text, i + 1)
            more = "]" if i < len(text) and text[i] == "]" else ","
            while more == ",":
                stop = _element_end(text, i) if known is not None else 0
                hit = known(text[i:stop]) if known is not None and stop else None
                if hit is not None:
                    yield key, "known", hit
                    i = stop
                elif known is not None:
                    item, stop = _DECODER.raw_decode(text, i)
                    yield key, "item", (item, text[i:stop])
                    i = stop
                else:
                    item, i = _DECODER.raw_decode(text, i)
                    yield key, "item", item
                i = _skip(text, i)
                more = _expect(text, i, ",]")
                if more == ",":
                    i = _skip(text, i + 1)
            i += 1
        else:
            value, i = _DECODER.raw_decode(text, i)
            yield key, "value", value
        i = _skip(text, i)
        end = _expect(text, i, ",}")
        if end == ",":
            i = _skip(text, i + 1)
    if _skip(text, i + 1) != len(text):
        raise _UnexpectedError  # extra data after the object


def _pieces(text: str) -> dict[str, Any]:
    """``json.loads(text)`` of one object, its top-level lists decoded one element at a time
    (a key given twice keeps its last value, as ``json.loads`` does)."""
    doc: dict[str, Any] = {}
    for key, kind, value in _members(text, lambda _key: True):
        if kind == "list":
            doc[key] = []
        elif kind == "item":
            doc[key].append(value)
        else:
            doc[key] = value
    return doc


class StreamRestartError(Exception):
    """``OutputReader.iter_items`` met valid JSON of a shape it does not stream (a list key
    given twice, say): decode it whole with ``OutputReader.load`` instead."""


def _stream(text: str, list_key: str, known: Known | None = None) -> Iterator[tuple[str, Any]]:
    """The top-level object of ``text`` piece by piece: ``("item", element)`` for each element
    of ``list_key``'s list as it is decoded (with ``known``: as :func:`_members` gives them,
    ``("known", ...)`` for those it recognised), ``(key, value)`` for the other keys; raises
    ``_UnexpectedError`` (or ``ValueError``) on anything else."""
    streamed = False
    for key, kind, value in _members(text, lambda key: key == list_key, known):
        if kind == "list":
            if streamed:
                raise _UnexpectedError  # json.loads keeps the last one: not streamable
            streamed = True
        elif kind in ("item", "known"):
            yield kind, value
        else:
            if key == list_key and streamed:
                raise _UnexpectedError
            yield key, value


class OutputReader:
    """Reads fields of decoded JSON, raising SourcePermanentError naming command and field."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, field: str, message: str) -> SourcePermanentError:
        return SourcePermanentError(self.source, f"field {field!r}: {message}")

    def load(self, text: str, list_key: str) -> list[Mapping[str, Any]]:
        if not isinstance(text, str):
            raise SourcePermanentError(self.source, f"output is {type(text).__name__}, not text")
        try:
            doc = loads_in_pieces(text)
        except json.JSONDecodeError as exc:
            raise SourcePermanentError(
                self.source, f"output is not JSON ({exc.msg}): {text[:80].strip()!r}"
            ) from None
        except (ValueError, RecursionError) as exc:  # 5,000-digit numbers, absurd nesting
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:80]
            raise SourcePermanentError(
                self.source, f"output is not usable JSON ({reason})"
            ) from None
        if not isinstance(doc, Mapping):
            raise self.fail("<top>", f"expected a JSON object, got {type(doc).__name__}")
        self._check_errors(doc.get("errors"))
        items = doc.get(list_key)
        if items is None:
            raise self.fail(list_key, "missing")
        if not isinstance(items, list):
            raise self.fail(list_key, f"expected a list, got {type(items).__name__}")
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise self.fail(
                    f"{list_key}[{i}]", f"expected an object, got {type(item).__name__}"
                )
        return items

    def iter_items(self, text: str, list_key: str) -> Iterator[Mapping[str, Any]]:
        """The objects of ``list_key`` one at a time as they are decoded: what :meth:`load`
        returns, with its errors (an ``errors`` list after the items is raised after them, and
        a syntax error after an item once the caller has read that item),
        but never all of a 40 MB answer in memory as objects at once, so each is freed as soon
        as the caller has read it (no survivors for the garbage collector to move
        and scan). Raises :class:`StreamRestartError` (before yielding anything but what
        :meth:`load` would give) when the text is valid JSON this does not stream."""
        for kind, value in self.iter_known_items(text, list_key, None):
            if kind == "item":
                yield value

    def iter_known_items(
        self, text: str, list_key: str, known: Known | None
    ) -> Iterator[tuple[str, Any]]:
        """:meth:`iter_items` that skips what the caller read before: ``("known", what
        known(element text) returned)`` for an element ``known`` recognises (not decoded
        again), ``("item", (element, its text))`` for the others (``("item", element)``
        without ``known``); the same errors."""
        if not isinstance(text, str):
            self.load(text, list_key)  # raises
        fields: dict[str, Any] = {}
        count = 0
        try:
            for key, value in _stream(text, list_key, known):
                if key == "known":
                    count += 1
                    yield key, value
                    continue
                if key != "item":
                    fields[key] = value
                    if key == "errors":
                        self._check_errors(value)
                    continue
                element = value if known is None else value[0]
                if not isinstance(element, Mapping):
                    raise self.fail(
                        f"{list_key}[{count}]", f"expected an object, got {type(element).__name__}"
                    )
                count += 1
                yield key, value
        except (_UnexpectedError, ValueError, RecursionError):
            self.load(text, list_key)  # raises what a whole decode raises
            raise StreamRestartError from None
        if count == 0:  # no list streamed: the key is missing, empty or not a list
            self.load(text, list_key)

    def _check_errors(self, errors: Any) -> None:
        errors = errors or []
        if not isinstance(errors, list):
            raise self.fail("errors", f"expected a list, got {type(errors).__name__}")
        errors = [e for e in errors if not _is_empty_result(e)]
        if errors:
            self._raise_errors(errors)

    def _raise_errors(self, errors: list[Any]) -> None:
        texts = []
        temporary = False
        for err in errors:
            if isinstance(err, Mapping):
                parts = [
                    str(err.get(k))
                    for k in ("source", "description", "error")
                    if err.get(k) not in (None, "")
                ]
                text = ": ".join(parts) or json.dumps(err)
                source = str(err.get("source") or "")
                if source.startswith("slurm_load_"):
                    temporary = True
            else:
                text = str(err)
            if any(hint in text.lower() for hint in _TEMPORARY_ERROR_HINTS):
                temporary = True
            texts.append(text)
        message = "Slurm reported errors: " + "; ".join(texts)
        if temporary:
            raise SourceTemporaryError(self.source, message + " (controller unreachable?)")
        raise SourcePermanentError(self.source, message)

    def str_(self, obj: Mapping[str, Any], key: str, where: str, default: str = "") -> str:
        value = obj.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.fail(f"{where}.{key}", f"expected a string, got {type(value).__name__}")
        return value

    def int_(self, obj: Mapping[str, Any], key: str, where: str) -> int | None:
        """An integer field; ``None`` if missing/null/unset/infinite; 23.02+ dict shape accepted."""
        value = obj.get(key)
        if isinstance(value, Mapping):
            if value.get("infinite") or not value.get("set", True):
                return None
            value = value.get("number")
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"{where}.{key}", f"expected an integer, got {type(value).__name__}")
        if not -(2**64) <= value <= 2**64:  # Slurm's numbers are 64-bit; inf and nan fail here
            raise self.fail(f"{where}.{key}", f"expected a 64-bit integer, got {value!r:.40}")
        return int(value)

    def required_int(self, obj: Mapping[str, Any], key: str, where: str) -> int:
        """Like :meth:`int_`, but a missing/null/unset value is an error."""
        value = self.int_(obj, key, where)
        if value is None:
            raise self.fail(f"{where}.{key}", "missing")
        return value

    def time_(self, obj: Mapping[str, Any], key: str, where: str) -> float | None:
        value = self.int_(obj, key, where)
        return float(value) if value else None

    def obj(self, obj: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
        value = obj.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(f"{where}.{key}", f"expected an object, got {type(value).__name__}")
        return value

    def list_(self, obj: Mapping[str, Any], key: str, where: str) -> list[Any]:
        value = obj.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(f"{where}.{key}", f"expected a list, got {type(value).__name__}")
        return value

    def hostlist(self, obj: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
        try:
            return expand_hostlist(self.str_(obj, key, where))
        except ValueError as exc:
            raise self.fail(f"{where}.{key}", str(exc)) from None

    def time_limit(self, obj: Mapping[str, Any], key: str, where: str) -> float | None:
        try:
            return parse_time_limit_s(obj.get(key))
        except ValueError as exc:
            raise self.fail(f"{where}.{key}", str(exc)) from None


def _is_empty_result(error: Any) -> bool:
    """sacct --json with no matching job reports error 9003 "Nothing found" (and exits 0)."""
    if not isinstance(error, Mapping):
        return False
    return error.get("error_number") == _EMPTY_RESULT or str(error.get("description", "")) == (
        "Nothing found"
    )


def display_job_id(
    job_id: int, array_job_id: int | None, array_task: int | None, array_tasks: str
) -> str:
    """Slurm's user-facing id: ``6_2`` for array tasks, ``18_[0-3%2]`` for an array still
    pending as one record, else the plain id."""
    if array_job_id:
        if array_task is not None:
            return f"{array_job_id}_{array_task}"
        if array_tasks:
            return f"{array_job_id}_[{array_tasks}]"
    return str(job_id)


def job_times(
    status: JobStatus, start: float | None, end: float | None
) -> tuple[float | None, float | None, float | None]:
    """``(start, end, expected_start)`` of a job from the start/end times Slurm reports.

    A pending job's start time is the backfill scheduler's estimate (→ ``expected_start``); an
    active job's end time is its limit, start + 1 year when unlimited (→ ``None``).
    """
    expected_start: float | None = None
    if status is JobStatus.PENDING:
        expected_start, start = start, None
    if status.is_active:
        end = None
    return start, end, expected_start
