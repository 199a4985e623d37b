"""Fixtures shared by every test package, the hypothesis profile of CI runs, the per-test
limits of unit tests (a CPU-time budget, and a wall-clock limit that only catches a hang), and
the session's start-up heap kept frozen between tests."""

import gc
import json
import os
import signal
from collections.abc import Generator, Iterator
from types import FrameType
from typing import Any

import pytest
from hypothesis import settings

from tests.slurm_stack import slurm_jobs, slurm_stack

# CI runs property tests on a fixed seed sequence so that a verdict never depends on the draw;
# local runs keep exploring new examples. Both keep each test's own example count.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

UNIT_TEST_CPU_S = float(os.environ.get("PLANNER_TEST_CPU_S", "10"))
"""A unit test (no ``integration`` marker) that uses more CPU time than this fails at once:
unit tests are fast by contract (STYLE.md), so a slow path shows in the run that made it. CPU
time (this process, all its threads: ``ITIMER_PROF``) judges the work, not the machine: it is
the same on a busy machine, where the wall clock of a test stretches with the load. A unit test
with a ``timeout`` mark gets that many CPU seconds instead. Child processes are not counted:
tests that start them bound them themselves (``RLIMIT_CPU``, as tests/scenario/
test_documents_cli.py does). ``PLANNER_TEST_CPU_S`` sets another budget (a deep fuzz hunt)."""

UNIT_TEST_HANG_S = 180
"""The wall-clock limit of a unit test without a ``timeout`` mark: a hang detector (a test
blocked on a lock, a socket or a child uses no CPU), far above what a test within its CPU
budget takes on a busy machine (10 CPU-s at a load of 14 on 2 cores is about 70 s). Tests
that start real components carry ``integration`` and keep the global 600 s limit."""

_budget_s: list[float] = [UNIT_TEST_CPU_S]


def _over_budget(signum: int, frame: FrameType | None) -> None:
    pytest.fail(
        f"this unit test used more than {_budget_s[0]:g} s of CPU time (the process, all its "
        "threads): make it cheaper, or mark it integration if it must start real components "
        "(tests/conftest.py UNIT_TEST_CPU_S)"
    )


def pytest_configure(config: pytest.Config) -> None:
    signal.signal(signal.SIGPROF, _over_budget)


_BUDGET_KEY = pytest.StashKey[float]()
_SPENT_KEY = pytest.StashKey[float]()


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects: it may name ``dev_slurm``
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the shared dev Slurm (the ``slurm_stack`` fixture, directly or
    through another fixture) ``dev_slurm``, and give each unit test its CPU budget and the
    wall-clock hang limit: ``UNIT_TEST_CPU_S`` and ``UNIT_TEST_HANG_S``, or for a unit test
    marked ``timeout(N)`` N CPU seconds and a hang limit of at least N.

    The test command runs the ``dev_slurm`` tests one at a time (they share the cluster, its
    fixed ports and its nodes) beside the other integration tests (deploy/dev/test.sh)."""
    for item in items:
        if "slurm_stack" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.dev_slurm)
        if item.get_closest_marker("integration") is not None:
            continue
        mark = item.get_closest_marker("timeout")
        seconds = 0.0
        if mark is not None:
            seconds = float(mark.args[0] if mark.args else mark.kwargs.get("timeout", 0))
        item.stash[_BUDGET_KEY] = max(UNIT_TEST_CPU_S, seconds)
        item.add_marker(pytest.mark.timeout(max(UNIT_TEST_HANG_S, seconds)), append=False)


@pytest.hookimpl(wrapper=True)
def _cpu_budgeted(item: pytest.Item) -> Iterator[None]:
    """Run one phase (setup, call, teardown) of ``item`` under what is left of its CPU budget:
    the profiling timer counts this process's CPU time and raises ``SIGPROF`` when it runs out.
    The timer is armed only inside a phase, so the failure lands in that phase's report."""
    budget = item.stash.get(_BUDGET_KEY, None)
    if budget is None:  # an integration test
        return (yield)
    spent = item.stash.get(_SPENT_KEY, 0.0)
    left = max(budget - spent, 1e-3)
    _budget_s[0] = budget
    signal.setitimer(signal.ITIMER_PROF, left)
    try:
        return (yield)
    finally:
        remaining, _ = signal.setitimer(signal.ITIMER_PROF, 0)
        item.stash[_SPENT_KEY] = spent + (left - remaining if remaining > 0 else left)


pytest_runtest_setup = _cpu_budgeted
pytest_runtest_call = _cpu_budgeted
pytest_runtest_teardown = _cpu_budgeted


FULL_COLLECTION_EVERY = 100
"""Tests per full collection of the whole heap (``pytest_runtest_protocol``): the cyclic
garbage a test leaves waits frozen for at most this many tests (the service tests leave about
1 MB each); each such collection costs 0.15-0.3 CPU-s."""

_tests_run: list[int] = [0]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what start-up made (the modules, the collected tests: about 350,000 objects), as
    ``planner serve`` freezes the service's before it serves: a full collection then traverses
    only what the tests made. Every ingest loop of the service ends its first cycle with one
    (``planner.service.loops.collector``): over the whole heap, 0.15-0.2 CPU-s each and 34 of
    the unit tests' 161 CPU-s in all."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """After each test, freeze the heap again (a closing ingest loop unfreezes everything:
    ``CycleCollector.close``); every ``FULL_COLLECTION_EVERY`` tests unfreeze it and collect
    everything first, so that no garbage waits frozen for long. (``gc.freeze`` costs nothing;
    ``gc.get_freeze_count`` walks the frozen objects, about 20 ms here: not once a test.)"""
    try:
        return (yield)
    finally:
        _tests_run[0] += 1
        if _tests_run[0] % FULL_COLLECTION_EVERY == 0:
            gc.unfreeze()
            gc.collect()
        gc.freeze()


@pytest.fixture(autouse=True)
def test_client_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starlette's ``TestClient`` sends ``Host: testserver``: the service's tests allow that
    name besides the default loopback names (``allowed_hosts``), as Django's test runner adds
    it to ``ALLOWED_HOSTS``. Tests of the check itself set ``allowed_hosts`` themselves."""
    monkeypatch.setenv(
        "PLANNER_ALLOWED_HOSTS", json.dumps(["localhost", "127.0.0.1", "::1", "testserver"])
    )


__all__ = ["slurm_jobs", "slurm_stack"]


@pytest.fixture
def file_handoffs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """What each hand-off of job file work to a reader thread was for, in order: ``(source,
    the path of one read)``, ``(source, "N files")`` for N read at once; from the fixture on."""
    import adapters.files

    handoffs: list[tuple[str, str]] = []
    real = adapters.files._in_thread

    def counting(source: str, path: str, timeout_s: float, work: Any) -> Any:
        handoffs.append((source, path))
        return real(source, path, timeout_s, work)

    monkeypatch.setattr(adapters.files, "_in_thread", counting)
    return handoffs
