"""Incremental reading of training logs: the ``ProgressReader`` the service polls.

``LogTailer.read`` reads only the bytes appended since a ``TailCursor``, at most
``max_read_bytes`` per call so a huge backlog never blocks a poll (the next call goes on where
this one stopped), and turns each complete line into a ``ProgressRecord`` with
``adapters.logs.parsers.parse_line``. All file I/O of the log adapter lives here.

Lines end at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (tqdm progress bars rewrite their line with
``\\r``). A last line without its end is left for the next call: the returned cursor points
before it. For a live tqdm bar the newest update is that unterminated tail, so bars are seen one
refresh late. Lines longer than ``max_line_bytes`` are skipped, including one longer than a whole
read (the cursor then moves past the bytes read, and the next read drops the rest of that line:
it knows it starts mid-line because the byte before the cursor is not a line end). Undecodable
bytes are replaced (UTF-8 with U+FFFD).

Rotation (the path now names another inode) and truncation (the file is smaller than the cursor's
offset or than the size it had) restart reading at byte 0.

Lines are parsed with one ``adapters.logs.context.LogContext`` per log, kept between calls
while each call continues where the previous one on that path stopped (same inode and offset;
the last ``MAX_CONTEXTS`` paths read are kept), so that formats whose lines depend on earlier
ones (MLPerf MLLOG, DeepSpeed-Chat, modded-nanogpt, DeepSpeed's engine timestamps) read as in
a whole-log read. A cursor the tailer has no context for (a service restart, another reader)
starts a fresh one, seeded with ``TailCursor.last_iteration``; a format that needs its header
(MLLOG) then gives no records until it is seen again.

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
from datetime import tzinfo
from typing import Final

from adapters.logs.context import LogContext
from adapters.logs.parsers import Record, parse_line
from planner.errors import SourcePermanentError, SourceTemporaryError, SpecError
from planner.specs.job import TailCursor

DEFAULT_MAX_READ_BYTES: Final = 4 * 1024 * 1024
DEFAULT_MAX_LINE_BYTES: Final = 64 * 1024
MAX_CONTEXTS: Final = 4096
"""Logs whose parser state a ``LogTailer`` keeps between calls (least recently read dropped)."""

_LINE_END = re.compile(rb"\r\n|\r|\n")
_ENDS: Final = (ord("\n"), ord("\r"))


class LogTailer:
    """Reads training progress from a growing log file; a ``planner.ports.ProgressReader``.

    ``max_read_bytes`` bounds the bytes read per call; ``max_line_bytes`` the length of a line
    that is still parsed. ``tz`` is the zone of timestamps the log prints without one (None: the
    host's local zone, as for ``parse_line``).
    """

    def __init__(
        self,
        *,
        max_read_bytes: int = DEFAULT_MAX_READ_BYTES,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        tz: tzinfo | None = None,
    ) -> None:
        if max_read_bytes < 1:
            raise SpecError("max_read_bytes", "must be at least 1 byte")
        if max_line_bytes < 1:
            raise SpecError("max_line_bytes", "must be at least 1 byte")
        self.max_read_bytes = max_read_bytes
        self.max_line_bytes = max_line_bytes
        self.tz = tz
        self._contexts: OrderedDict[str, tuple[int, int, LogContext]] = OrderedDict()

    def read(self, cursor: TailCursor) -> tuple[list[Record], TailCursor]:
        """Parse the complete lines appended since ``cursor``; returns records and the new cursor.

        A missing file (or one that is not a regular file) gives no records and ``cursor``
        unchanged, and so does a file that did not grow (same inode, size at the cursor: not
        opened). Raises ``SourcePermanentError`` when the file cannot be read for lack of
        permission and ``SourceTemporaryError`` for other I/O failures; never for its content.
        """
        source = f"logs:{cursor.path}"
        try:
            info = os.stat(cursor.path)
            if not stat.S_ISREG(info.st_mode):
                return [], cursor
            if cursor.inode == info.st_ino and (
                cursor.offset_bytes == info.st_size == cursor.size_bytes
            ):  # nothing new: not even opened
                if cursor.path in self._contexts:
                    self._contexts.move_to_end(cursor.path)
                return [], cursor
            # Non-blocking: a FIFO swapped in after the check must not block the poll.
            fd = os.open(cursor.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode):
                    return [], cursor
                restart = (
                    cursor.inode not in (0, st.st_ino)
                    or st.st_size < cursor.offset_bytes
                    or st.st_size < cursor.size_bytes
                )
                start = 0 if restart else cursor.offset_bytes
                last_iteration = None if restart else cursor.last_iteration
                lead = 1 if start > 0 else 0
                data = b""
                if st.st_size > start:
                    f.seek(start - lead)
                    data = f.read(self.max_read_bytes + lead)
        except (FileNotFoundError, NotADirectoryError):
            return [], cursor
        except PermissionError as exc:
            raise SourcePermanentError(source, f"cannot read the log: {exc}") from exc
        except OSError as exc:
            raise SourceTemporaryError(source, f"reading the log failed: {exc}") from exc

        mid_line = lead == 1 and len(data) > 0 and data[0] not in _ENDS
        body = data[lead:]
        consumed, complete = self._consumable(body, mid_line)
        first = 0
        if mid_line:
            m = _LINE_END.search(body, 0, complete)
            first = m.end() if m else complete
        context = self._context(cursor.path, st.st_ino, start, last_iteration)
        records = self._parse(body[first:complete], context)
        new_offset = start + consumed
        self._keep(cursor.path, st.st_ino, new_offset, context)
        new_cursor = dataclasses.replace(
            cursor,
            inode=st.st_ino,
            offset_bytes=new_offset,
            size_bytes=max(st.st_size, new_offset),
            last_iteration=context.megatron_last_iteration,
        )
        return records, new_cursor

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
        self, path: str, inode: int, offset: int, last_iteration: int | None
    ) -> LogContext:
        """The parser state of the log at ``path`` if the last read there ended at ``offset``."""
        kept = self._contexts.get(path)
        if kept is not None and kept[0] == inode and kept[1] == offset:
            context = kept[2]
        else:
            context = LogContext()
        context.megatron_last_iteration = last_iteration
        return context

    def _keep(self, path: str, inode: int, offset: int, context: LogContext) -> None:
        self._contexts[path] = (inode, offset, context)
        self._contexts.move_to_end(path)
        while len(self._contexts) > MAX_CONTEXTS:
            self._contexts.popitem(last=False)
        context.events.clear()  # the tailer reports records only; keep memory bounded

    def _parse(self, chunk: bytes, context: LogContext) -> list[Record]:
        records: list[Record] = []
        for raw in _LINE_END.split(chunk):
            if not raw or len(raw) > self.max_line_bytes:
                continue
            record = parse_line(raw.decode("utf-8", errors="replace"), tz=self.tz, context=context)
            if record is not None:
                records.append(record)
        return records
