"""What the routes and the scheduled loops share in one process: settings, store, the ingest
loop, the clock, readiness and leadership, and the optional Kubernetes and Slurm-hint pieces.

``start``/``stop`` run in the app's lifespan (or the ingest process's main,
``planner.service.processes``): migrate the store, start the informers and the elector,
schedule the ingest cycle and the heartbeat (APScheduler 3.x ``BackgroundScheduler``). In the
API process of a split service the loop runs elsewhere: readiness and leadership come from the
ingest process's status record (``ingest_view``).
"""

from __future__ import annotations

import logging
import os
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
from planner.service.processes import HEARTBEAT_INTERVAL_S, IngestView
from planner.service.settings import Settings
from planner.service.store import Store

if TYPE_CHECKING:
    from planner.service.learning import Learner
    from planner.service.reviews import ReviewRunner

log = logging.getLogger("planner.service")

#: A source whose last success is older than this many ingest intervals is reported stale.
STALE_AFTER_INTERVALS = 3.0


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
        ingest_view: IngestView | None = None,
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
        #: The ingest process's status when the loop runs in another process (else None).
        self.ingest_view = ingest_view
        #: The first error of the last cycle that was not all good (None after a good one).
        self.last_error: str | None = None
        #: Writes this process's status record (the split service's ingest process), run every
        #: ``HEARTBEAT_INTERVAL_S`` seconds between cycles and after each cycle.
        self.heartbeat: Callable[[], None] | None = None
        #: Whether an ingest cycle runs now (its transaction would hold a SQLite heartbeat up).
        self.cycling = False

    @property
    def stale_after_s(self) -> float:
        """A source older than this (s) is stale."""
        return STALE_AFTER_INTERVALS * self.settings.ingest_interval_s

    @property
    def is_leader(self) -> bool:
        """Whether this replica runs the loops (always, without leader election); in a split
        service's API process, whether the ingest process it supervises leads (never with
        ``service.role: api``)."""
        if self.ingest_view is not None:
            return self.ingest_view.leads()
        return self.kube is None or self.kube.is_leader

    @property
    def ready(self) -> bool:
        """Ready once a first ingest cycle succeeded, at once when no source is configured, and
        at once on a replica that is not the leader (it serves reads from the shared store);
        in a split service's API process, when the ingest part is healthy (always with
        ``service.role: api``: :meth:`ingest_problem` is only reported there)."""
        if self.ingest_view is not None:
            return not self.ingest_view.gates_readiness or self.ingest_view.problem() is None
        return not self.ingestor.sources or self.ingestor.cycles_ok > 0 or not self.is_leader

    def ingest_problem(self) -> str | None:
        """Why the ingest part is unhealthy (``/readyz``), or None; in one process, the first
        cycle not done yet on the leader."""
        if self.ingest_view is not None:
            return self.ingest_view.problem()
        if self.ingestor.sources and self.ingestor.cycles_ok == 0 and self.is_leader:
            detail = f": {self.last_error}" if self.last_error else ""
            return f"first ingest cycle not done yet{detail}"
        return None

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
        self.cycling = True
        try:
            report = self.ingestor.run_cycle()
            failed = [f"{name}: {error}" for name, error in report.results.items() if error != "ok"]
            self.last_error = failed[0] if failed else None
            if self.kube is not None:
                self.kube.after_cycle(self.store)
            if self.slurm_hints is not None:
                self.slurm_hints.after_cycle(self.store, self.clock())
            self.pruner.maybe_prune()  # retention (planner.service.loops.retention)
        except Exception as exc:  # the loop must survive anything; the traceback goes to the log
            self.last_error = f"ingest cycle failed: {exc}"
            log.exception("ingest cycle failed")
        finally:
            self.cycling = False
        if self.heartbeat is not None:
            self.heartbeat()

    def beat_between_cycles(self) -> None:
        """The scheduled heartbeat: written unless a cycle runs (one is written after it)."""
        if self.heartbeat is not None and not self.cycling:
            self.heartbeat()

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
        self.store.migrate()
        log.info("store ready: %s (revision %s)", self.store.safe_url, self.store.revision())
        if self.kube is not None:
            self.kube.start()
        loops = start_loops and bool(self.ingestor.sources)
        if loops or (start_loops and self.heartbeat is not None):
            scheduler = BackgroundScheduler(timezone="UTC")
            if self.heartbeat is not None:
                scheduler.add_job(
                    self.beat_between_cycles,
                    "interval",
                    seconds=HEARTBEAT_INTERVAL_S,
                    id="heartbeat",
                    max_instances=1,
                    coalesce=True,
                    next_run_time=datetime.now(UTC),
                )
            if loops:
                scheduler.add_job(
                    self.run_cycle,
                    "interval",
                    seconds=self.settings.ingest_interval_s,
                    id="ingest",
                    max_instances=1,
                    coalesce=True,
                    next_run_time=datetime.now(UTC),
                )
            if loops and self.learner is not None and self.learner.config.enabled:
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
