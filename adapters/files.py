"""Reading a small UTF-8 text file a job names (a scenario, a batch script) on this host."""

from __future__ import annotations

import os
import stat

from planner.errors import SourcePermanentError, SourceTemporaryError

__all__ = ["read_local_text"]


def read_local_text(source: str, path: str, max_bytes: int) -> str:
    """The text of the absolute ``path``, at most ``max_bytes`` bytes of UTF-8.

    Raises ``SourcePermanentError(source, ...)`` when ``path`` is relative, missing, not a
    regular file, unreadable, larger than ``max_bytes`` or not UTF-8 (retrying cannot help),
    and ``SourceTemporaryError`` on other I/O errors.
    """
    if not os.path.isabs(path):
        raise SourcePermanentError(source, f"{path!r} is not an absolute path")
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise SourcePermanentError(source, f"{path}: not a regular file")
        if info.st_size > max_bytes:
            raise SourcePermanentError(
                source, f"{path}: {info.st_size} bytes, larger than the {max_bytes}-byte limit"
            )
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise SourcePermanentError(source, f"{path}: no such file") from None
    except PermissionError:
        raise SourcePermanentError(source, f"{path}: permission denied") from None
    except OSError as exc:
        raise SourceTemporaryError(source, f"{path}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise SourcePermanentError(source, f"{path}: larger than the {max_bytes}-byte limit")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourcePermanentError(source, f"{path}: not UTF-8 text ({exc.reason})") from None
