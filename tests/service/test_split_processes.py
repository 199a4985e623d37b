"""``planner serve`` with ``service.processes: split`` as a real process tree against the load
benchmark's fake Slurm (real ``squeue``/``sinfo``/``sacct``/``scontrol`` executables printing
Slurm 22.05 JSON): the API process gets ready once its ingest child stored a first cycle, serves
pages while cycles run, exports the loop's metrics under today's names, answers while the
ingest process is frozen, reports the ingest part unhealthy when its child is killed, and starts
a new child that carries on."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.fake_slurm import FakeSlurm

from .test_serve_process import Planner

pytestmark = pytest.mark.integration


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        found += [int(p) for p in task.read_text().split()]
    return found


def _ingest_child(pid: int) -> int | None:
    """The supervised ingest process among ``pid``'s children (a ``spawn`` child that is not
    multiprocessing's resource tracker)."""
    for child in _children(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")
        except FileNotFoundError:
            continue
        if b"spawn_main" in cmdline and b"resource_tracker" not in cmdline:
            return child
    return None


def _until(check: Callable[[], Any], what: str, timeout_s: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _readyz(planner: Planner) -> httpx.Response:
    return httpx.get(f"{planner.url}/readyz", timeout=10)


@pytest.fixture
def split_planner(tmp_path: Path) -> Iterator[Planner]:
    fake = FakeSlurm(tmp_path / "cluster", jobs=150, nodes=30, gpus=600, users=10, seed=3)
    fake.populate()
    planner = Planner(
        tmp_path,
        PLANNER_SERVICE__PROCESSES="split",
        PLANNER_SLURM__ENABLED="on",
        PLANNER_SLURM__BIN_DIR=str(fake.bin_dir),
        PLANNER_SLURM__ALLOWED_FILE_ROOTS=f'["{fake.shared}"]',
        PLANNER_INGEST_INTERVAL_S="2",
        PLANNER_AUTH__ANONYMOUS_READ="true",
    )
    try:
        yield planner.start()
    finally:
        planner.stop()


def test_split_service_serves_pages_metrics_and_restarts_its_ingest_child(
    split_planner: Planner,
) -> None:
    planner = split_planner
    assert planner.proc is not None
    ready = _until(lambda: _readyz(planner).status_code == 200 and _readyz(planner), "ready")
    body = ready.json()
    assert body["processes"] == "split"
    assert body["sources"] == ["slurm"]
    assert body["cycles_ok"] >= 1
    assert body["ingest"] == "ok"
    assert body["store"] == "ok"
    assert body["leader"] is True
    child = _ingest_child(planner.proc.pid)
    assert child is not None
    assert child != planner.proc.pid

    # pages while the child keeps cycling (every 2 s)
    cycles_before = body["cycles_ok"]
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        page = httpx.get(f"{planner.url}/v1/jobs", params={"limit": 50}, timeout=10)
        assert page.status_code == 200, page.text
        assert page.json()["jobs"]
        time.sleep(0.2)
    assert _readyz(planner).json()["cycles_ok"] > cycles_before

    # the loop's metrics, under the names a single process exports, from the child's status
    metrics = httpx.get(f"{planner.url}/metrics", timeout=30).text
    assert re.search(
        r'^planner_ingest_cycle_seconds\{cluster="[^"]*",scheduler="slurm"\} ', metrics, re.M
    )
    assert re.search(
        r'^planner_ingest_poll_seconds\{cluster="[^"]*",scheduler="slurm"\} ', metrics, re.M
    )
    assert re.search(r'^planner_source_up\{cluster="[^"]*",scheduler="slurm"\} 1.0', metrics, re.M)
    assert "# TYPE planner_scheduler_writes_total counter" in metrics

    # the API does not wait on the ingest process: frozen, it still answers
    os.kill(child, signal.SIGSTOP)
    try:
        for _ in range(5):
            page = httpx.get(f"{planner.url}/v1/jobs", params={"limit": 50}, timeout=5)
            assert page.status_code == 200
    finally:
        os.kill(child, signal.SIGCONT)

    # killed, the child is reported and replaced
    os.kill(child, signal.SIGKILL)
    down = _until(
        lambda: (r := _readyz(planner)).status_code == 503 and r, "the ingest part reported down"
    )
    assert down.json()["ingest"] != "ok"
    assert down.json()["store"] == "ok"
    _until(lambda: _readyz(planner).status_code == 200, "ready again")
    again = _ingest_child(planner.proc.pid)
    assert again is not None
    assert again != child
    assert planner.proc.poll() is None  # the API process never stopped

    # SIGTERM ends the API and its child
    planner.proc.send_signal(signal.SIGTERM)
    planner.proc.wait(30)
    _until(lambda: not Path(f"/proc/{again}").exists(), "the child gone", timeout_s=15)
