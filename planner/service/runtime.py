"""What the routes and the scheduled loops share in one process: settings, store, the ingest
loop, the clock, readiness and leadership, and the optional Kubernetes and Slurm-hint pieces.

``start``/``stop`` run in the app's lifespan: migrate the store, start the informers and the
elector, schedule the ingest cycle (APScheduler 3.x ``BackgroundScheduler``).
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from apscheduler.schedulers.background import BackgroundScheduler

from planner.errors import StoreError
from planner.service.loops import IngestLoop
from planner.service.loops.publish import KubernetesRuntime, SlurmHintsRuntime
from planner.service.loops.retention import Pruner
from planner.service.models import RetentionPolicy
from planner.service.settings import Settings
from planner.service.store import Store

if TYPE_CHECKING:
    from planner.service.learning import Learner
    from planner.service.reviews import ReviewRunner

log = logging.getLogger("planner.service")

#: A source whose last success is older than this many ingest intervals is reported stale.
STALE_AFTER_INTERVALS = 3.0
#: The garbage collector's thresholds in the service: a cycle over 10,000 jobs
#: decodes millions of short-lived objects; collecting the youngest generation every 50,000
#: allocations (Python's default: 700) lets them die young instead of being promoted and
#: rescanned by full collections, which take about a second with 10,000 jobs in memory and
#: stop every thread (the API's too).
GC_THRESHOLDS = (50_000, 20, 100)
#: How long a thread may hold the interpreter before another waiting one gets it (Python's
#: default: 5 ms): a request must not wait behind the ingest loop's CPU-bound cycle for each of
#: the many hand-overs it takes (/v1/jobs pages while a 10,000-job cycle runs).
SWITCH_INTERVAL_S = 0.001


class ServiceState:
    """What the routes share: store, ingest loop, settings, clock, readiness, Kubernetes."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        ingestor: IngestLoop,
        clock: Callable[[], float],
        *,
        kube: KubernetesRuntime | None = None,
        slurm_hints: SlurmHintsRuntime | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.ingestor = ingestor
        self.clock = clock
        self.kube = kube
        self.slurm_hints = slurm_hints
        self.scheduler: BackgroundScheduler | None = None
        retention = settings.retention
        self.pruner = Pruner(
            store=store,
            policy=RetentionPolicy(
                eta_rows=retention.eta_history_rows,
                eta_max_age_s=retention.eta_history_max_age_s,
                samples_per_job=retention.samples_per_job,
                audit_max_age_s=retention.audit_max_age_s,
            ),
            interval_s=retention.interval_s,
            clock=clock,
        )
        #: Called when the app stops, before the loops (e.g. cancel the API's searches).
        self.on_stop: list[Callable[[], None]] = []
        #: Capacity reviews, set by the composition root (with Ray).
        self.reviews: ReviewRunner | None = None
        #: Fits each cluster's calibration from its finished jobs, set by the composition root.
        self.learner: Learner | None = None

    @property
    def stale_after_s(self) -> float:
        """A source older than this (s) is stale."""
        return STALE_AFTER_INTERVALS * self.settings.ingest_interval_s

    @property
    def is_leader(self) -> bool:
        """Whether this replica runs the loops (always, without leader election)."""
        return self.kube is None or self.kube.is_leader

    @property
    def ready(self) -> bool:
        """Ready once a first ingest cycle succeeded, at once when no source is configured, and
        at once on a replica that is not the leader (it serves reads from the shared store)."""
        return not self.ingestor.sources or self.ingestor.cycles_ok > 0 or not self.is_leader

    def store_problem(self) -> str | None:
        """Why the store cannot be used now (for ``/readyz``; never connection details), or
        None when it answers and (SQLite) its file is the one opened."""
        try:
            self.store.check()
        except StoreError as exc:
            return exc.public_message
        return None

    def fresh(self) -> bool:
        """True when every source answered within the staleness window."""
        now = self.clock()
        rows = self.store.sources(nodes=False)
        return bool(rows) and all(
            r.last_success_s is not None and now - r.last_success_s <= self.stale_after_s
            for r in rows
        )

    def run_cycle(self) -> None:
        """One ingest cycle (the scheduled job) on the leader, then what the leader publishes;
        logs and swallows everything."""
        if not self.is_leader:
            log.debug("not the leader: ingest skipped")
            return
        try:
            self.ingestor.run_cycle()
            if self.kube is not None:
                self.kube.after_cycle(self.store)
            if self.slurm_hints is not None:
                self.slurm_hints.after_cycle(self.store, self.clock())
            self.pruner.maybe_prune()  # retention (planner.service.loops.retention)
        except Exception:  # the loop must survive anything; the traceback goes to the log
            log.exception("ingest cycle failed")

    def run_learning(self) -> None:
        """Fit the calibrations of the clusters with new finished jobs (the scheduled job,
        off the ingest cycle's thread), on the leader; logs and swallows everything."""
        if not self.is_leader or self.learner is None:
            return
        try:
            self.learner.run()
        except Exception:  # the loop must survive anything; the traceback goes to the log
            log.exception("learning from finished jobs failed")

    def start(self, *, start_loops: bool) -> None:
        """Migrate the store, start Kubernetes, and schedule the ingest loop when asked and
        there is a source. Raises ``StoreError`` when the store cannot be migrated."""
        gc.set_threshold(*GC_THRESHOLDS)
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        self.store.migrate()
        log.info("store ready: %s (revision %s)", self.store.safe_url, self.store.revision())
        if self.kube is not None:
            self.kube.start()
        if start_loops and self.ingestor.sources:
            scheduler = BackgroundScheduler(timezone="UTC")
            scheduler.add_job(
                self.run_cycle,
                "interval",
                seconds=self.settings.ingest_interval_s,
                id="ingest",
                max_instances=1,
                coalesce=True,
                next_run_time=datetime.now(UTC),
            )
            if self.learner is not None and self.learner.config.enabled:
                scheduler.add_job(
                    self.run_learning,
                    "interval",
                    seconds=self.learner.config.interval_s,
                    id="learn",
                    max_instances=1,
                    coalesce=True,
                )
            scheduler.start()
            self.scheduler = scheduler
            log.info("ingest loop every %.1f s", self.settings.ingest_interval_s)

    def stop(self) -> None:
        """Stop the loop (waiting for a running cycle), Kubernetes, and the store's pool."""
        for hook in self.on_stop:
            hook()
        if self.scheduler is not None:
            self.scheduler.shutdown(wait=True)
            self.scheduler = None
        self.ingestor.close()
        if self.kube is not None:
            self.kube.stop()
        self.store.dispose()


def exit_after(seconds: float) -> None:
    """End the process in ``seconds`` even if non-daemon threads (an ingest cycle waiting on a
    hung command, a search between checkpoints) would keep it alive (``planner serve``)."""

    def stop() -> None:
        log.warning("still running %.0f s after shutdown: exiting", seconds)
        logging.shutdown()
        os._exit(0)

    timer = threading.Timer(seconds, stop)
    timer.daemon = True
    timer.start()
