"""One error tree for the whole planner (see docs: STYLE.md, "Errors").

The CLI and the HTTP API turn each of these into a clear message and an exit code or HTTP status;
none of them should ever surface as a traceback.
"""

from __future__ import annotations


class PlannerError(Exception):
    """Base class of every error the planner raises on purpose."""


class SpecError(PlannerError, ValueError):
    """Bad input: a malformed or contradictory scenario, job description or setting.

    ``field`` names the offending input field (dotted path, e.g. ``parallelism.tensor_parallel``)
    and the message says what is wrong and how to fix it. ``str(err)`` is ``"<field>: <message>"``.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


class InfeasibleError(PlannerError):
    """No valid plan exists (out of memory, indivisible layout); carries the reason."""


class CalibrationError(PlannerError):
    """Calibration data is missing, inconsistent or cannot be fitted."""


class SourceError(PlannerError):
    """An outside source (scheduler, log file, metrics server) failed or answered garbage.

    ``source`` names the source (e.g. ``"slurm:squeue"``).
    """

    def __init__(self, source: str, message: str) -> None:
        self.source = source
        self.message = message
        super().__init__(f"{source}: {message}")


class SourceTemporaryError(SourceError):
    """A failure worth retrying: timeout, daemon down, connection refused."""


class SourcePermanentError(SourceError):
    """A failure that retrying will not fix: command missing, unsupported version, bad config."""


class StoreError(PlannerError):
    """The store could not read or write; data already stored is left untouched.

    ``str(err)`` is the detail for the log (passwords redacted); ``public_message`` is what an
    API client may see (never connection details), by default the same text.
    """

    def __init__(self, message: str, *, public: str | None = None) -> None:
        super().__init__(message)
        self.public_message = public if public is not None else message
