"""Fixtures shared by the adapter tests."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
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


@pytest.fixture
def job_dir(open_dir: Path) -> Path:
    """A job's working directory, owned by the user running the tests, open to all."""
    path = open_dir / "job"
    path.mkdir(mode=0o755)
    return path


@pytest.fixture
def fifo(job_dir: Path) -> Iterator[Path]:
    """A FIFO in the job's directory, held open for writing for 3 s by a helper thread: a
    reader that (wrongly) opens and reads it blocks until then and reads nothing."""
    path = job_dir / "scenario.yaml"
    os.mkfifo(path, 0o644)
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)  # a writer: no open of it ever blocks
    lock = threading.Lock()
    open_fds = [fd]

    def close() -> None:
        with lock:
            while open_fds:
                os.close(open_fds.pop())

    timer = threading.Timer(3.0, close)
    timer.start()
    yield path
    timer.cancel()
    close()
