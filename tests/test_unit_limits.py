"""The per-test limits of unit tests (tests/conftest.py): a CPU-time budget that fails a test
which works too long, whatever the load of the machine, and leaves alone a test that only waits."""

from __future__ import annotations

from pathlib import Path

from tests.pytest_probe import run_pytest

CONFTEST = """\
import tests.conftest as limits
from tests.conftest import (
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
)

limits.UNIT_TEST_CPU_S = 0.25
"""

PROBES = """\
import time

import pytest


def spin(cpu_s):
    start = time.process_time()
    while time.process_time() - start < cpu_s:
        pass


def test_works_past_its_budget():
    spin(5.0)


def test_waits_past_its_budget():
    time.sleep(1.5)


@pytest.mark.timeout(2)
def test_marked_gets_its_seconds():
    spin(0.5)
"""


def test_a_unit_test_fails_on_cpu_time_not_on_waiting(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_probes.py").write_text(PROBES)
    # pytest-timeout: the one plugin of the suite's run that the limits meet
    result = run_pytest(tmp_path, "-rA", "-p", "pytest_timeout", str(tmp_path))
    out = result.stdout + result.stderr
    assert "FAILED test_probes.py::test_works_past_its_budget" in out, out
    assert "more than 0.25 s of CPU time" in out, out
    assert "PASSED test_probes.py::test_waits_past_its_budget" in out, out
    assert "PASSED test_probes.py::test_marked_gets_its_seconds" in out, out
