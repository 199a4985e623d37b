"""The service's log lines: one record per line, nothing secret in them.

Log messages carry text that users type (job names, comments, paths, request URLs), so
:class:`SafeFormatter`:

* escapes control characters of the message (``\\n`` as ``\\\\n``, other C0/C1 characters,
  DEL and the Unicode line and paragraph separators as ``\\xNN`` / ``\\uNNNN``): a newline in a
  job name cannot forge a log line of its own;
* indents every further line of a record (a traceback) by four spaces, so a line that starts
  at column 0 is always the start of a record;
* redacts credentials in query strings (``?token=...``, ``access_token``, ``api_key``,
  ``password``, ...) as ``REDACTED``: uvicorn's access log writes each request's path with its
  query string, and a token sent there (which the API refuses) must not land in the log.

``planner serve`` installs it on the root logger (:func:`configure_logging`), so the
planner's, uvicorn's and the libraries' records all go through it.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import TextIO

__all__ = [
    "FORMAT",
    "SafeFormatter",
    "configure_logging",
    "escape_controls",
    "log_handler",
    "redact_secrets",
]

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_SECRET_PARAMS = re.compile(
    r"(?i)([?&;](?:[\w.-]*token|api[-_]?key|key|secret|password|passwd|auth|authorization"
    r"|sig|signature)=)[^&;#\s\"']*"
)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with its control characters written as escapes (module docstring)."""
    return _CONTROLS.sub(_escape, text)


def redact_secrets(text: str) -> str:
    """``text`` with the values of credential-like query parameters replaced by ``REDACTED``."""
    return _SECRET_PARAMS.sub(r"\1REDACTED", text)


class SafeFormatter(logging.Formatter):
    """A ``logging.Formatter`` whose records are one line each, without credentials (module
    docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as text: its message escaped and redacted, further lines indented."""
        record.msg = escape_controls(redact_secrets(record.getMessage()))
        record.args = None
        return super().format(record).replace("\n", "\n    ")


def log_handler(stream: TextIO | None = None) -> logging.Handler:
    """A stream handler (default: standard error) writing :data:`FORMAT` lines through
    :class:`SafeFormatter`."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(SafeFormatter(FORMAT))
    return handler


def configure_logging(level: str) -> logging.Handler:
    """Log records of ``level`` and above to standard error through :func:`log_handler` (the
    root logger's only handler); returns the handler."""
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    handler = log_handler()
    root.addHandler(handler)
    root.setLevel(level.upper())
    return handler
