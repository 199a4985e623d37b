"""The test session's start-up heap stays frozen between tests (tests/conftest.py), and the
garbage of a test that unfroze it (an ingest loop that closed) is still freed."""

from __future__ import annotations

from pathlib import Path

from tests.pytest_probe import run_pytest

CONFTEST = """\
import tests.conftest as session
from tests.conftest import pytest_collection_finish, pytest_runtest_protocol

session.FULL_COLLECTION_EVERY = 3
"""

PROBES = """\
import gc
import weakref


class Node:
    \"\"\"A cyclic object: only a full collection frees it.\"\"\"

    def __init__(self):
        self.me = self


garbage = []


def test_the_start_up_heap_is_frozen():
    assert gc.get_freeze_count() > 0


def test_a_test_leaves_cyclic_garbage():
    node = Node()
    garbage.append(weakref.ref(node))
    gc.collect(1)
    gc.collect(1)  # survived two collections: in the oldest generation
    del node  # garbage that only a full collection frees


def test_the_garbage_waits_frozen():
    gc.collect()
    assert garbage[0]() is not None


def test_it_is_freed_by_the_full_collection_after_the_third_test():
    assert garbage[0]() is None


def test_a_closing_loop_unfreezes_everything():
    gc.unfreeze()  # as CycleCollector.close does


def test_the_heap_is_frozen_again():
    assert gc.get_freeze_count() > 0
"""


def test_the_start_up_heap_stays_frozen_and_garbage_is_still_freed(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_probes.py").write_text(PROBES)
    result = run_pytest(tmp_path, "-rA", "-p", "no:randomly", str(tmp_path))
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "6 passed" in out, out
