"""Input files of the ``planner`` commands: read with a size bound (``/dev/zero``, a huge file or
an endless pipe cost at most the bound), decoded as UTF-8, parsed with the bounded loaders of
``planner.scenario.loading``; every failure a ``SpecError`` naming the file."""

from __future__ import annotations

import os
import stat
import sys

from planner.errors import SpecError
from planner.scenario import format_for_path, read_documents
from planner.scenario.loading import MAX_JSON_CHARS

__all__ = ["MAX_INPUT_BYTES", "input_documents", "read_input", "read_input_text"]

MAX_INPUT_BYTES = MAX_JSON_CHARS
"""Largest input file a command reads, bytes (64 MiB); the loaders bound YAML further."""


_CHUNK_BYTES = 1 << 20


def read_input(path: str, max_bytes: int) -> bytes:
    """At most ``max_bytes`` of an input the command line names: ``-`` is standard input, any
    other path is opened as given (a pipe or process substitution included) and read in chunks
    until its end or the limit, so ``/dev/zero`` or a huge file cost ``max_bytes`` at most.

    These are the files of the planner's own user (the command line), not files a job names
    (those go through ``adapters.files`` and its rules). Raises ``SpecError(path, ...)`` when it
    cannot be opened, is a directory, or holds more than ``max_bytes`` bytes.
    """
    try:
        if path == "-":
            stdin = getattr(sys.stdin, "buffer", None)
            if stdin is None:  # a text-only stand-in (tests): at most max_bytes + 1 characters
                data = sys.stdin.read(max_bytes + 1).encode("utf-8")
            else:
                data = stdin.read(max_bytes + 1) or b""
        else:
            fd = os.open(path, os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC)
            try:
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    raise SpecError(path, "cannot read the file (it is a directory)")
                chunks: list[bytes] = []
                left = max_bytes + 1
                while left > 0:
                    chunk = os.read(fd, min(_CHUNK_BYTES, left))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    left -= len(chunk)
                data = b"".join(chunks)
            finally:
                os.close(fd)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise SpecError(path, f"cannot read the file ({reason}); check the path") from None
    if len(data) > max_bytes:
        raise SpecError(
            path, f"more than {max_bytes:,} bytes, the limit of an input file; split it"
        )
    return data


def read_input_text(path: str, *, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of ``path`` (``-``: standard input), at most ``max_bytes`` bytes.

    Raises ``SpecError(path, ...)`` when it cannot be read, is a directory, holds more than
    ``max_bytes`` bytes or is not UTF-8.
    """
    data = read_input(path, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(path, f"cannot read the file (not UTF-8 text: {exc.reason})") from None


def input_documents(path: str) -> list[object]:
    """Raw documents of one input file (``-`` is standard input, read as YAML); a file that
    cannot be read or parsed gives one ``SpecError`` instance (reported as that input's
    error line while the other inputs still run)."""
    try:
        return read_documents(read_input_text(path), format_for_path(path), source=path)
    except SpecError as exc:
        return [exc]
