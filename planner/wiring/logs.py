"""A finished job's log for ``planner eta replay`` (``adapters.logs``): its progress records,
the total iterations it states, the framework that wrote it and its last timestamp."""

from __future__ import annotations

from adapters.logs import read_job_log

__all__ = ["read_job_log"]
