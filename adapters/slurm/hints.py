"""Slurm hints: the planner's predictions written where Slurm and its users look (opt-in).

Two ways in, both tested against Slurm 22.05.8:

1. :class:`SlurmHintWriter` updates jobs already in the queue with ``scontrol update``: it puts a
   ``planner:hint=`` token into the job's ``Comment`` (never ``AdminComment``, which accounting
   and site tools own) and, in enforcing mode, lowers ``TimeLimit`` to the predicted runtime
   plus a margin so the backfill scheduler plans with a better estimate.
2. :func:`write_hints_file` writes a local file that ``deploy/slurm/job_submit.lua`` reads inside
   slurmctld at submission time (no network from slurmctld), keyed by what a job carries before
   it has an id: its user with its scenario path, or its user and name (never shared between
   users).

The comment token (one whitespace-free word; the rest of the comment is never touched)::

    planner:hint=rt:12345;p90:14000;eta:1795000000;gpus:16;par:tp=8,pp=4,dp=16

Fields are ``KEY:VALUE`` separated by ``;`` in this order: ``rt`` predicted runtime from start
to end, whole seconds; ``p90`` its 90th percentile, seconds; ``eta`` predicted end, epoch
seconds; ``gpus`` recommended GPU count; ``par`` recommended parallelism (free text of
``[A-Za-z0-9=,._:/+-]``). Only ``rt`` is required; readers ignore keys they do not know.
Slurm refuses a comment longer than :data:`COMMENT_MAX_BYTES` (1024 bytes, checked on 22.05.8 for
both ``sbatch --comment`` and ``scontrol update``: 1025 bytes fail with "Pathname of a file,
directory or other parameter too long"); when the user's text leaves too little room, fields
are dropped from the end (``par`` first) and, if not even ``rt`` fits, no token is written. The
user's text is never shortened.

The policy (which runtime, margins, rounding, when a limit may be lowered) is
``planner.recommend.time_limit`` (:class:`SlurmHint` is its ``RuntimeHint``); this module only
formats tokens and files and runs the Slurm commands.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from adapters.slurm.source import Runner, SlurmSource
from adapters.slurm.squeue import SqueueRecord, parse_squeue_records
from planner.errors import SourceError, SourcePermanentError, SpecError
from planner.recommend.time_limit import (
    RuntimeHint,
    TimeLimitPolicy,
    policy_time_limit_min,
    propose_time_limit_min,
)
from planner.specs.job import JobStatus

#: Longest comment slurmctld 22.05 accepts, in bytes (``strlen``), for submit and update.
COMMENT_MAX_BYTES = 1024
#: Prefix of the planner's token in a job comment.
HINT_PREFIX = "planner:hint="
#: First line of a hints file (format version).
HINTS_FILE_HEADER = "# planner slurm hints v1"

_WS = " \t\n\r\f\v"
# Our token: at the start or after ASCII whitespace, up to the next ASCII whitespace.
_TOKEN = re.compile(r"(?:(?<=[ \t\n\r\f\v])|^)planner:hint=[^ \t\n\r\f\v]*")
_JOB_ID = re.compile(r"\d+(?:_\d+|\+\d+)?")
_KEY_FORBIDDEN = re.compile(r"[\t\n\r]")
_NOT_FOUND_HINTS = ("invalid job id", "job not found", "does not exist")
_ENDED_HINTS = ("already completing or completed", "job is no longer pending")


class UnknownJobError(SourcePermanentError):
    """slurmctld does not know the job (it never existed or ended and was purged)."""


#: The hint of one job (``planner.recommend.time_limit.RuntimeHint``).
SlurmHint = RuntimeHint


# ----------------------------------------------------------------------------- token, comment


def _fields(hint: SlurmHint) -> list[str]:
    fields = [f"rt:{round(hint.predicted_runtime_s)}"]
    if hint.eta_s is not None:
        fields.append(f"eta:{round(hint.eta_s)}")
    if hint.runtime_p90_s is not None:
        fields.append(f"p90:{round(hint.runtime_p90_s)}")
    if hint.recommended_gpus is not None:
        fields.append(f"gpus:{hint.recommended_gpus}")
    if hint.recommended_parallelism is not None:
        fields.append(f"par:{hint.recommended_parallelism}")
    return fields


def hint_body(hint: SlurmHint, *, max_bytes: int | None = None) -> str:
    """The token's fields, ``rt:…;eta:…;…``, dropping fields from the end until it is at most
    ``max_bytes`` long (``""`` when not even ``rt`` fits)."""
    fields = _fields(hint)
    while fields:
        body = ";".join(fields)
        if max_bytes is None or len(body) <= max_bytes:
            return body
        fields.pop()
    return ""


def format_hint_token(hint: SlurmHint, *, max_bytes: int | None = None) -> str:
    """``planner:hint=…`` for ``hint``, at most ``max_bytes`` long (``""`` when it cannot fit)."""
    budget = None if max_bytes is None else max_bytes - len(HINT_PREFIX)
    if budget is not None and budget <= 0:
        return ""
    body = hint_body(hint, max_bytes=budget)
    return HINT_PREFIX + body if body else ""


def parse_hint_token(comment: str) -> SlurmHint | None:
    """The hint of the last ``planner:hint=`` token in ``comment``, or ``None`` when there is
    none or it is malformed (unknown keys are ignored)."""
    tokens = _TOKEN.findall(comment)
    if not tokens:
        return None
    values: dict[str, str] = {}
    for item in tokens[-1][len(HINT_PREFIX) :].split(";"):
        key, sep, value = item.partition(":")
        if sep:
            values[key] = value
    try:
        runtime = float(values["rt"])
        return SlurmHint(
            predicted_runtime_s=runtime,
            runtime_p90_s=float(values["p90"]) if "p90" in values else None,
            eta_s=float(values["eta"]) if "eta" in values else None,
            recommended_gpus=int(values["gpus"]) if "gpus" in values else None,
            recommended_parallelism=values.get("par"),
        )
    except (KeyError, ValueError):
        return None


def strip_hint(comment: str) -> str:
    """``comment`` without the planner's ``planner:hint=`` tokens; each token goes with the one
    space written before it (or, at the very start, the one after it), so
    ``strip_hint(merge_hint(text, h)) == text`` byte for byte for any text without a token."""
    out = comment
    while True:
        match = _TOKEN.search(out)
        if match is None:
            return out
        start, end = match.span()
        if start > 0 and out[start - 1] == " ":
            start -= 1
        elif start == 0 and out[end : end + 1] == " ":
            end += 1
        out = out[:start] + out[end:]


def merge_hint(comment: str, hint: SlurmHint | None, *, max_bytes: int = COMMENT_MAX_BYTES) -> str:
    """The comment with the planner's token replaced by one for ``hint`` (removed for ``None``).

    Everything else (the user's text, ``planner:scenario=…``, other tools' tokens) stays byte for
    byte; the token is appended after one space. The result is at most ``max_bytes`` UTF-8 bytes
    unless the text without our token already is longer: the token is shortened or left out,
    never the user's text. Pure and idempotent: ``merge_hint(merge_hint(c, h), h) ==
    merge_hint(c, h)``.
    """
    text = strip_hint(comment)
    if hint is None:
        return text
    used = len(text.encode("utf-8")) + (1 if text else 0)
    token = format_hint_token(hint, max_bytes=max_bytes - used)
    if not token:
        return text
    return f"{text} {token}" if text else token


# ----------------------------------------------------------------------------- writer


@dataclass(frozen=True, slots=True)
class HintWriteResult:
    """What :meth:`SlurmHintWriter.write` did to one job.

    ``comment``: the comment the job has now; ``comment_changed``: whether it was updated;
    ``time_limit_min``: the limit set in enforcing mode (``None``: left alone); ``skipped``: why
    nothing was written (e.g. the job ended), else ``""``; ``error``: set by
    :meth:`SlurmHintWriter.write_many` when this job failed.
    """

    job_id: str
    comment: str = ""
    comment_changed: bool = False
    time_limit_min: int | None = None
    skipped: str = ""
    error: SourceError | None = field(default=None, compare=False)


class SlurmHintWriter:
    """Writes :class:`SlurmHint` s into Slurm jobs with ``squeue --json`` and ``scontrol update``.

    Parameters as :class:`~adapters.slurm.source.SlurmSource` (``timeout_s``, ``bin_dir``,
    ``runner``, ``env``), plus ``enforce_time_limit`` (default ``False``: comments only) with
    its ``policy``, ``clock`` (epoch seconds, for the elapsed time) and ``max_comment_bytes``.

    Each call reads the queue once (``squeue --json``: 22.05 ignores ``--jobs`` with ``--json``,
    so it lists every job) and then updates only what changed, so writing the same hint again
    runs no update. A user editing the comment between that read and the update can lose that
    edit (Slurm has no compare-and-set for comments); the window is one command long.
    """

    def __init__(
        self,
        *,
        enforce_time_limit: bool = False,
        policy: TimeLimitPolicy | None = None,
        timeout_s: float = 10.0,
        bin_dir: str | None = None,
        runner: Runner | None = None,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        max_comment_bytes: int = COMMENT_MAX_BYTES,
    ) -> None:
        # The source runs the commands and classifies their failures exactly as for snapshots.
        self._cmd = SlurmSource(
            timeout_s=timeout_s,
            bin_dir=bin_dir,
            runner=runner,
            env=env,
            use_sacct=False,
            fetch_batch_scripts=False,
        )
        self.enforce_time_limit = enforce_time_limit
        self.policy = policy or TimeLimitPolicy()
        self._clock = clock
        self._max_comment_bytes = max_comment_bytes

    def write(self, job_id: str | int, hint: SlurmHint) -> HintWriteResult:
        """Write ``hint`` into one job (``"123"``, ``"123_4"`` array task, ``"123+0"`` het part).

        Raises ``SpecError`` for a malformed id, :class:`UnknownJobError` when slurmctld does
        not know the job, ``SourcePermanentError`` (e.g. permission denied, command missing) and
        ``SourceTemporaryError`` (timeout, controller down) otherwise.
        """
        key = _check_job_id(job_id)
        result = self.write_many({key: hint})[key]
        if result.error is not None:
            raise result.error
        return result

    def write_many(self, hints: Mapping[str, SlurmHint]) -> dict[str, HintWriteResult]:
        """Write each job's hint; one failing job does not stop the others (its result carries
        the ``error``; a malformed id gives a ``SourcePermanentError`` there). Raises
        ``SourceError`` only when the queue cannot be read."""
        if not hints:
            return {}
        records = self._records()
        now = self._clock()
        out: dict[str, HintWriteResult] = {}
        for job_id, hint in hints.items():
            try:
                rec = records.get(_check_job_id(job_id))
                if rec is None:
                    raise UnknownJobError(
                        "slurm:scontrol",
                        f"job {job_id} not found (never existed, or ended and was purged)",
                    )
                out[job_id] = self._write_one(rec, hint, now)
            except SpecError as exc:
                bad = SourcePermanentError("slurm:scontrol", str(exc))
                out[job_id] = HintWriteResult(job_id, skipped=str(exc), error=bad)
            except SourceError as exc:
                out[job_id] = HintWriteResult(job_id, skipped=str(exc), error=exc)
        return out

    def _records(self) -> dict[str, SqueueRecord]:
        text = self._cmd._run_ok("squeue", ["--json", "--all"])
        records = parse_squeue_records(text)
        by_id: dict[str, SqueueRecord] = {}
        for rec in records:
            by_id[rec.job.job_id] = rec
            by_id.setdefault(str(rec.slurm_job_id), rec)
        return by_id

    def _write_one(self, rec: SqueueRecord, hint: SlurmHint, now: float) -> HintWriteResult:
        job = rec.job
        if not job.status.is_active:
            return HintWriteResult(job.job_id, comment=job.comment, skipped=f"job {job.status}")
        comment = merge_hint(job.comment, hint, max_bytes=self._max_comment_bytes)
        changed = comment != job.comment
        if changed:
            self._update(job.job_id, f"Comment={comment}")
        limit_min = None
        if self.enforce_time_limit:
            elapsed = (
                now - job.start_time_s
                if job.status is JobStatus.RUNNING and job.start_time_s
                else 0.0
            )
            limit_min = propose_time_limit_min(
                hint, current_limit_s=job.time_limit_s, elapsed_s=elapsed, policy=self.policy
            )
            if limit_min is not None:
                self._update(job.job_id, f"TimeLimit={limit_min}")
        return HintWriteResult(
            job.job_id, comment=comment, comment_changed=changed, time_limit_min=limit_min
        )

    def _update(self, job_id: str, assignment: str) -> None:
        result = self._cmd._run("scontrol", ["update", f"JobId={job_id}", assignment])
        if result.returncode == 0:
            return
        text = (result.stderr.strip() or result.stdout.strip()).lower()
        if any(h in text for h in _NOT_FOUND_HINTS):
            raise UnknownJobError(
                "slurm:scontrol", f"job {job_id} not found: {text[-300:] or 'no output'}"
            )
        if any(h in text for h in _ENDED_HINTS):
            raise SourcePermanentError("slurm:scontrol", f"job {job_id} has ended: {text[-300:]}")
        raise self._cmd._failure("scontrol", result)


def _check_job_id(job_id: str | int) -> str:
    text = str(job_id).strip()
    if not _JOB_ID.fullmatch(text):
        raise SpecError("job_id", f"{job_id!r} is not a Slurm job id (123, 123_4 or 123+0)")
    return text


# ----------------------------------------------------------------------------- hints file


def scenario_key(user: str, path: str) -> str:
    """Hints-file key of ``user``'s jobs submitted with ``--comment=planner:scenario=PATH``
    (absolute): per user, so jobs of different users naming the same file never share a hint."""
    _check_user(user)
    if not os.path.isabs(path):
        raise SpecError("path", f"{path!r}: scenario keys need an absolute path")
    return f"scenario:{user}:{os.path.normpath(path)}"


def _check_user(user: str) -> None:
    if not user or "/" in user or ":" in user:
        raise SpecError("user", f"{user!r}: a user name without '/' or ':'")


def job_key(user: str, name: str) -> str:
    """Hints-file key of jobs submitted by ``user`` under the job name ``name``."""
    _check_user(user)
    if not name:
        raise SpecError("name", "an empty job name cannot be a key")
    return f"job:{user}/{name}"


def format_hints_file(
    hints: Mapping[str, SlurmHint], *, policy: TimeLimitPolicy | None = None
) -> str:
    """The text of a hints file: a header, then one line per key, sorted::

        KEY<TAB>TIME_LIMIT_MIN<TAB>BODY

    ``KEY`` from :func:`scenario_key` or :func:`job_key`; ``TIME_LIMIT_MIN`` the limit
    :func:`policy_time_limit_min` gives (``job_submit.lua`` applies it only when configured to
    and the user gave no ``--time``); ``BODY`` what follows ``planner:hint=`` in the comment.
    Raises ``SpecError`` for a key with a tab or newline or without a ``scenario:``/``job:``
    prefix.
    """
    lines = [HINTS_FILE_HEADER]
    for key in sorted(hints):
        if _KEY_FORBIDDEN.search(key) or not key.startswith(("scenario:", "job:")):
            raise SpecError("key", f"{key!r}: use scenario_key() or job_key() (no tabs/newlines)")
        hint = hints[key]
        body = hint_body(hint, max_bytes=COMMENT_MAX_BYTES - len(HINT_PREFIX))
        lines.append(f"{key}\t{policy_time_limit_min(hint, policy)}\t{body}")
    return "\n".join(lines) + "\n"


def write_hints_file(
    path: str | os.PathLike[str],
    hints: Mapping[str, SlurmHint],
    *,
    policy: TimeLimitPolicy | None = None,
    mode: int = 0o644,
) -> None:
    """Write :func:`format_hints_file` to ``path`` atomically (temporary file in the same
    directory, fsync, rename), so slurmctld never reads half a file. Raises ``SpecError`` for a
    bad key and ``OSError`` when the file cannot be written (the old file stays)."""
    text = format_hints_file(hints, policy=policy)
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    _fsync_dir(target.parent)


def read_hints_file(path: str | os.PathLike[str]) -> dict[str, tuple[int | None, str]]:
    """Parse a hints file: key → (time limit minutes or ``None``, token body). Lines that are
    blank, comments or malformed are skipped (the same rule the Lua plugin follows)."""
    out: dict[str, tuple[int | None, str]] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if not line or line.startswith("#") or len(parts) != 3 or not parts[2]:
            continue
        limit = int(parts[1]) if parts[1].isdigit() else None
        out[parts[0]] = (limit, parts[2])
    return out


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


__all__ = [
    "COMMENT_MAX_BYTES",
    "HINTS_FILE_HEADER",
    "HINT_PREFIX",
    "HintWriteResult",
    "SlurmHint",
    "SlurmHintWriter",
    "TimeLimitPolicy",
    "UnknownJobError",
    "format_hint_token",
    "format_hints_file",
    "hint_body",
    "job_key",
    "merge_hint",
    "parse_hint_token",
    "policy_time_limit_min",
    "propose_time_limit_min",
    "read_hints_file",
    "scenario_key",
    "strip_hint",
    "write_hints_file",
]
