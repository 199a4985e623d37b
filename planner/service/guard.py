"""Every failure of a source counts: a bug or an unexpected answer that raises something other
than a ``SourceError`` (a parser's ``KeyError`` on a new squeue field, say) is turned into a
``SourceTemporaryError`` naming the exception, so the ingest cycle records the failure
(``planner_source_up`` 0, ``sources[].last_error``) and keeps serving the last good state,
instead of the cycle dying with the source still reported up.

The composition root wraps each scheduler source in :class:`GuardedSource`; everything but
``snapshot`` passes through to the wrapped source.
"""

from __future__ import annotations

import logging
from typing import Any

from planner.errors import SourceError, SourceTemporaryError
from planner.ports import SchedulerSource
from planner.specs.job import ClusterSnapshot, JobState

log = logging.getLogger(__name__)


class GuardedSource:
    """A ``SchedulerSource`` whose ``snapshot`` raises only ``SourceError`` (see the module
    docstring)."""

    def __init__(self, source: SchedulerSource) -> None:
        self.inner = source
        self.scheduler = source.scheduler
        self.name = getattr(source, "name", source.scheduler)

    def snapshot(self) -> ClusterSnapshot:
        """The wrapped source's snapshot; any unexpected exception becomes a
        ``SourceTemporaryError`` (logged with its traceback)."""
        try:
            return self.inner.snapshot()
        except SourceError:
            raise
        except Exception as exc:
            log.exception("source %s raised an unexpected error", self.name)
            raise SourceTemporaryError(
                f"{self.scheduler}:snapshot",
                f"unexpected {type(exc).__name__} while reading the scheduler: {exc}"[:500],
            ) from exc

    def read_text_file(
        self, path: str, max_bytes: int, *, job: JobState | None = None, head: bool = False
    ) -> str:
        """The wrapped source's file reader (the job-file rules apply to ``job``)."""
        return self.inner.read_text_file(path, max_bytes, job=job, head=head)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
