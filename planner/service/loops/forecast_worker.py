"""A large queue's forecast in a worker process, off the ingest cycle.

The queue forecast (``planner.service.loops.queue_forecast``) simulates the whole queue ``samples``
times: with GPUs pooled, about 0.13 CPU-s per sample at 1,000 active jobs on 200 nodes and 1.5 at
10,000 jobs on 2,000 nodes (154 CPU-s for the default 100 samples, far beyond a 15 s ingest cycle);
with jobs placed on nodes about 1 CPU-s per sample at 1,000 jobs and 28 at 10,000 jobs on 2,000
nodes (``benchmarks/results/forecast_scale.md``), so 100 samples of such a queue take most of an
hour. From ``queue_forecast.worker_min_jobs`` active jobs on, a cycle that finds the forecast due
hands its inputs (the jobs, their runtime bands, the fleet: all plain values) to one worker process
and goes on; a later cycle collects the records and stores them (made at the time of their inputs).
One forecast per source is in flight at a time, and after one the worker rests as long as that one
took, so it holds at most half of one core. The worker is a ``spawn``ed process (the service's
threads are not forked), started on first use and killed with the ingest loop (it also ends by
itself when the service is gone); a worker that died is started again for the next forecast.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

#: How much lower the worker's CPU priority is than the service's (``nice``).
WORKER_NICENESS = 10


def _worker_start() -> None:
    """In the worker: leave SIGINT to the service (a terminal's Ctrl-C reaches the whole
    process group; the service stops the worker), run at a lower priority, and end when the
    service is gone (killed: the worker would otherwise finish its forecast for nobody)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.nice(WORKER_NICENESS)  # background work: the ingest loop and the API come first
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(2.0)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


@dataclass(slots=True)
class _Flight:
    future: Future[Any]
    started_s: float


class QueueForecaster:
    """One worker process for the forecasts of large queues (module docstring), per source
    ``key``: :meth:`ready` (nothing in flight, rest over), :meth:`submit`, :meth:`collect`.
    Thread-safe; ``clock``: monotonic seconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._executor: ProcessPoolExecutor | None = None
        self._flights: dict[Hashable, _Flight] = {}
        self._rest_until: dict[Hashable, float] = {}
        #: Seconds the last forecast of each source took in the worker.
        self.last_duration_s: dict[Hashable, float] = {}

    def ready(self, key: Hashable) -> bool:
        """Whether a forecast of ``key`` may start now (none in flight, the rest is over)."""
        with self._lock:
            return key not in self._flights and self._clock() >= self._rest_until.get(key, 0.0)

    def submit(self, key: Hashable, fn: Callable[[Any], Any], request: Any) -> None:
        """Run ``fn(request)`` in the worker (``fn`` importable, ``request`` picklable)."""
        with self._lock:
            if self._executor is None:
                self._executor = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_worker_start,
                )
            self._flights[key] = _Flight(self._executor.submit(fn, request), self._clock())

    def collect(self, key: Hashable) -> Any | None:
        """The result of ``key``'s finished forecast (None: none finished, or it failed: the
        failure is logged)."""
        with self._lock:
            flight = self._flights.get(key)
            if flight is None or not flight.future.done():
                return None
            del self._flights[key]
            took = self._clock() - flight.started_s
            self.last_duration_s[key] = took
            self._rest_until[key] = self._clock() + took
        try:
            return flight.future.result()
        except BrokenProcessPool:
            log.error("queue forecast of %s: the worker process died; starting a new one", key)
            with self._lock:
                self._executor = None
        except Exception as exc:  # the worker's failure, logged like an inline one
            log.warning("queue forecast of %s failed: %s", key, exc)
        return None

    def close(self) -> None:
        """Stop the worker (a forecast in flight is abandoned)."""
        with self._lock:
            executor, self._executor = self._executor, None
            self._flights.clear()
        if executor is None:
            return
        # ProcessPoolExecutor would wait for the running forecast at exit; stop it now
        for process in list((getattr(executor, "_processes", None) or {}).values()):
            process.kill()
        executor.shutdown(wait=False, cancel_futures=True)
