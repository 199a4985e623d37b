"""The head of a job's log as the witness readers see it: bounded, split into lines, each line
without what launchers and loggers put in front of every line, and cited ``log:<line>``.

Launchers prefix each line of a process's output: ``srun --label`` with the task number
(``0: ``), ``torchrun --tee`` with the process's role and rank (``[rank0]:``, ``[default0]:``).
Those prefixes and terminal colour codes are removed; a logger's own prefix on the first line of
a record (``[titan] 2025-... - root - INFO - ``, ``[NeMo I ...] ``) is left to each format, which
searches its marker within the line.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass

from planner.launch.types import Facts

__all__ = ["LOG_HEAD_CHARS", "MAX_LINES", "MAX_LINE_CHARS", "LogView", "Marker", "take_facts"]

LOG_HEAD_CHARS = 256 * 1024
"""How much of a log is read (characters from its start): frameworks print their resolved
configuration before the first step; a Megatron-LM argument dump is about 30 KiB."""

MAX_LINES = 20_000
"""At most this many lines of the head are read (a log of empty or very short lines)."""

MAX_LINE_CHARS = 16 * 1024
"""Longer lines are read as empty (a progress bar rewritten in place, binary output): no
configuration line of the formats read is that long."""

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_LAUNCHER_PREFIX = re.compile(r"^(?:\s*\d+: )?(?:\[[A-Za-z_]+\d+\]:)?")
_PREFIX_STARTS = frozenset("[0123456789 \t")


@dataclass(frozen=True, slots=True)
class Marker:
    """A line a format prints: ``needle``, text every such line holds (found by a plain
    substring search, so a scan of the head is one pass of ``str.find``), and ``pattern``, the
    line's regular expression (searched only in lines holding the needle)."""

    needle: str
    pattern: re.Pattern[str]


@dataclass(frozen=True, slots=True)
class LogView:
    """``lines``: the log's head, one entry per line, launcher prefixes and colour codes
    removed (indentation kept); ``text``: those lines joined by newlines and ``starts``: where
    each line starts in ``text``."""

    lines: tuple[str, ...]
    text: str = ""
    starts: tuple[int, ...] = ()

    @classmethod
    def of(cls, text: str, limit: int = LOG_HEAD_CHARS) -> LogView:
        """The first ``limit`` characters of ``text`` (at most :data:`MAX_LINES` lines) as
        lines; a line cut by the limit is dropped."""
        head = text[:limit]
        if len(text) > limit:
            head = head[: head.rfind("\n") + 1]
        lines = []
        for raw in head.splitlines()[:MAX_LINES]:
            if len(raw) > MAX_LINE_CHARS:
                lines.append("")
                continue
            line = _ANSI.sub("", raw) if "\x1b" in raw else raw
            if line[:1] in _PREFIX_STARTS:
                line = _LAUNCHER_PREFIX.sub("", line, count=1)
            lines.append(line)
        starts = []
        offset = 0
        for line in lines:
            starts.append(offset)
            offset += len(line) + 1
        return cls(tuple(lines), "\n".join(lines), tuple(starts))

    @staticmethod
    def cite(index: int) -> str:
        """How line ``index`` (0-based) is cited: ``log:<1-based line>``."""
        return f"log:{index + 1}"

    def search(self, marker: Marker, start: int = 0) -> Iterator[tuple[int, re.Match[str]]]:
        """``(line index, match)`` of each line from ``start`` on that holds ``marker``."""
        if start >= len(self.starts):
            return
        position = self.text.find(marker.needle, self.starts[start])
        while position >= 0:
            index = bisect.bisect_right(self.starts, position) - 1
            match = marker.pattern.search(self.lines[index])
            if match is not None:
                yield index, match
            following = index + 1
            if following >= len(self.starts):
                return
            position = self.text.find(marker.needle, self.starts[following])

    def first(self, marker: Marker, start: int = 0) -> tuple[int, re.Match[str]] | None:
        """The first line from ``start`` on that holds ``marker``, or None."""
        return next(self.search(marker, start), None)


def take_facts(into: Facts, found: Facts) -> None:
    """Copy what ``found`` determined (its values that are not assumed defaults) into
    ``into``; ``found``'s notes, written for a launch, are left behind."""
    for name, value in found:
        if name not in found.assumed:
            into.set(name, value.value, value.source)
