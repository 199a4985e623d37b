"""The service as separate processes (``service.processes: split``, the default): an ingest
process and an API process that share the store.

In one process the ingest loop and the API share one interpreter lock, so a page of
``/v1/jobs`` served while a large cycle runs waits for the lock at each of its hand-overs. Split,
the API never waits on the loop: ``planner serve`` runs the API (uvicorn) and supervises an
ingest process (:class:`Supervisor`: started with the ``spawn`` method, restarted with a
back-off when it dies, stopped with the API). With ``service.role`` each part runs alone
instead (``api``, ``ingest``: one container or Deployment each).

What the API used to read from the loop in memory, the ingest process writes to the store as a
status record (:class:`IngestStatus`, the ``heartbeats`` table) every
:data:`HEARTBEAT_INTERVAL_S` seconds between cycles and after each cycle: its good cycles,
sources, last error, leadership, and the values of the loop's metrics (cycle and poll seconds,
queue-forecast seconds, writes to the schedulers, the Kubernetes informers' counters).
:class:`IngestView` reads it back in the API process for ``/readyz`` and ``/metrics``.
"""

from __future__ import annotations

import logging
import multiprocessing.process
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import TypeAdapter, ValidationError

from planner.errors import StoreError
from planner.service.store import Store

if TYPE_CHECKING:
    from planner.service.loops import IngestLoop

log = logging.getLogger("planner.service")

#: Heartbeat names of ingest processes start with this.
HEARTBEAT_PREFIX = "ingest/"
#: Seconds between two status records of the ingest process between cycles (one is also written
#: after each cycle).
HEARTBEAT_INTERVAL_S = 5.0
#: An ingest status older than this many seconds, at least, is reported stale (none is written
#: while a cycle runs: its transaction would hold a SQLite write up).
MIN_STALE_S = 60.0
#: Seconds the API process reuses a status record it read (``/readyz`` and ``/metrics``).
VIEW_CACHE_S = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceTiming:
    """A source's last good cycle: its poll and the whole cycle, seconds."""

    scheduler: str
    cluster: str
    poll_s: float
    cycle_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class InformerCounts:
    """A Kubernetes informer's counters since the ingest process started (the fields of
    ``adapters.kubernetes.InformerStats`` that ``/metrics`` exports)."""

    resource: str
    lists: int = 0
    events: int = 0
    relists_gone: int = 0
    errors: int = 0
    throttled: int = 0
    synced: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteCount:
    """Writes to a scheduler of one kind and outcome since the ingest process started."""

    scheduler: str
    kind: str
    outcome: str
    count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestFigures:
    """The values of the ingest loop's own metrics (``planner.service.metrics.
    IngestCollector``): per source its last good cycle, and per source key
    (``scheduler/cluster``) the last queue forecast's seconds in the worker process."""

    timings: tuple[SourceTiming, ...] = ()
    forecast_s: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestStatus:
    """What an ingest process reports about itself (one row of ``heartbeats``).

    ``name``: ``ingest/<host>``; ``pid``: its process id; ``started_s`` and ``heartbeat_s``: when it
    started and wrote this, Unix epoch seconds; ``leader``: whether it runs the loops (always,
    without leader election); ``sources``: the sources it polls; ``cycles_ok``: cycles in which
    every source answered; ``last_error``: the last failed cycle's first error (None once a
    cycle succeeded); ``figures``, ``writes``, ``informers``: its metrics' values.
    """

    name: str
    pid: int
    started_s: float
    heartbeat_s: float
    leader: bool
    sources: tuple[str, ...]
    cycles_ok: int
    last_error: str | None = None
    figures: IngestFigures = IngestFigures()
    writes: tuple[WriteCount, ...] = ()
    informers: tuple[InformerCounts, ...] = ()


_STATUS = TypeAdapter(IngestStatus)


def loop_figures(loop: IngestLoop) -> IngestFigures:
    """The metrics' values of ``loop`` (this process's ingest loop)."""
    deps = loop.deps
    return IngestFigures(
        timings=tuple(
            SourceTiming(scheduler=scheduler, cluster=cluster, poll_s=polled, cycle_s=whole)
            for (scheduler, cluster), (polled, whole) in sorted(deps.cycle_seconds.items())
        ),
        forecast_s=tuple(
            sorted((str(key), took) for key, took in deps.forecaster.last_duration_s.items())
        ),
    )


def informer_counts(stats: Mapping[str, object]) -> tuple[InformerCounts, ...]:
    """``{resource: InformerStats}`` (``KubernetesSource.stats()``) as status fields."""

    def count(st: object, key: str) -> int:
        value = getattr(st, key, 0)
        return int(value) if isinstance(value, int | float) else 0

    return tuple(
        InformerCounts(
            resource=resource,
            lists=count(st, "lists"),
            events=count(st, "events"),
            relists_gone=count(st, "relists_gone"),
            errors=count(st, "errors"),
            throttled=count(st, "throttled"),
            synced=bool(getattr(st, "synced", False)),
        )
        for resource, st in sorted(stats.items())
    )


def heartbeat_name() -> str:
    """The heartbeat name of an ingest process on this host: ``ingest/<host>`` (one row per
    host, or pod, however often its process restarts)."""
    return f"{HEARTBEAT_PREFIX}{socket.gethostname()}"


class HeartbeatWriter:
    """Writes ``status()`` to the store as this process's heartbeat (:meth:`beat`; never
    raises for a store failure: logs it)."""

    def __init__(self, store: Store, status: Callable[[], IngestStatus]) -> None:
        self.store = store
        self.status = status
        self._lock = threading.Lock()

    def beat(self) -> None:
        """Write the current status (the scheduled job, and after each cycle)."""
        with self._lock:
            status = self.status()
            try:
                self.store.put_heartbeat(
                    status.name, _STATUS.dump_json(status).decode(), status.heartbeat_s
                )
            except StoreError as exc:
                log.warning("cannot write the ingest heartbeat: %s", exc)


