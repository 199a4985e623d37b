"""Garbage collection between ingest cycles (``planner.service.loops.collector``): what
outlives a cycle is frozen, garbage is still freed (at once when young, at the next full
collection when it was frozen), and the loop unfreezes everything when it closes."""

from __future__ import annotations

import gc
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
    try:
        loop.run_cycle()
        assert gc.get_freeze_count() > 0
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
