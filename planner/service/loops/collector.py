"""Garbage collection between ingest cycles: the objects that outlive a cycle (the job rows the
store keeps, the memos, the caches: millions of objects at 10,000 jobs) are frozen
(``gc.freeze``) once the cycle ends, so that the collections of the next cycles traverse only
what those cycles made. Without it, every cycle ran at least one full collection over
everything, about a quarter of a steady cycle's CPU time at 10,000 jobs.

Within a cycle only the young generations are collected: Python starts a full collection
whenever the objects that survived grew by a quarter, so the first cycle, which builds the
whole cluster's rows from nothing, ran eight full collections over its growing heap (3-5 s
at 10,000 jobs on two cores). Each cycle's own full collection comes once it has ended: a full
collection does not traverse frozen objects, so it looks at what that cycle left (the whole
first cycle's heap once, 0.9 s of CPU at 10,000 jobs; a steady cycle's survivors).

Cyclic garbage among frozen objects is not freed until they are unfrozen: before freezing,
what the cycle left behind that is already garbage is collected, and every ``full_every``
cycles everything is unfrozen and collected in full, between cycles (not in the time of a
cycle), which bounds what can wait to be freed to that many cycles' worth.
``gc.freeze`` is process-wide: the service enables it for its ingest loop; tests and
embedders that run cycles in a process of their own choose (``IngestLoop(collect=...)``).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Final

from planner.errors import SpecError

FULL_EVERY_CYCLES: Final = 20
"""Cycles between two full collections of everything (unfrozen first)."""

NO_FULL_COLLECTION: Final = 1 << 30
"""The third ``gc.set_threshold`` value within a cycle: collections of the middle generation
before a full one (this many never come within a cycle)."""


@dataclass(slots=True)
class CycleCollector:
    """Freezes what outlives each cycle (module docstring); ``full_every``: cycles between two
    full collections (at least 1)."""

    full_every: int = FULL_EVERY_CYCLES
    cycles: int = 0
    #: ``gc.get_threshold()`` before the cycle that runs (restored once it ends)
    thresholds: tuple[int, int, int] | None = None

    def __post_init__(self) -> None:
        if self.full_every < 1:
            raise SpecError("full_every", f"must be at least 1 cycle, not {self.full_every}")

    def before_cycle(self) -> None:
        """Call as a cycle starts: until :meth:`after_cycle`, no full collection starts by
        itself (the young generations are collected as usual)."""
        if self.thresholds is None:
            self.thresholds = gc.get_threshold()
        young, middle, _ = self.thresholds
        gc.set_threshold(young, middle, NO_FULL_COLLECTION)

    def after_cycle(self) -> None:
        """Call once a cycle has ended: the thresholds are as before it, what the cycle left
        is collected (everything not frozen: the frozen objects are not traversed) and its
        survivors frozen; every ``full_every`` cycles everything is unfrozen first."""
        if self.thresholds is not None:
            gc.set_threshold(*self.thresholds)
            self.thresholds = None
        self.cycles += 1
        if self.cycles % self.full_every == 0:
            gc.unfreeze()
        gc.collect()
        gc.freeze()

    def close(self) -> None:
        """Unfreeze everything (the loop stops: its objects become ordinary again); the
        thresholds are as before a cycle that did not end."""
        if self.thresholds is not None:
            gc.set_threshold(*self.thresholds)
            self.thresholds = None
        gc.unfreeze()
