"""The audit trail: every write the planner makes to a scheduler, and every state change it
accepts over the API, recorded with who, what and why.

:class:`AuditLog` appends :class:`~planner.service.models.AuditEntry` records to the store
(``audit`` table; ``GET /v1/audit``) and counts scheduler writes for ``/metrics`` as
``planner_scheduler_writes_total{scheduler,kind,outcome}`` (kind: ``comment``,
``time_limit``, ``hints_file``, ``annotations``; outcome: ``ok`` or ``error``). A store failure
while recording is logged, never raised: the write it describes already happened.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from planner.errors import StoreError
from planner.service.models import AuditEntry
from planner.service.store import Store

log = logging.getLogger(__name__)

#: Actor of the writes the ingest loop makes.
PLANNER_ACTOR = "planner"


class AuditLog:
    """Records audit entries (see the module docstring); thread-safe."""

    def __init__(self, store: Store, clock: Callable[[], float], *, actor: str = PLANNER_ACTOR):
        self.store = store
        self.clock = clock
        self.actor = actor
        self.scheduler_writes: Counter[tuple[str, str, str]] = Counter()
        self._lock = threading.Lock()

    def entry(
        self,
        *,
        action: str,
        outcome: str,
        scheduler: str = "",
        cluster: str = "",
        target: str = "",
        reason: str = "",
        detail: Mapping[str, object] | None = None,
        actor: str | None = None,
    ) -> AuditEntry:
        """An entry stamped now, by ``actor`` (default: the planner)."""
        return AuditEntry(
            at_s=self.clock(),
            actor=actor or self.actor,
            action=action,
            outcome=outcome,
            scheduler=scheduler,
            cluster=cluster,
            target=target,
            reason=reason,
            detail=None if detail is None else dict(detail),
        )

    def record(self, entries: Iterable[AuditEntry]) -> None:
        """Store ``entries`` and count the scheduler writes among them."""
        batch = list(entries)
        if not batch:
            return
        with self._lock:
            for e in batch:
                if e.scheduler:
                    self.scheduler_writes[(e.scheduler, e.action, e.outcome)] += 1
        for e in batch:
            log.info(
                "audit: %s %s %s %s/%s %s (%s)",
                e.actor,
                e.action,
                e.outcome,
                e.scheduler or "api",
                e.target,
                e.reason[:200],
                e.cluster,
            )
        try:
            self.store.add_audit(batch)
        except StoreError as exc:
            log.error("audit records not stored (%d): %s", len(batch), exc)

    def collector(self) -> Collector:
        """A ``prometheus_client`` collector of ``planner_scheduler_writes_total``."""
        return WritesCollector(self.snapshot)

    def snapshot(self) -> Sequence[tuple[tuple[str, str, str], int]]:
        """The write counters, sorted."""
        with self._lock:
            return sorted(self.scheduler_writes.items())


class WritesCollector(Collector):
    """``planner_scheduler_writes_total`` from ``snapshot()``: ((scheduler, kind, outcome),
    count) pairs (this process's :meth:`AuditLog.snapshot`, or what the ingest process last
    reported in a split service, ``planner.service.processes``)."""

    def __init__(self, snapshot: Callable[[], Iterable[tuple[tuple[str, str, str], int]]]) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "planner_scheduler_writes",
            "Writes the planner made to a scheduler (comments, time limits, the hints file, "
            "annotations), by outcome; each is in the audit trail (GET /v1/audit).",
            labels=["scheduler", "kind", "outcome"],
        )
        for (scheduler, kind, outcome), count in self.snapshot():
            family.add_metric([scheduler, kind, outcome], float(count))
        yield family
