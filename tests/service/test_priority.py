"""Issue 16 item 5 (load): the ingest loop steps aside for the API's requests
(``planner.service.loops.priority``), within its bounds, and the API counts its requests."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from planner.service.loops.priority import RequestPriority

from .conftest import Clock, ScriptedSource
from .test_load import _ingesting
from .test_service import app_for


class Offset:
    """The monotonic clock moved by hand: a cycle that 'ran' for a while."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset


def _pause_in_thread(priority: RequestPriority) -> tuple[threading.Thread, list[float]]:
    waited: list[float] = []
    thread = threading.Thread(target=lambda: waited.append(priority.pause()), daemon=True)
    thread.start()
    return thread, waited


def test_no_request_in_flight_costs_nothing() -> None:
    priority = RequestPriority(clock=lambda: 0.0)
    priority.begin_cycle()
    assert priority.pause() == 0.0
    assert priority.paused_s == 0.0


def test_the_loop_waits_while_a_request_is_in_flight() -> None:
    clock = Offset()
    priority = RequestPriority(hold_s=600.0, clock=clock)
    priority.begin_cycle()
    clock.offset += 100.0  # the cycle has run 100 s: it may wait up to 100 s more
    with priority.request():
        thread, waited = _pause_in_thread(priority)
        thread.join(timeout=0.3)
        assert thread.is_alive()  # still waiting: the request is in flight
    thread.join(timeout=30)
    assert not thread.is_alive()  # the request left: the loop goes on at once
    assert waited[0] > 0.0
    assert priority.paused_s == pytest.approx(waited[0])


def test_a_request_has_priority_for_its_first_seconds_only() -> None:
    clock = Offset()
    priority = RequestPriority(hold_s=0.05, clock=clock)
    priority.begin_cycle()
    clock.offset += 100.0
    with priority.request():  # a long request (an unpaged listing): the loop goes on
        thread, waited = _pause_in_thread(priority)
        thread.join(timeout=30)
        assert not thread.is_alive()
    assert waited[0] > 0.0


def test_the_loop_waits_at_most_its_share_of_the_cycle() -> None:
    clock = Clock(0.0)  # frozen: the cycle has not run at all yet
    priority = RequestPriority(hold_s=600.0, max_share=0.5, clock=clock)
    priority.begin_cycle()
    with priority.request():
        assert priority.pause() == 0.0  # nothing to share yet
        clock.now = 1.0  # a second of work: up to 1 s of waiting keeps the share at 1/2
        thread, waited = _pause_in_thread(priority)
        thread.join(timeout=0.3)  # the frozen clock never reaches the limit
        assert thread.is_alive()
        clock.now = 2.0
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert waited == [1.0]
    with priority.request():
        assert priority.pause() == 0.0  # 1 s waited of 2 s: the share is spent


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="max_share"):
        RequestPriority(max_share=1.0)


def test_a_cycle_steps_aside_for_a_request_and_stores_the_same(
    tmp_path: Path, cluster_root: Path
) -> None:
    clock, _fake, loop = _ingesting(cluster_root, tmp_path / "p.db")
    priority = loop.deps.priority
    assert loop.run_cycle().results == {"slurm": "ok"}
    assert priority.paused_s == 0.0
    before = {r.job_id: (r.status, r.prediction) for r in loop.deps.store.list_jobs()}
    clock.now += 15.0  # nothing changed: a second cycle, with a request in flight throughout
    with priority.request():
        assert loop.run_cycle().results == {"slurm": "ok"}
    assert priority.paused_s > 0.0
    after = {r.job_id: (r.status, r.prediction) for r in loop.deps.store.list_jobs()}
    assert after == before


def test_every_api_request_is_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = app_for(f"sqlite:///{tmp_path / 'p.db'}", ScriptedSource(), Clock())
    priority = client.app.state.planner.ingestor.deps.priority  # type: ignore[attr-defined]
    seen: list[int] = []
    real = priority.request

    def counting() -> Any:
        seen.append(1)
        return real()

    monkeypatch.setattr(priority, "request", counting)
    with client:
        assert client.get("/healthz").status_code == 200
        client.get("/v1/jobs?limit=5")
    assert len(seen) == 2


def test_requests_in_flight_shorten_the_switch_interval() -> None:
    before = sys.getswitchinterval()
    priority = RequestPriority(switch_s=before / 10)
    with priority.request():
        assert sys.getswitchinterval() == pytest.approx(before / 10)
        with priority.request():
            pass
        assert sys.getswitchinterval() == pytest.approx(before / 10)  # one still in flight
    assert sys.getswitchinterval() == pytest.approx(before)
