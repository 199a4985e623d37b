"""Pure parsers for what Slurm's commands print (no I/O here; ``source.py`` runs the commands).

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

Times are POSIX epoch seconds; Slurm's 0 ("not set") becomes ``None``.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planner.errors import SourcePermanentError, SourceTemporaryError
from planner.specs.job import JobState, JobStatus, NodeState

SCHEDULER = "slurm"
SOURCE_SQUEUE = "slurm:squeue"
SOURCE_SINFO = "slurm:sinfo"
SOURCE_SACCT = "slurm:sacct"

# Slurm's special 32-bit values: INFINITE (0xffffffff) and NO_VAL (0xfffffffe).
_INFINITE32 = 0xFFFFFFFF
_NO_VAL32 = 0xFFFFFFFE
# A job submitted without --time to a partition with MaxTime=INFINITE reports a 365-day limit
# once it runs (``scontrol``: TimeLimit=365-00:00:00, ``squeue --json``: 525600); its end_time is
# start + 1 year. Limits this long mean "unlimited".
_UNLIMITED_MINUTES = 365 * 24 * 60
_UNLIMITED_WORDS = frozenset({"UNLIMITED", "INFINITE", "NONE", "N/A", "PARTITION_LIMIT", ""})
# %a of a job that is not part of an array expands to NO_VAL in slurmd's fname_create().
_NO_ARRAY_TASK = str(_NO_VAL32)

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


# ---------------------------------------------------------------------------------------------
# helpers: states, times, TRES/GRES, hostlists, file name patterns


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
        if value in (_INFINITE32, _NO_VAL32) or value < 0:
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


@dataclass(frozen=True, slots=True)
class GresItem:
    """One GRES entry: ``name`` (e.g. ``"gpu"``), ``type`` (``"h100"`` or None), ``count``."""

    name: str
    type: str | None
    count: int


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split ``text`` on ``sep`` outside ``[...]`` and ``(...)``; empty parts are dropped."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth = max(0, depth - 1)
        if ch == sep and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def parse_gres(text: str) -> list[GresItem]:
    """Parse a GRES list as squeue/sinfo print it → items.

    Handles ``gpu:h100:8``, ``gpu:8``, ``gpu`` (count 1), ``gpu:h100:2(IDX:0-1)``,
    ``gpu:h100:8(S:0-1)``, the ``gres:``/``gres/`` prefixes of ``tres_per_node``/``tres_per_job``
    (``gres:gpu:h100:2``, ``gres/gpu:2``), and comma-separated lists (commas inside parentheses
    such as ``(IDX:0,3)`` are kept). ``"N/A"``/``"(null)"``/empty give ``[]``. Count suffixes
    K/M/G (×1024ⁿ) are accepted. Raises ``ValueError`` on an unreadable count.
    """
    items: list[GresItem] = []
    for raw in split_top_level(text.strip()):
        entry = re.sub(r"\(.*\)$", "", raw).strip()
        if not entry or entry.upper() in {"N/A", "(NULL)", "NONE"}:
            continue
        if entry.startswith(("gres:", "gres/")):
            entry = entry[5:]
        fields = entry.split(":")
        name = fields[0]
        gres_type: str | None = None
        count = 1
        if len(fields) == 2:
            if _is_count(fields[1]):
                count = _parse_count(fields[1])
            else:
                gres_type = fields[1]
        elif len(fields) >= 3:
            gres_type = fields[1] or None
            count = _parse_count(fields[2])
        items.append(GresItem(name=name, type=gres_type, count=count))
    return items


def _is_count(text: str) -> bool:
    return re.fullmatch(r"\d+[KMGkmg]?", text) is not None


def _parse_count(text: str) -> int:
    match = re.fullmatch(r"(\d+)([KMGkmg]?)", text.strip())
    if match is None:
        raise ValueError(f"GRES count {text!r} is not a number")
    scale = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[match.group(2).upper()]
    return int(match.group(1)) * scale


def gpus_from_gres(text: str) -> tuple[int, str | None]:
    """Total GPU count and GPU type of a GRES list (``gpu:h100:2(IDX:0-1)`` → ``(2, "h100")``).

    The type is ``None`` when no entry names one or entries name different types.
    """
    gpus = [item for item in parse_gres(text) if item.name == "gpu"]
    return sum(item.count for item in gpus), _single_type(item.type for item in gpus)


def parse_tres(text: str) -> dict[str, str]:
    """Split a TRES string (``cpu=1,mem=1G,node=1,gres/gpu=2,gres/gpu:h100=2``) into key → value.

    Values stay strings (``mem`` carries a unit suffix). Entries without ``=`` are ignored.
    """
    result: dict[str, str] = {}
    for part in split_top_level(text.strip()):
        key, sep, value = part.partition("=")
        if sep:
            result[key.strip()] = value.strip()
    return result


def gpus_from_tres(text: str) -> tuple[int, str | None]:
    """GPU count and type from a TRES string: ``gres/gpu=2`` → ``(2, None)``;
    ``gres/gpu=2,gres/gpu:h100=2`` → ``(2, "h100")``; only typed entries → their sum.
    Raises ``ValueError`` on an unreadable count.
    """
    tres = parse_tres(text)
    typed = {
        k.split(":", 1)[1]: _parse_count(v) for k, v in tres.items() if k.startswith("gres/gpu:")
    }
    gpu_type = next(iter(typed)) if len(typed) == 1 else None
    if "gres/gpu" in tres:
        return _parse_count(tres["gres/gpu"]), gpu_type
    return sum(typed.values()), gpu_type


def _single_type(types: Any) -> str | None:
    found = {t for t in types if t}
    return found.pop() if len(found) == 1 else None


def expand_hostlist(text: str) -> tuple[str, ...]:
    """Expand a Slurm hostlist: ``node[1-3,5]`` → node1 node2 node3 node5; zero padding is kept
    (``gpu[01-02]``), several bracket groups multiply (``r[1-2]n[1-2]``), comma-separated lists
    concatenate. ``""``, ``"(null)"`` and ``"None assigned"`` give ``()``.
    Raises ``ValueError`` on an unbalanced or descending range.
    """
    text = text.strip()
    if not text or text in {"(null)", "None assigned", "N/A"}:
        return ()
    names: list[str] = []
    for part in split_top_level(text):
        names.extend(_expand_host_part(part))
    return tuple(names)


def _expand_host_part(part: str) -> list[str]:
    start = part.find("[")
    if start < 0:
        if "]" in part:
            raise ValueError(f"hostlist {part!r} has an unbalanced ']'")
        return [part]
    end = part.find("]", start)
    if end < 0:
        raise ValueError(f"hostlist {part!r} has an unbalanced '['")
    prefix, body, rest = part[:start], part[start + 1 : end], part[end + 1 :]
    values: list[str] = []
    for rng in body.split(","):
        lo, sep, hi = rng.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"hostlist range {rng!r} in {part!r} is not N or N-M")
        if not sep:
            values.append(lo)
            continue
        first, last = int(lo), int(hi)
        if last < first:
            raise ValueError(f"hostlist range {rng!r} in {part!r} is descending")
        width = len(lo) if lo.startswith("0") else 0
        values.extend(f"{i:0{width}d}" for i in range(first, last + 1))
    tails = _expand_host_part(rest) if rest else [""]
    return [f"{prefix}{v}{tail}" for v in values for tail in tails]


_PATTERN = re.compile(r"%(\d*)([%AaJjNnstux])")


def expand_stdout_path(
    pattern: str,
    *,
    job_id: int,
    job_name: str = "",
    user: str = "",
    work_dir: str | None = None,
    array_job_id: int | None = None,
    array_task_id: int | None = None,
    node: str | None = None,
) -> str:
    """Expand a Slurm output file name pattern as slurmd does for the batch step.

    ``%j`` job id, ``%J`` job id (the batch step prints no step id), ``%A`` array master id
    (job id outside arrays), ``%a`` array task id (4294967294 outside arrays, as slurmd writes),
    ``%x`` job name, ``%u`` user, ``%N`` node (the batch host), ``%n``/``%t`` 0, ``%s`` ``batch``,
    ``%%`` a percent sign; a number after ``%`` zero-pads (``%5j`` → ``00042``). Other letters
    stay as they are (22.05 leaves ``%b`` unexpanded). A pattern containing a backslash is taken
    literally, backslashes removed. A relative result is joined to ``work_dir``.
    """
    if "\\" in pattern:
        path = pattern.replace("\\", "")
    else:
        in_array = array_job_id is not None and array_job_id > 0 and array_task_id is not None
        values = {
            "j": str(job_id),
            "J": str(job_id),
            "A": str(array_job_id if in_array else job_id),
            "a": str(array_task_id) if in_array else _NO_ARRAY_TASK,
            "x": job_name,
            "u": user,
            "N": node or "",
            "n": "0",
            "t": "0",
            "s": "batch",
        }

        def substitute(match: re.Match[str]) -> str:
            width, letter = match.group(1), match.group(2)
            if letter == "%":
                return "%"
            value = values[letter]
            if width and value.isdigit():
                return value.zfill(int(width))
            return value

        path = _PATTERN.sub(substitute, pattern)
    if work_dir and not posixpath.isabs(path):
        path = posixpath.join(work_dir, path)
    return path


# ---------------------------------------------------------------------------------------------
# typed access to decoded JSON


class _Reader:
    """Reads fields of decoded JSON, raising SourcePermanentError naming command and field."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, field: str, message: str) -> SourcePermanentError:
        return SourcePermanentError(self.source, f"field {field!r}: {message}")

    def load(self, text: str, list_key: str) -> list[Mapping[str, Any]]:
        if not isinstance(text, str):
            raise SourcePermanentError(self.source, f"output is {type(text).__name__}, not text")
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SourcePermanentError(
                self.source, f"output is not JSON ({exc.msg}): {text[:80].strip()!r}"
            ) from None
        if not isinstance(doc, Mapping):
            raise self.fail("<top>", f"expected a JSON object, got {type(doc).__name__}")
        errors = doc.get("errors") or []
        if not isinstance(errors, list):
            raise self.fail("errors", f"expected a list, got {type(errors).__name__}")
        errors = [e for e in errors if not _is_empty_result(e)]
        if errors:
            self._raise_errors(errors)
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
        return int(value)

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


