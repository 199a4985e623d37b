"""Retention: what the store keeps beyond each job's current state.

The ingest loop adds one ETA estimate per active job per cycle and a step sample per logged
interval; at 10,000 jobs that is thousands of rows a cycle. :class:`Pruner` applies the
``retention`` settings (``planner.service.security_settings.RetentionSettings``) at most every
``interval_s``: per job the newest ``eta_history_rows`` ETA estimates, none older than
``eta_history_max_age_s``, the newest ``samples_per_job`` step samples; audit records for
``audit_max_age_s``. So the history is bounded by active jobs x (``eta_history_rows`` +
``samples_per_job``) rows, plus ended jobs until ``ended_job_retention_s`` removes them. The
SQL is the store's (``Store.prune``); the loops' own per-job pruning stays as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from planner.errors import StoreError
from planner.service.models import RetentionPolicy
from planner.service.store import Store

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class Pruner:
    """Applies ``policy`` to ``store`` at most every ``interval_s`` (by ``clock``)."""

    store: Store
    policy: RetentionPolicy
    interval_s: float
    clock: Callable[[], float]
    last_s: float | None = None

    def maybe_prune(self) -> dict[str, int] | None:
        """Prune when due; rows deleted per kind (None: not due, or the store failed)."""
        now = self.clock()
        if self.last_s is not None and now - self.last_s < self.interval_s:
            return None
        self.last_s = now
        try:
            deleted = self.store.prune(self.policy, now_s=now)
        except StoreError as exc:
            log.error("retention: prune failed: %s", exc)
            return None
        if any(deleted.values()):
            log.info("retention: pruned %s", ", ".join(f"{k} {v}" for k, v in deleted.items()))
        return deleted
