"""Garbage collection between ingest cycles: the objects that outlive a cycle (the job rows the
store keeps, the memos, the caches: millions of objects at 10,000 jobs) are frozen
(``gc.freeze``) once the cycle ends, so that the collections of the next cycles traverse only
what those cycles made. Without it, every cycle ran at least one full collection over
everything, about a quarter of a steady cycle's CPU time at 10,000 jobs.

Cyclic garbage among frozen objects is not freed until they are unfrozen: before freezing,
the young generations are collected (what the cycle left behind that is already garbage), and
every ``full_every`` cycles everything is unfrozen and collected in full, between cycles (not
in the time of a cycle), which bounds what can wait to be freed to that many cycles' worth.
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


@dataclass(slots=True)
class CycleCollector:
    """Freezes what outlives each cycle (module docstring); ``full_every``: cycles between two
    full collections (at least 1)."""

    full_every: int = FULL_EVERY_CYCLES
    cycles: int = 0

    def __post_init__(self) -> None:
        if self.full_every < 1:
            raise SpecError("full_every", f"must be at least 1 cycle, not {self.full_every}")

    def after_cycle(self) -> None:
        """Call once a cycle has ended: freeze its survivors, or every ``full_every`` cycles
        unfreeze everything and collect it in full first."""
        self.cycles += 1
        if self.cycles % self.full_every == 0:
            gc.unfreeze()
            gc.collect()
        else:
            gc.collect(1)
        gc.freeze()

    def close(self) -> None:
        """Unfreeze everything (the loop stops: its objects become ordinary again)."""
        gc.unfreeze()