class IngestView:
    """The ingest processes' status as the API process sees it, read from the store.

    ``stale_after_s``: a status older than this is not counted; ``child``: the ingest process
    this one supervises (its status is the one read, and its exit is a problem; None when the
    ingest runs elsewhere, ``service.role: api``: the newest leading one is read, and readiness
    does not depend on it); ``clock``: Unix epoch seconds.
    """

    def __init__(
        self,
        store: Store,
        clock: Callable[[], float],
        *,
        stale_after_s: float,
        child: Supervisor | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.stale_after_s = stale_after_s
        self.child = child
        self._lock = threading.Lock()
        self._cached: tuple[float, IngestStatus | None] | None = None

    def current(self) -> IngestStatus | None:
        """The newest fresh status of a leading ingest process (else of any fresh one; None
        when none reported within ``stale_after_s`` or the store fails)."""
        now = self.clock()
        with self._lock:
            if self._cached is not None and now - self._cached[0] < VIEW_CACHE_S:
                return self._cached[1]
        try:
            rows = self.store.heartbeats(prefix=HEARTBEAT_PREFIX)
        except StoreError:
            return None
        fresh: list[IngestStatus] = []
        for row in rows:
            if now - row.updated_s > self.stale_after_s:
                continue
            try:
                fresh.append(_STATUS.validate_json(row.body))
            except ValidationError:
                log.warning("unreadable ingest heartbeat %s: ignored", row.name)
        if self.child is not None:
            pid = self.child.pid
            mine = heartbeat_name()
            found = next((s for s in fresh if s.name == mine and s.pid == pid), None)
        else:
            found = next((s for s in fresh if s.leader), fresh[0] if fresh else None)
        with self._lock:
            self._cached = (now, found)
        return found

    @property
    def gates_readiness(self) -> bool:
        """Whether the API's readiness waits for the ingest part (only for its own child)."""
        return self.child is not None

    def leads(self) -> bool:
        """Whether the supervised ingest process leads (False without one)."""
        status = self.current() if self.child is not None else None
        return status is not None and status.leader

    def problem(self) -> str | None:
        """Why the ingest part is unhealthy now (for ``/readyz``), or None."""
        if self.child is not None:
            problem = self.child.problem()
            if problem is not None:
                return problem
        status = self.current()
        if status is None:
            if self.child is not None and self.child.pid is not None:
                return f"ingest process (pid {self.child.pid}) has not reported yet"
            return f"no ingest process reported in the last {self.stale_after_s:.0f} s"
        if status.sources and status.cycles_ok == 0 and status.leader:
            detail = f": {status.last_error}" if status.last_error else ""
            return f"first ingest cycle not done yet{detail}"
        return None


class Supervisor:
    """Runs a child process made by ``spawn_child`` (not yet started) and starts a new one
    when it exits, after a back-off doubling from ``min_backoff_s`` to ``max_backoff_s``
    (back to the least once a child ran ``stable_s``); :meth:`stop` ends it. ``name``: the
    child's name in logs and :meth:`problem`."""

    def __init__(
        self,
        spawn_child: Callable[[], multiprocessing.process.BaseProcess],
        *,
        name: str = "ingest process",
        min_backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        stable_s: float = 60.0,
        poll_s: float = 0.5,
    ) -> None:
        self.spawn_child = spawn_child
        self.name = name
        self.min_backoff_s = min_backoff_s
        self.max_backoff_s = max_backoff_s
        self.stable_s = stable_s
        self.poll_s = poll_s
        #: Children started after the first one exited.
        self.restarts = 0
        self._child: multiprocessing.process.BaseProcess | None = None
        self._exited: str | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The running child's process id (None when none runs)."""
        child = self._child
        return child.pid if child is not None and child.is_alive() else None

    def start(self) -> None:
        """Start the child and the thread that watches it."""
        self._launch()
        self._thread = threading.Thread(target=self._watch, name="supervisor", daemon=True)
        self._thread.start()

    def _launch(self) -> None:
        child = self.spawn_child()
        child.start()
        with self._lock:
            self._child, self._exited = child, None
        log.info("%s started (pid %s)", self.name, child.pid)

    def _watch(self) -> None:
        backoff = self.min_backoff_s
        while not self._stopping.is_set():
            child = self._child
            started = time.monotonic()
            while child is not None and child.is_alive():
                if self._stopping.wait(self.poll_s):
                    return
            if child is None or self._stopping.is_set():
                return
            if time.monotonic() - started >= self.stable_s:
                backoff = self.min_backoff_s
            with self._lock:
                self._exited = (
                    f"{self.name} (pid {child.pid}) exited with code {child.exitcode}; "
                    f"restarting in {backoff:.0f} s"
                )
            log.error("%s", self._exited)
            if self._stopping.wait(backoff):
                return
            backoff = min(backoff * 2, self.max_backoff_s)
            self.restarts += 1
            try:
                self._launch()
            except OSError as exc:
                with self._lock:
                    self._exited = f"{self.name} cannot start: {exc}"
                log.error("%s", self._exited)

    def problem(self) -> str | None:
        """None while the child runs; else why not (exit code, when the next starts)."""
        with self._lock:
            return self._exited

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop watching and end the child: SIGTERM, then SIGKILL after ``timeout_s``."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
        child = self._child
        if child is None or not child.is_alive():
            return
        child.terminate()
        child.join(timeout_s)
        if child.is_alive():
            log.warning("%s (pid %s) still running: killed", self.name, child.pid)
            child.kill()
            child.join(timeout_s)
