"""API requests before the ingest loop's CPU.

The ingest loop and the API share one process, so one interpreter lock: while a 10,000-job
cycle runs, a request thread that gives the lock up (every row SQLite steps through, every
socket write, every hand-over between the event loop and its worker threads) waits up to the
switch interval (``sys.getswitchinterval``) to get it back. A page of ``/v1/jobs`` gives it up
a few hundred times: measured with ``benchmarks/load.py`` on 2 cores, a page took 23 ms at
the median between cycles and 59 ms during one (p99 177 ms).

:class:`RequestPriority` lets the loop step aside instead. The API's middleware
(``planner.service.api.app``) counts the requests in flight; the loop calls
:meth:`RequestPriority.pause` at safe points (between two jobs of a cycle, between its
stages) and waits there, holding no lock and no transaction's CPU, while a request is in
flight. Two bounds keep the loop going whatever the traffic:

- a request has priority for its first ``hold_s`` seconds only (a ``/metrics`` scrape of a
  large cluster or an unpaged listing then shares the CPU as before);
- the loop waits at most ``max_share`` of the time since its cycle began (a flood of requests
  slows a cycle down by at most ``1 / (1 - max_share)``: 2x at the default 0.5).

Between safe points (the scheduler's poll and the parsing of its output, the transaction's
commit) the loop cannot wait; there, while a request is in flight, the interpreter's switch
interval drops to ``switch_s`` (0.1 ms instead of the service's 1 ms: ``planner.service.
runtime``), so a request thread that gave the lock up gets it back ten times sooner.

Waiting never changes what a cycle stores: only when. :attr:`RequestPriority.paused_s` counts
the seconds waited (``planner_ingest_paused_seconds_total``).
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: Seconds a request keeps priority over the ingest loop (a page of 100 jobs: about 25 ms).
HOLD_S = 0.25
#: Largest share of a cycle's time the loop spends waiting for requests.
MAX_SHARE = 0.5
#: The interpreter's switch interval while a request is in flight, seconds.
SWITCH_S = 0.0001


class RequestPriority:
    """Requests in flight (:meth:`request`) and the loop's safe points (:meth:`pause`);
    thread-safe. ``switch_s``: the switch interval while requests are in flight (None: left
    as it is); ``clock``: monotonic seconds."""

    def __init__(
        self,
        *,
        hold_s: float = HOLD_S,
        max_share: float = MAX_SHARE,
        switch_s: float | None = SWITCH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if hold_s < 0 or not 0 <= max_share < 1:
            raise ValueError(f"hold_s >= 0 and 0 <= max_share < 1 (got {hold_s}, {max_share})")
        self.hold_s = hold_s
        self.max_share = max_share
        self.switch_s = switch_s
        self._switch_before: float | None = None
        self._clock = clock
        self._cond = threading.Condition()
        self._in_flight: dict[int, float] = {}  # request number -> when it started
        self._numbers = itertools.count()
        self._cycle_started: float | None = None
        self._cycle_paused = 0.0
        #: seconds the loop waited for requests, in all
        self.paused_s = 0.0

    @contextmanager
    def request(self) -> Iterator[None]:
        """Count one request in flight for as long as the block runs."""
        number = next(self._numbers)
        with self._cond:
            if not self._in_flight and self.switch_s is not None:
                self._switch_before = sys.getswitchinterval()
                sys.setswitchinterval(self.switch_s)
            self._in_flight[number] = self._clock()
        try:
            yield
        finally:
            with self._cond:
                del self._in_flight[number]
                if not self._in_flight and self._switch_before is not None:
                    sys.setswitchinterval(self._switch_before)
                    self._switch_before = None
                self._cond.notify_all()

    def begin_cycle(self) -> None:
        """A cycle begins: its waits are counted against its own time from now."""
        with self._cond:
            self._cycle_started = self._clock()
            self._cycle_paused = 0.0

    def pause(self) -> float:
        """Wait while a request holds priority, within the bounds (module docstring); returns
        the seconds waited (0.0 at once when no request is in flight)."""
        if not self._in_flight:  # the common case: no lock taken
            return 0.0
        with self._cond:
            started = self._clock()
            cycle_started = started if self._cycle_started is None else self._cycle_started
            allowed = self.max_share * (started - cycle_started) - self._cycle_paused
            # the share counts the waits too: waiting w more keeps paused / elapsed <= share
            limit = started + max(0.0, allowed / (1.0 - self.max_share))
            while True:
                now = self._clock()
                held = [t + self.hold_s for t in self._in_flight.values() if t + self.hold_s > now]
                until = min(max(held, default=now), limit)
                if until <= now:
                    break
                self._cond.wait(until - now)
            waited = self._clock() - started
            self._cycle_paused += waited
            self.paused_s += waited
            return waited
