"""Fixtures shared by the adapter tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A fresh directory every user may search (mode 0755 under the system temporary
    directory): pytest's ``tmp_path`` lies under a 0700 directory, which only its owner may
    enter, while job files are read as the job's user (or others) would see them."""
    path = Path(tempfile.mkdtemp(prefix="planner-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
