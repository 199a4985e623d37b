"""Garbage collection between ingest cycles (``planner.service.loops.collector``): what
outlives a cycle is frozen, garbage is still freed (at once when young, at the next full
collection when it was frozen), and the loop unfreezes everything when it closes."""

from __future__ import annotations

import gc
import threading
import weakref
from pathlib import Path

import pytest

from adapters.logs import LogTailer
from planner.errors import SpecError
from planner.service.loops import IngestLoop
from planner.service.loops.collector import CycleCollector
from planner.service.store.sql import SqlStore


class Node:
    """A cyclic object: only the collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_an_ingest_loop_freezes_what_outlives_each_cycle(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'p.db'}")
    store.migrate()
    loop = IngestLoop(store, [], LogTailer(), clock=lambda: 0.0, collect=CycleCollector())
    frozen = gc.get_freeze_count()  # the test session's start-up heap (tests/conftest.py)
    try:
        loop.run_cycle()
        assert gc.get_freeze_count() > frozen
    finally:
        loop.close()
    assert gc.get_freeze_count() == 0


def test_garbage_is_freed_young_at_once_and_frozen_at_the_next_full_collection() -> None:
    collector = CycleCollector(full_every=3)
    try:
        young = Node()
        dead_young = weakref.ref(young)
        del young
        survivor = Node()
        kept = weakref.ref(survivor)
        collector.after_cycle()  # cycle 1: the young garbage goes, the survivor is frozen
        assert dead_young() is None
        assert kept() is not None
        del survivor  # garbage now, but frozen: waits for the full collection
        collector.after_cycle()  # cycle 2
        gc.collect()
        assert kept() is not None
        collector.after_cycle()  # cycle 3: everything unfrozen and collected
        assert kept() is None
    finally:
        collector.close()
    assert gc.get_freeze_count() == 0


def test_a_full_collection_is_at_least_every_cycle() -> None:
    with pytest.raises(SpecError, match="full_every"):
        CycleCollector(full_every=0)


def test_no_full_collection_starts_within_a_cycle() -> None:
    saved = gc.get_threshold()
    full: list[int] = []
    this_thread = threading.get_ident()

    def count(phase: str, info: dict[str, int]) -> None:
        # Only this thread's: a loop another test left running may collect in full by itself.
        if phase == "start" and info["generation"] == 2 and threading.get_ident() == this_thread:
            full.append(1)

    collector = CycleCollector()
    try:
        gc.freeze()
        gc.collect()  # the oldest generation is empty: Python's rules would start a full
        gc.set_threshold(10, 1, 1)  # collection every few hundred allocations
        gc.callbacks.append(count)
        collector.before_cycle()
        kept = [Node() for _ in range(5000)]
        assert full == []
        collector.after_cycle()
        assert len(full) == 1  # the cycle's own, once it ended
        assert gc.get_threshold() == (10, 1, 1)
        del kept
    finally:
        if count in gc.callbacks:
            gc.callbacks.remove(count)
        collector.close()
        gc.set_threshold(*saved)


def test_the_old_garbage_a_cycle_left_is_freed_at_its_end() -> None:
    collector = CycleCollector(full_every=20)
    try:
        collector.before_cycle()
        old = Node()
        dead = weakref.ref(old)
        gc.collect(1)
        gc.collect(1)  # survived two collections: now in the oldest generation
        del old
        collector.after_cycle()
        assert dead() is None
    finally:
        collector.close()
