"""Incremental reading of training logs: the ``ProgressReader`` the service polls.

``LogTailer.read`` reads only the bytes appended since a ``TailCursor``, at most
``max_read_bytes`` per call so a huge backlog never blocks a poll (the next call goes on where
this one stopped), and turns each complete line into a ``ProgressRecord`` with
``adapters.logs.parsers.parse_line``. A job's log is read under the job-file rules of
``adapters.files`` (the same as for its scenario, traces and configs): a symlink out of the
job's tree, a file its user may not read, a FIFO or a device is refused with the reason.

Lines end at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (tqdm progress bars rewrite their line with
``\\r``). A last line without its end is left for the next call: the returned cursor points
before it. For a live tqdm bar the newest update is that unterminated tail, so bars are seen one
refresh late. A final read (``read(..., final=True)``: the job ended, its log is complete) that
reaches the file's end reads that line too and gives what the parser held for lines that will
not come (``LogContext.finish``), as a whole-log read does. Lines longer than
``max_line_bytes`` are skipped, including one longer than a whole
read (the cursor then moves past the bytes read, and the next read drops the rest of that line:
it knows it starts mid-line because the byte before the cursor is not a line end). Undecodable
bytes are replaced (UTF-8 with U+FFFD).

Rotation (the path now names another inode) and truncation (the file is smaller than the cursor's
offset or than the size it had) restart reading at byte 0.

Lines are parsed with one ``adapters.logs.context.LogContext`` per log, kept between calls
while each call continues where the previous one on that path stopped (same inode and offset;
the last ``MAX_CONTEXTS`` paths read are kept), so that formats whose lines depend on earlier
ones (MLPerf MLLOG, DeepSpeed-Chat, modded-nanogpt, DeepSpeed's engine timestamps) read as in
a whole-log read. What later lines depend on travels with the cursor
(``TailCursor.parser_state``, ``LogContext.carried``): a cursor the tailer has no context for (a
service restart, another reader, a context dropped from the ``MAX_CONTEXTS``) goes on with the
context it carries (``LogContext.resumed``), seeded with ``TailCursor.last_iteration``, and
reads as the tailer that wrote it would have (an MLLOG header, a Trainer bar's total and
clock, the formats seen before); a cursor of an older version (no state) starts a fresh one.

Megatron-style lines report the mean step time since the previous log line, so a record's
``num_iterations`` is set to the difference with the previous Megatron iteration, taken from the
same read or from ``TailCursor.last_iteration``; it stays 1 for the first line ever seen and when
the iteration did not increase (a restart from a checkpoint). Records without ``train_iters``
(torchtitan step lines) take it from the last earlier record of the same format that had one
(torchtitan's start line).
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import tzinfo
from typing import Final

from adapters.files import (
    DEFAULT_TIMEOUT_S,
    FilePart,
    JobFileRead,
    MissingFileError,
    ReadFrom,
    job_file_access,
    lstat_paths,
    read_job_file_part,
    read_job_file_parts,
    read_local_file_part,
)
from adapters.logs.context import LogContext
from adapters.logs.parsers import Record, parse_lines
from planner.errors import SourcePermanentError, SpecError
from planner.specs.job import JobState, TailCursor

DEFAULT_MAX_READ_BYTES: Final = 4 * 1024 * 1024
DEFAULT_MAX_LINE_BYTES: Final = 64 * 1024
MAX_CONTEXTS: Final = 4096
"""Logs whose parser state a ``LogTailer`` keeps between calls (least recently read dropped)."""
MAX_AHEAD_BYTES: Final = 64 * 1024 * 1024
"""Bytes of logs ``LogTailer.read_ahead`` reads at most in one call (held until each is
parsed; the logs past it are read one by one, as before)."""
MAX_MISSING: Final = 16384
"""Paths a ``LogTailer`` remembers its last read found missing (least recently read dropped)."""

_LINE_END = re.compile(rb"\r\n|\r|\n")
_ENDS: Final = (ord("\n"), ord("\r"))


def _unchanged(cursor: TailCursor, st: os.stat_result) -> bool:
    """The file is the one the cursor read, at the size it had then."""
    return cursor.inode == st.st_ino and cursor.offset_bytes == st.st_size == cursor.size_bytes


def _start(cursor: TailCursor, st: os.stat_result) -> tuple[int, bool]:
    """(byte offset where reading goes on, whether that is a restart at 0): rotation (another
    inode) and truncation (smaller than the cursor's offset or recorded size) restart."""
    restart = (
        cursor.inode not in (0, st.st_ino)
        or st.st_size < cursor.offset_bytes
        or st.st_size < cursor.size_bytes
    )
    return (0 if restart else cursor.offset_bytes), restart


def _read_from(cursor: TailCursor) -> ReadFrom:
    """Where to read the log of ``cursor`` from, given the opened file's ``fstat``: one byte
    before where reading goes on (None: it did not change, nothing to read)."""

    def read_from(st: os.stat_result) -> int | None:
        if _unchanged(cursor, st):
            return None
        start, _ = _start(cursor, st)
        return max(0, start - 1) if st.st_size > start else None

    return read_from


@dataclass(frozen=True, slots=True)
class _Ahead:
    """What a log read ahead was read for: its cursor, the roots and user it was read as."""

    cursor: TailCursor
    roots: tuple[str, ...]
    user: str | None


class LogTailer:
    """Reads training progress from a growing log file; a ``planner.ports.ProgressReader``.

    ``max_read_bytes`` bounds the bytes read per call; ``max_line_bytes`` the length of a line
    that is still parsed. ``tz`` is the zone of timestamps the log prints without one (None: the
    host's local zone, as for ``parse_line``). ``allowed_file_roots``: per scheduler name, the
    directories a job's log may lie under besides a Slurm job's working directory (the
    settings' ``slurm.allowed_file_roots`` and ``kubernetes.allowed_file_roots``, as for the
    other files a job names); ``timeout_s``: time limit of one read of a job's log, seconds.
    """

    def __init__(
        self,
        *,
        max_read_bytes: int = DEFAULT_MAX_READ_BYTES,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        tz: tzinfo | None = None,
        allowed_file_roots: Mapping[str, Sequence[str]] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if max_read_bytes < 1:
            raise SpecError("max_read_bytes", "must be at least 1 byte")
        if max_line_bytes < 1:
            raise SpecError("max_line_bytes", "must be at least 1 byte")
        self.max_read_bytes = max_read_bytes
        self.max_line_bytes = max_line_bytes
        self.tz = tz
        self.timeout_s = timeout_s
        self._allowed_file_roots = {
            scheduler: tuple(roots) for scheduler, roots in (allowed_file_roots or {}).items()
        }
        self._contexts: OrderedDict[str, tuple[int, int, LogContext]] = OrderedDict()
        # the paths whose last read found no file there, under the rules (``unchanged``)
        self._missing: OrderedDict[str, None] = OrderedDict()
        # what ``read_ahead`` read, by cursor and whose view it was read as, for ``read``
        self._ahead: dict[_Ahead, FilePart | SourcePermanentError] = {}

    def read(
        self, cursor: TailCursor, *, job: JobState | None = None, final: bool = False
    ) -> tuple[list[Record], TailCursor]:
        """Parse the complete lines appended since ``cursor``; returns records and the new cursor.

        ``job``: the job whose log this is; the file is then read under the job-file rules of
        :mod:`adapters.files` (under its working directory or ``allowed_file_roots``, as its user
        may see it, no symlink out, regular files only, within ``timeout_s``). Without ``job``
        the caller vouches for the path (a log the planner's own user names): regular files
        only, opened non-blocking.

        A missing file gives no records and ``cursor`` unchanged, and so does a file that did
        not grow (same inode, size at the cursor: nothing read). Raises
        ``SourcePermanentError`` when a rule refuses the file (a symlink out of the job's
        tree, a file its user may not read, a FIFO or device) or it cannot be read for lack of
        permission, and ``SourceTemporaryError`` for a timeout or other I/O failures; never for
        its content, and no message holds any of it.

        ``final``: the log is complete (its job ended). A read that reaches the file's end
        then also parses its last line without a line end and gives the records held for a
        line that will not come (``LogContext.finish``), as a whole-log read
        (``adapters.logs.reading``) does; the cursor then points at the file's end and carries
        no held record, so a second final read gives nothing again. A file that did not grow
        is finished from the cursor's context (nothing read). A final read of a backlog longer
        than ``max_read_bytes`` reads it as usual and finishes nothing: a later final read goes
        on and finishes once it reaches the end (the records come in log order, once). A
        missing file gives nothing, final or not.
        """
        try:
            part = self._read_part(cursor, job)
        except MissingFileError:
            self._missing[cursor.path] = None
            self._missing.move_to_end(cursor.path)
            if len(self._missing) > MAX_MISSING:
                self._missing.popitem(last=False)
            return [], cursor
        except BaseException:
            self._missing.pop(cursor.path, None)
            raise
        self._missing.pop(cursor.path, None)
        st = part.info
        if _unchanged(cursor, st) and not final:  # nothing new: nothing read
            if cursor.path in self._contexts:
                self._contexts.move_to_end(cursor.path)
            return [], cursor
        start, restart = _start(cursor, st)
        last_iteration = None if restart else cursor.last_iteration
        lead = 1 if start > 0 else 0
        data = part.data[: self.max_read_bytes + lead] if st.st_size > start else b""

        mid_line = lead == 1 and len(data) > 0 and data[0] not in _ENDS
        body = data[lead:]
        read_bytes = len(body)
        ends = final and start + read_bytes >= st.st_size  # the whole log is read with this
        if ends and body and body[-1] not in _ENDS:
            body += b"\n"  # a complete log's last line ends where the file does
        consumed, complete = self._consumable(body, mid_line)
        consumed = min(consumed, read_bytes)
        first = 0
        if mid_line:
            m = _LINE_END.search(body, 0, complete)
            first = m.end() if m else complete
        carried = None if restart else cursor.parser_state
        context = self._context(cursor.path, st.st_ino, start, last_iteration, carried)
        records = self._parse(body[first:complete], context)
        if ends:
            records.extend(context.finish())
        new_offset = start + consumed
        self._keep(cursor.path, st.st_ino, new_offset, context)
        new_cursor = dataclasses.replace(
            cursor,
            inode=st.st_ino,
            offset_bytes=new_offset,
            size_bytes=max(st.st_size, new_offset),
            last_iteration=context.megatron_last_iteration,
            parser_state=context.carried(),
        )
        return records, new_cursor

    def unchanged(self, cursors: Sequence[TailCursor]) -> set[str]:
        """The paths among ``cursors`` whose file is still the regular file each cursor read,
        at the size it had then (same inode, size at the cursor): :meth:`read` would read
        nothing there and return the cursor as it is. One ``lstat`` per path, all in one
        worker thread within ``timeout_s`` (:func:`adapters.files.lstat_paths`: a hung
        network file system holds that thread, never the caller); nothing is opened or read,
        so no rule is bypassed: a path not listed (grown, replaced, a symlink, missing, not
        looked at in time) is read with :meth:`read` under the rules. A path whose last
        :meth:`read` found no file there (under the rules: its directories allowed) and that
        still does not exist is named too: reading it gives nothing and the cursor as it is
        (the running jobs whose log is elsewhere or not begun: 880 of 3,100 in the load
        benchmark, each else handed to a reader thread every cycle); should its directories
        meanwhile lead out of the allowed ones, that is told once a file is there to read."""
        if not cursors:
            return set()
        infos = lstat_paths("logs", [c.path for c in cursors], timeout_s=self.timeout_s)
        quiet: set[str] = set()
        for cursor in cursors:
            if cursor.path not in infos:
                continue
            st = infos[cursor.path]
            if st is None:
                if cursor.path in self._missing:
                    quiet.add(cursor.path)
                continue
            if stat.S_ISREG(st.st_mode) and _unchanged(cursor, st):
                quiet.add(cursor.path)
                if cursor.path in self._contexts:
                    self._contexts.move_to_end(cursor.path)
        return quiet

    def read_ahead(self, reads: Sequence[tuple[TailCursor, JobState]]) -> int:
        """Read the logs that :meth:`read` will be asked for next (``(cursor, job)`` as it
        will be called) in one hand-off to a worker thread
        (:func:`adapters.files.read_job_file_parts`: each under the job-file rules as its
        job's user may see it, all within ``timeout_s`` and :data:`MAX_AHEAD_BYTES`): a cycle
        reads thousands of logs, each else a hand-off of its own. :meth:`read` then takes what
        was read for its cursor and view instead of reading (once); what this call read for
        no later read is dropped at the next call. A log that failed otherwise or was not read
        (in time, within the bytes) is read by :meth:`read` as usual. Returns how many logs
        were asked of the worker thread."""
        self._ahead = {}
        wanted: dict[_Ahead, JobFileRead] = {}
        for cursor, job in reads:
            roots, user = job_file_access(job, self._allowed_file_roots.get(job.scheduler, ()))
            wanted.setdefault(
                _Ahead(cursor, roots, user), JobFileRead(path=cursor.path, roots=roots, user=user)
            )
        if not wanted:
            return 0
        keys = list(wanted)
        found = read_job_file_parts(
            "logs",
            [(wanted[key], _read_from(key.cursor)) for key in keys],
            max_bytes=self.max_read_bytes + 1,
            max_total_bytes=MAX_AHEAD_BYTES,
            timeout_s=self.timeout_s,
        )
        self._ahead = {keys[index]: outcome for index, outcome in found.items()}
        return len(keys)

    def _read_part(self, cursor: TailCursor, job: JobState | None) -> FilePart:
        """The bytes from just before where reading goes on (one byte of lead, to tell whether
        the cursor stopped mid-line), at most ``max_read_bytes`` after it."""
        source = "logs"
        if job is None:
            return read_local_file_part(
                source,
                cursor.path,
                read_from=_read_from(cursor),
                max_bytes=self.max_read_bytes + 1,
            )
        roots, user = job_file_access(job, self._allowed_file_roots.get(job.scheduler, ()))
        ahead = self._ahead.pop(_Ahead(cursor, roots, user), None)
        if isinstance(ahead, SourcePermanentError):
            raise type(ahead)(ahead.source, ahead.message)
        if ahead is not None:
            return ahead
        return read_job_file_part(
            source,
            cursor.path,
            roots=roots,
            user=user,
            read_from=_read_from(cursor),
            max_bytes=self.max_read_bytes + 1,
            timeout_s=self.timeout_s,
        )

    def _consumable(self, body: bytes, mid_line: bool) -> tuple[int, int]:
        """(bytes of ``body`` to consume, bytes holding complete lines to parse).

        Complete lines end at the last line end; an unterminated tail stays for the next call
        unless it is already an over-long line (or fills the whole read), which is dropped.
        """
        last_end = max(body.rfind(b"\n"), body.rfind(b"\r"))
        complete = last_end + 1
        tail = len(body) - complete
        if tail > self.max_line_bytes or (complete == 0 and len(body) >= self.max_read_bytes):
            return len(body), complete
        if complete == 0 and mid_line:
            return len(body), 0  # still inside a line already being skipped
        return complete, complete

    def _context(
        self, path: str, inode: int, offset: int, last_iteration: int | None, carried: str | None
    ) -> LogContext:
        """The parser state of the log at ``path`` if the last read there ended at ``offset``,
        else the one the cursor carries (``carried``: ``LogContext.carried``)."""
        kept = self._contexts.get(path)
        if kept is not None and kept[0] == inode and kept[1] == offset:
            context = kept[2]
        else:
            context = LogContext.resumed(carried)
        context.megatron_last_iteration = last_iteration
        return context

    def _keep(self, path: str, inode: int, offset: int, context: LogContext) -> None:
        self._contexts[path] = (inode, offset, context)
        self._contexts.move_to_end(path)
        while len(self._contexts) > MAX_CONTEXTS:
            self._contexts.popitem(last=False)
        context.events.clear()  # the tailer reports records only; keep memory bounded

    def _parse(self, chunk: bytes, context: LogContext) -> list[Record]:
        lines = (
            raw.decode("utf-8", errors="replace")
            for raw in _LINE_END.split(chunk)
            if raw and len(raw) <= self.max_line_bytes
        )
        return parse_lines(lines, tz=self.tz, context=context)
