"""A pytest run in a child process over probe test files written into a folder: how the tests
of the suite's own hooks (its lanes, its CPU-time limits) see those hooks act as in a real run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pytest -q -p no:cacheprovider ARGS`` in ``folder`` (its probe files and
    conftest), with this checkout importable (``tests.conftest``) and no third-party plugin
    loaded unless ``args`` names one with ``-p`` (loading them all costs a CPU-second).
    Returns the finished process, its output as text; 300 s at most."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        cwd=folder,
        check=False,
    )
