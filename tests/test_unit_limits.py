"""The per-test limits of unit tests (tests/conftest.py): a CPU-time budget that fails a test
which works too long, whatever the load of the machine, and leaves alone a test that only waits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

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
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider"),
            *("-p", "pytest_timeout"),  # the one plugin of the suite's run that the limits meet
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        # the suite's other plugins (hypothesis, xdist, ...) cost a CPU-second to load
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        cwd=tmp_path,
        check=False,
    )
    out = result.stdout + result.stderr
    assert "FAILED test_probes.py::test_works_past_its_budget" in out, out
    assert "more than 0.25 s of CPU time" in out, out
    assert "PASSED test_probes.py::test_waits_past_its_budget" in out, out
    assert "PASSED test_probes.py::test_marked_gets_its_seconds" in out, out
