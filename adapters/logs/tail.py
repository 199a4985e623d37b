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

Megatron-style lines report the mean step time since the previous log line, so a record's
``num_iterations`` is set to the difference with the previous Megatron iteration, taken from the
same read or from ``TailCursor.last_iteration``; it stays 1 for the first line ever seen and when
the iteration did not increase (a restart from a checkpoint). Records without ``train_iters``
(torchtitan step lines) take it from the last earlier record of the same framework in the same
read that had one (torchtitan's start line).
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from datetime import tzinfo
from typing import Final

from adapters.logs.parsers import Record, parse_line
from planner.errors import SourcePermanentError, SourceTemporaryError, SpecError
from planner.specs.job import ProgressRecord, TailCursor

DEFAULT_MAX_READ_BYTES: Final = 4 * 1024 * 1024
DEFAULT_MAX_LINE_BYTES: Final = 64 * 1024

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

    def read(self, cursor: TailCursor) -> tuple[list[Record], TailCursor]:
        """Parse the complete lines appended since ``cursor``; returns records and the new cursor.

        A missing file (or one that is not a regular file) gives no records and ``cursor``
        unchanged. Raises ``SourcePermanentError`` when the file cannot be read for lack of
        permission and ``SourceTemporaryError`` for other I/O failures; never for its content.
        """
        source = f"logs:{cursor.path}"
        try:
            if not stat.S_ISREG(os.stat(cursor.path).st_mode):
                return [], cursor
            with open(cursor.path, "rb") as f:
                st = os.fstat(f.fileno())
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
        records, last_iteration = self._parse(body[first:complete], last_iteration)
        new_offset = start + consumed
        new_cursor = dataclasses.replace(
            cursor,
            inode=st.st_ino,
            offset_bytes=new_offset,
            size_bytes=max(st.st_size, new_offset),
            last_iteration=last_iteration,
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

    def _parse(self, chunk: bytes, last_iteration: int | None) -> tuple[list[Record], int | None]:
        records: list[Record] = []
        totals: dict[str, int] = {}
        for raw in _LINE_END.split(chunk):
            if not raw or len(raw) > self.max_line_bytes:
                continue
            record = parse_line(raw.decode("utf-8", errors="replace"), tz=self.tz)
            if record is None:
                continue
            if not isinstance(record, ProgressRecord):
                records.append(record)
                continue
            if record.framework == "megatron":
                if last_iteration is not None and record.iteration > last_iteration:
                    record = dataclasses.replace(
                        record, num_iterations=record.iteration - last_iteration
                    )
                last_iteration = record.iteration
            if record.train_iters is not None:
                totals[record.framework] = record.train_iters
            elif record.framework in totals and totals[record.framework] >= record.iteration:
                record = dataclasses.replace(record, train_iters=totals[record.framework])
            records.append(record)
        return records, last_iteration