def _display_job_id(
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


# ---------------------------------------------------------------------------------------------
# squeue --json


@dataclass(frozen=True, slots=True)
class SqueueRecord:
    """A parsed ``squeue --json`` job plus what the source needs to fetch its batch script."""

    job: JobState
    slurm_job_id: int
    is_batch: bool


def parse_squeue_records(text: str, *, cluster: str | None = None) -> list[SqueueRecord]:
    """Like :func:`parse_squeue_json`, also returning Slurm's numeric job id and batch flag."""
    reader = _Reader(SOURCE_SQUEUE)
    records: list[SqueueRecord] = []
    for i, raw in enumerate(reader.load(text, "jobs")):
        where = f"jobs[{i}]"
        records.append(_squeue_job(reader, raw, where, cluster))
    return records


def parse_squeue_json(text: str, *, cluster: str | None = None) -> list[JobState]:
    """``squeue --json`` (openapi/v0.0.38) text → one :class:`JobState` per job record.

    ``cluster`` overrides the cluster name the output carries. Includes the recently ended jobs
    slurmctld still holds (``MinJobAge``). GPU counts come from ``tres_alloc_str`` for jobs that
    were given nodes (``gpus_allocated=True``), else from ``tres_req_str`` (falling back to
    ``tres_per_job``, ``tres_per_node`` × nodes, ``tres_per_task`` × tasks); the GPU type from
    ``gres_detail`` or the typed request. A pending job's ``start_time`` (the backfill estimate)
    becomes ``expected_start_time_s``; active jobs get no ``end_time_s`` (squeue's is the limit,
    start + 1 year when unlimited). ``stdout_path`` is expanded and absolute (``None`` for
    interactive ``srun``/``salloc`` jobs). Raises ``SourcePermanentError`` on malformed output,
    ``SourceTemporaryError`` when the output reports an unreachable controller.
    """
    return [r.job for r in parse_squeue_records(text, cluster=cluster)]


def _squeue_job(
    reader: _Reader, raw: Mapping[str, Any], where: str, cluster: str | None
) -> SqueueRecord:
    job_id = reader.int_(raw, "job_id", where)
    if job_id is None:
        raise reader.fail(f"{where}.job_id", "missing")
    array_job_id = reader.int_(raw, "array_job_id", where)
    array_task = reader.int_(raw, "array_task_id", where)
    array_tasks = reader.str_(raw, "array_task_string", where)
    het_job_id = reader.int_(raw, "het_job_id", where)
    het_offset = reader.int_(raw, "het_job_offset", where)
    display_id = _display_job_id(job_id, array_job_id, array_task, array_tasks)
    if het_job_id:
        display_id = f"{het_job_id}+{het_offset or 0}"

    state_text = reader.str_(raw, "job_state", where)
    status = slurm_state_to_status(state_text)
    reason = reader.str_(raw, "state_reason", where)
    nodes = reader.hostlist(raw, "nodes", where)
    num_nodes = reader.int_(raw, "node_count", where) or len(nodes)
    name = reader.str_(raw, "name", where)
    user = reader.str_(raw, "user_name", where)
    work_dir = reader.str_(raw, "current_working_directory", where) or None
    is_batch = bool(raw.get("batch_flag", False))

    # Jobs that run(ran) report their allocation; pending ones only their request.
    was_allocated = status is not JobStatus.PENDING and bool(nodes)
    num_gpus, gpu_type, allocated = _squeue_gpus(reader, raw, where, num_nodes, was_allocated)

    submit = reader.time_(raw, "submit_time", where)
    start = reader.time_(raw, "start_time", where)
    end = reader.time_(raw, "end_time", where)
    expected_start: float | None = None
    if status is JobStatus.PENDING:
        expected_start, start = start, None
    if status.is_active:
        end = None
    elif not nodes:
        start = None  # ended before it ever ran (e.g. cancelled while pending)

    stdout_path: str | None = None
    pattern = reader.str_(raw, "standard_output", where)
    pending_array = bool(array_job_id) and array_task is None
    if is_batch and not pending_array:
        if not pattern:
            pattern = "slurm-%A_%a.out" if array_job_id else "slurm-%j.out"
        stdout_path = expand_stdout_path(
            pattern,
            job_id=job_id,
            job_name=name,
            user=user,
            work_dir=work_dir,
            array_job_id=array_job_id,
            array_task_id=array_task,
            node=reader.str_(raw, "batch_host", where) or (nodes[0] if nodes else None),
        )

    job = JobState(
        scheduler=SCHEDULER,
        cluster=cluster if cluster is not None else reader.str_(raw, "cluster", where),
        job_id=display_id,
        name=name,
        user=user,
        partition=reader.str_(raw, "partition", where),
        account=reader.str_(raw, "account", where),
        status=status,
        state_reason="" if reason == "None" else reason,
        node_list=nodes,
        num_nodes=num_nodes,
        num_gpus=num_gpus,
        gpus_allocated=allocated,
        gpu_type=gpu_type,
        submit_time_s=submit,
        start_time_s=start,
        end_time_s=end,
        expected_start_time_s=expected_start,
        time_limit_s=reader.time_limit(raw, "time_limit", where),
        stdout_path=stdout_path,
        work_dir=work_dir,
        command=reader.str_(raw, "command", where) or None,
        comment=reader.str_(raw, "comment", where),
    )
    return SqueueRecord(job=job, slurm_job_id=job_id, is_batch=is_batch)


def _squeue_gpus(
    reader: _Reader, raw: Mapping[str, Any], where: str, num_nodes: int, was_allocated: bool
) -> tuple[int, str | None, bool]:
    """(num_gpus, gpu_type, allocated) of one squeue job."""

    def read(key: str, fn: Any) -> tuple[int, str | None]:
        text = reader.str_(raw, key, where)
        try:
            result: tuple[int, str | None] = fn(text)
        except ValueError as exc:
            raise reader.fail(f"{where}.{key}", str(exc)) from None
        return result

    detail = reader.list_(raw, "gres_detail", where)
    detail_text = ",".join(d for d in detail if isinstance(d, str))
    try:
        detail_gpus, detail_type = gpus_from_gres(detail_text)
    except ValueError as exc:
        raise reader.fail(f"{where}.gres_detail", str(exc)) from None

    per_job = read("tres_per_job", gpus_from_gres)
    per_node = read("tres_per_node", gpus_from_gres)
    per_task = read("tres_per_task", gpus_from_gres)
    requested_type = per_job[1] or per_node[1] or per_task[1]

    if was_allocated:
        alloc_gpus, alloc_type = read("tres_alloc_str", gpus_from_tres)
        if alloc_gpus or detail_gpus:
            return (alloc_gpus or detail_gpus), (detail_type or alloc_type or requested_type), True
    req_gpus, req_type = read("tres_req_str", gpus_from_tres)
    if not req_gpus:
        tasks = reader.int_(raw, "tasks", where) or 1
        req_gpus = per_job[0] or per_node[0] * max(num_nodes, 1) or per_task[0] * tasks
    return req_gpus, (requested_type or req_type or detail_type), False


# ---------------------------------------------------------------------------------------------
# sinfo --json


def parse_sinfo_json(text: str) -> list[NodeState]:
    """``sinfo --json`` (openapi/v0.0.38) text → one :class:`NodeState` per node.

    GPU count and type from ``gres`` (``gpu:h100:8``; ``tres`` ``gres/gpu=8`` as fallback),
    allocated GPUs from ``gres_used`` (``gpu:h100:2(IDX:0-1)``; ``tres_used`` as fallback).
    ``state`` is the base state plus flags, lower case, joined by ``+`` (``idle``,
    ``mixed+drain``). ``memory_bytes`` = ``real_memory`` MiB × 2²⁰. Raises like
    :func:`parse_squeue_json`.
    """
    reader = _Reader(SOURCE_SINFO)
    nodes: list[NodeState] = []
    seen: set[str] = set()
    for i, raw in enumerate(reader.load(text, "nodes")):
        where = f"nodes[{i}]"
        name = reader.str_(raw, "name", where)
        if not name:
            raise reader.fail(f"{where}.name", "missing")
        if name in seen:
            continue
        seen.add(name)
        base = reader.str_(raw, "state", where).lower()
        flags = [str(f).lower() for f in reader.list_(raw, "state_flags", where)]
        try:
            num_gpus, gpu_type = gpus_from_gres(reader.str_(raw, "gres", where))
            if not num_gpus:
                num_gpus, tres_type = gpus_from_tres(reader.str_(raw, "tres", where))
                gpu_type = gpu_type or tres_type
            used, _ = gpus_from_gres(reader.str_(raw, "gres_used", where))
            if not used:
                used, _ = gpus_from_tres(reader.str_(raw, "tres_used", where))
        except ValueError as exc:
            raise reader.fail(f"{where}.gres", str(exc)) from None
        partitions = tuple(str(p) for p in reader.list_(raw, "partitions", where))
        nodes.append(
            NodeState(
                name=name,
                state="+".join([base or "unknown", *flags]),
                num_gpus=num_gpus,
                num_gpus_allocated=used,
                gpu_type=gpu_type,
                num_cpus=reader.int_(raw, "cpus", where) or 0,
                memory_bytes=float(reader.int_(raw, "real_memory", where) or 0) * 1024.0**2,
                partitions=partitions,
            )
        )
    return nodes


# ---------------------------------------------------------------------------------------------
# sacct --json


def is_accounting_disabled(text: str) -> bool:
    """True when sacct answered that accounting storage is disabled (no slurmdbd; 22.05 prints
    "Slurm accounting storage is disabled" on stderr and exits 1, also with ``--json``)."""
    return "accounting storage is disabled" in text.lower()


def parse_sacct_json(
    text: str, *, cluster: str | None = None, include_active: bool = False
) -> list[JobState]:
    """``sacct --json`` (openapi/dbv0.0.38) text → :class:`JobState` per job (steps ignored).

    By default only ended jobs are returned (their final state, start/end times); pass
    ``include_active=True`` for all. GPU count from ``tres.allocated`` ``gres``/``gpu`` entries
    (``gpus_allocated=True``), else from ``tres.requested``; needs
    ``AccountingStorageTRES=gres/gpu``. ``comment`` from ``comment.job`` (filled once the job
    ended, with ``AccountingStoreFlags=job_comment``). ``stdout_path`` and ``command`` are not in
    22.05's sacct JSON and stay ``None``. Raises like :func:`parse_squeue_json`.
    """
    if is_accounting_disabled(text):
        raise SourcePermanentError(SOURCE_SACCT, "Slurm accounting storage is disabled")
    reader = _Reader(SOURCE_SACCT)
    jobs: list[JobState] = []
    for i, raw in enumerate(reader.load(text, "jobs")):
        where = f"jobs[{i}]"
        job = _sacct_job(reader, raw, where, cluster)
        if include_active or not job.status.is_active:
            jobs.append(job)
    return jobs


def _sacct_job(
    reader: _Reader, raw: Mapping[str, Any], where: str, cluster: str | None
) -> JobState:
    job_id = reader.int_(raw, "job_id", where)
    if job_id is None:
        raise reader.fail(f"{where}.job_id", "missing")
    array = reader.obj(raw, "array", where)
    array_job_id = reader.int_(array, "job_id", f"{where}.array")
    array_task = reader.int_(array, "task_id", f"{where}.array")
    array_tasks = reader.str_(array, "task", f"{where}.array")
    het = reader.obj(raw, "het", where)
    het_job_id = reader.int_(het, "job_id", f"{where}.het")
    display_id = _display_job_id(job_id, array_job_id, array_task, array_tasks)
    if het_job_id:
        display_id = f"{het_job_id}+{reader.int_(het, 'job_offset', f'{where}.het') or 0}"

    state = reader.obj(raw, "state", where)
    status = slurm_state_to_status(reader.str_(state, "current", f"{where}.state"))
    reason = reader.str_(state, "reason", f"{where}.state")
    times = reader.obj(raw, "time", where)
    tw = f"{where}.time"
    nodes = reader.hostlist(raw, "nodes", where)
    tres = reader.obj(raw, "tres", where)
    num_gpus, gpu_type = _sacct_gpus(
        reader, reader.list_(tres, "allocated", f"{where}.tres"), where
    )
    allocated = num_gpus > 0
    if not allocated:
        num_gpus, gpu_type = _sacct_gpus(
            reader, reader.list_(tres, "requested", f"{where}.tres"), where
        )
    comment = reader.obj(raw, "comment", where)
    start = reader.time_(times, "start", tw)
    end = reader.time_(times, "end", tw)
    expected_start: float | None = None
    if status is JobStatus.PENDING:
        expected_start, start = start, None
    if status.is_active:
        end = None
    return JobState(
        scheduler=SCHEDULER,
        cluster=cluster if cluster is not None else reader.str_(raw, "cluster", where),
        job_id=display_id,
        name=reader.str_(raw, "name", where),
        user=reader.str_(raw, "user", where),
        partition=reader.str_(raw, "partition", where),
        account=reader.str_(raw, "account", where),
        status=status,
        state_reason="" if reason == "None" else reason,
        node_list=nodes,
        num_nodes=reader.int_(raw, "allocation_nodes", where) or len(nodes),
        num_gpus=num_gpus,
        gpus_allocated=allocated,
        gpu_type=gpu_type,
        submit_time_s=reader.time_(times, "submission", tw),
        start_time_s=start,
        end_time_s=end,
        expected_start_time_s=expected_start,
        time_limit_s=reader.time_limit(times, "limit", tw),
        work_dir=reader.str_(raw, "working_directory", where) or None,
        comment=reader.str_(comment, "job", f"{where}.comment"),
    )


def _sacct_gpus(reader: _Reader, entries: list[Any], where: str) -> tuple[int, str | None]:
    total = 0
    typed_total = 0
    types: list[str] = []
    for j, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise reader.fail(f"{where}.tres[{j}]", "expected an object")
        if entry.get("type") != "gres":
            continue
        name = reader.str_(entry, "name", f"{where}.tres[{j}]")
        count = reader.int_(entry, "count", f"{where}.tres[{j}]") or 0
        if name == "gpu":
            total += count
        elif name.startswith("gpu:"):
            typed_total += count
            types.append(name.split(":", 1)[1])
    return (total or typed_total), _single_type(types)


# ---------------------------------------------------------------------------------------------
# scontrol


def parse_cluster_name(scontrol_show_config: str) -> str | None:
    """``ClusterName`` from ``scontrol show config`` output, or ``None`` when absent."""
    match = re.search(r"^\s*ClusterName\s*=\s*(\S+)\s*$", scontrol_show_config, re.MULTILINE)
    return match.group(1) if match else None


def batch_script_failed(stderr: str) -> bool:
    """True when ``scontrol write batch_script ID -`` reported that it got no script.

    22.05 exits 0 even then, printing e.g. "job script retrieval failed: Job script not
    specified" (an ``srun``/``salloc`` job) or "...: Invalid job id specified" on stderr.
    """
    return "job script retrieval failed" in stderr.lower()
