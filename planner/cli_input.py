"""Input files of the ``planner`` commands: read with a size bound (``/dev/zero``, a huge file or
an endless pipe cost at most the bound), decoded as UTF-8, parsed with the bounded loaders of
``planner.scenario.loading``; every failure a ``SpecError`` naming the file."""

from __future__ import annotations

from adapters.files import read_input
from planner.errors import SourceError, SpecError
from planner.scenario import format_for_path, read_documents
from planner.scenario.loading import MAX_JSON_CHARS

__all__ = ["MAX_INPUT_BYTES", "input_documents", "read_input_text"]

MAX_INPUT_BYTES = MAX_JSON_CHARS
"""Largest input file a command reads, bytes (64 MiB); the loaders bound YAML further."""


def read_input_text(path: str, *, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of ``path`` (``-``: standard input), at most ``max_bytes`` bytes.

    Raises ``SpecError(path, ...)`` when it cannot be read, is a directory, holds more than
    ``max_bytes`` bytes or is not UTF-8.
    """
    try:
        data = read_input(path, max_bytes)
    except SourceError as exc:
        raise SpecError(path, exc.message) from None
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
