"""The queue forecast's worker process (``planner.service.loops.forecast_worker``): one forecast
per source in flight, a rest as long as the last one took, failures and a dead worker logged and
survived, and ``close`` stopping a forecast in flight.

The forecasts here are standard-library calls (``math.sqrt``, ``time.sleep``, ``os._exit``) run
in the real spawned worker; the forecaster's clock is a list the test moves, so the rest is
judged on that clock, and the real waits below only detect a hang.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Iterator

import pytest

from planner.service.loops.forecast_worker import QueueForecaster

HANG_S = 120.0  # far beyond a spawn on a busy machine: a hang detector, not a timing


@pytest.fixture
def clock() -> list[float]:
    return [0.0]


@pytest.fixture
def forecaster(clock: list[float]) -> Iterator[QueueForecaster]:
    worker = QueueForecaster(clock=lambda: clock[0])
    yield worker
    worker.close()


def _wait(collect: Callable[[], object | None], done: Callable[[], bool]) -> object | None:
    """``collect()`` once ``done()`` (the flight ended), within the hang detector."""
    deadline = time.monotonic() + HANG_S
    while not done():
        assert time.monotonic() < deadline, "the worker never finished"
        time.sleep(0.05)
    return collect()


def _finished(forecaster: QueueForecaster, key: str) -> Callable[[], bool]:
    """True once ``key``'s flight is done (read under the forecaster's own rule: ``collect``
    would hand it out)."""

    def done() -> bool:
        flight = forecaster._flights.get(key)
        return flight is None or flight.future.done()

    return done


def test_a_source_has_one_forecast_in_flight_rests_as_long_as_it_took_and_survives_failures(
    forecaster: QueueForecaster, clock: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    assert forecaster.ready("slurm/a")
    forecaster.submit("slurm/a", math.sqrt, 16.0)
    assert not forecaster.ready("slurm/a")
    assert forecaster.ready("slurm/b")  # sources are independent
    clock[0] = 5.0  # the forecast "took" 5 s on the forecaster's clock
    assert _wait(lambda: forecaster.collect("slurm/a"), _finished(forecaster, "slurm/a")) == 4.0
    assert forecaster.last_duration_s["slurm/a"] == 5.0
    assert forecaster.collect("slurm/a") is None  # handed out once
    clock[0] = 9.9
    assert not forecaster.ready("slurm/a")  # resting until 5 + 5
    clock[0] = 10.0
    assert forecaster.ready("slurm/a")

    # a forecast that raises in the worker: logged, nothing stored, the next one runs there
    forecaster.submit("slurm/a", math.sqrt, -1.0)
    with caplog.at_level(logging.WARNING):
        result = _wait(lambda: forecaster.collect("slurm/a"), _finished(forecaster, "slurm/a"))
    assert result is None
    assert "queue forecast of slurm/a failed: math domain error" in caplog.text
    assert forecaster.ready("slurm/a")  # took 0 s on the test's clock: no rest
    forecaster.submit("slurm/a", math.sqrt, 9.0)
    assert _wait(lambda: forecaster.collect("slurm/a"), _finished(forecaster, "slurm/a")) == 3.0


def test_a_dead_worker_is_replaced_and_close_stops_a_forecast_in_flight(
    forecaster: QueueForecaster, caplog: pytest.LogCaptureFixture
) -> None:
    forecaster.submit("slurm/a", os._exit, 3)
    with caplog.at_level(logging.ERROR):
        result = _wait(lambda: forecaster.collect("slurm/a"), _finished(forecaster, "slurm/a"))
    assert result is None
    assert "the worker process died; starting a new one" in caplog.text

    forecaster.submit("slurm/a", time.sleep, 600.0)  # on a new worker
    executor = forecaster._executor
    assert executor is not None
    deadline = time.monotonic() + HANG_S
    while not executor._processes:  # the worker process is spawned on first submit
        assert time.monotonic() < deadline, "the worker never started"
        time.sleep(0.05)
    processes = list(executor._processes.values())
    assert all(process.is_alive() for process in processes)
    forecaster.close()
    for process in processes:
        # polled, not joined: the executor's own thread joins its killed processes too, and a
        # join that loses that race returns before the exit status is known
        deadline = time.monotonic() + HANG_S
        while process.is_alive():
            assert time.monotonic() < deadline, "the worker was not stopped"
            time.sleep(0.05)
        assert process.exitcode is not None
        assert process.exitcode < 0  # killed, not finished
    assert forecaster.ready("slurm/a")  # nothing in flight any more
    assert forecaster.collect("slurm/a") is None
