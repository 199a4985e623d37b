"""A real ``planner serve`` process: SIGTERM stops it within the Kubernetes grace
period while a search runs, an accepted write survives SIGKILL, a busy worker pool leaves
``/healthz`` fast (and answers 429), and a bad database URL is refused without its password."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import ADMIN_TOKEN, bearer, write_token_file
from .test_calibration_service import SAMPLES
from .test_security_api import GPT3

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
#: Seconds ``planner serve`` gets to answer ``/healthz`` (its imports take most of a minute on
#: two busy cores).
START_TIMEOUT_S = 180.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Planner:
    """``planner serve`` in a subprocess on a free loopback port."""

    def __init__(self, tmp: Path, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"planner-{self.port}.log"
        tokens = write_token_file(tmp / "tokens")
        self.env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "XDG_STATE_HOME": str(tmp / "state"),
            "PLANNER_PORT": str(self.port),
            "PLANNER_DATABASE_URL": f"sqlite:///{tmp / 'planner.db'}",
            "PLANNER_SLURM__ENABLED": "off",
            "PLANNER_KUBERNETES__ENABLED": "off",
            "PLANNER_AUTH__TOKEN_FILE": str(tokens),
            **env,
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *, wait: bool = True) -> Planner:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", "from planner.cli import main; main()", "serve"],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO,
            )
        if wait:
            deadline = time.monotonic() + START_TIMEOUT_S
            while time.monotonic() < deadline:
                assert self.proc.poll() is None, self.log.read_text()
                try:
                    if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)
            self.stop()  # not left running past the test
            raise AssertionError(f"planner did not start:\n{self.log.read_text()}")
        return self

    def stop(self) -> None:
        """SIGTERM (``planner serve`` stops its ingest process too), SIGKILL after 30 s."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def planners(tmp_path: Path) -> Iterator[list[Planner]]:
    started: list[Planner] = []
    yield started
    for planner in started:
        planner.stop()


def test_sigterm_stops_within_the_grace_period_while_a_search_runs(
    tmp_path: Path, planners: list[Planner]
) -> None:
    # Probe: SIGTERM did not stop the process within 30 s.
    planner = Planner(
        tmp_path, PLANNER_SHUTDOWN_GRACE_S="5", PLANNER_LIMITS__EXPLORE_TIME_BUDGET_S="600"
    ).start()
    planners.append(planner)
    answers: list[Any] = []

    def search() -> None:
        try:
            answers.append(httpx.post(f"{planner.url}/v1/explore", json=[GPT3] * 200, timeout=120))
        except httpx.HTTPError as exc:
            answers.append(exc)

    client = threading.Thread(target=search, daemon=True)
    client.start()
    time.sleep(3)  # the search is running
    assert planner.proc is not None
    assert planner.proc.poll() is None
    sent = time.monotonic()
    planner.proc.send_signal(signal.SIGTERM)
    planner.proc.wait(30)
    assert time.monotonic() - sent < 30
    client.join(10)
    assert answers  # the client got an answer or a closed connection, not a hang


def test_an_accepted_upload_survives_sigkill(tmp_path: Path, planners: list[Planner]) -> None:
    planner = Planner(tmp_path).start()
    planners.append(planner)
    lines = (SAMPLES / "op_samples.csv").read_text().splitlines()
    subset = "\n".join([lines[0], *[r for r in lines[1:] if r.startswith("gemm,")][:60]]) + "\n"
    answer = httpx.post(
        f"{planner.url}/v1/calibrations",
        files={"op_samples": ("op_samples.csv", subset, "text/csv")},
        data={"name": "durable"},
        headers=bearer(ADMIN_TOKEN),
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    assert planner.proc is not None
    planner.proc.send_signal(signal.SIGKILL)
    planner.proc.wait(10)
    again = Planner(tmp_path)
    again.port, again.url = planner.port, planner.url
    again.env["PLANNER_PORT"] = str(planner.port)
    planners.append(again.start())
    names = [o["name"] for o in httpx.get(f"{again.url}/v1/calibrations").json()["operators"]]
    assert names == ["durable"]


def test_a_busy_pool_answers_429_and_healthz_stays_fast(
    tmp_path: Path, planners: list[Planner]
) -> None:
    # Probe: 39 slow requests exhausted the worker pool so /healthz timed out.
    planner = Planner(tmp_path, PLANNER_LIMITS__WORKERS="2", PLANNER_LIMITS__QUEUE="2").start()
    planners.append(planner)
    statuses: list[int] = []

    def slow() -> None:
        try:
            statuses.append(
                httpx.post(f"{planner.url}/v1/explore", json=GPT3, timeout=120).status_code
            )
        except httpx.HTTPError:
            statuses.append(0)

    clients = [threading.Thread(target=slow, daemon=True) for _ in range(39)]
    for c in clients:
        c.start()
    time.sleep(1)
    worst = 0.0
    for _ in range(10):
        started = time.monotonic()
        assert httpx.get(f"{planner.url}/healthz", timeout=5).status_code == 200
        worst = max(worst, time.monotonic() - started)
        time.sleep(0.1)
    assert worst < 2.0, worst
    for c in clients:
        c.join(120)
    assert statuses.count(429) >= 30
    assert statuses.count(200) >= 2
    assert set(statuses) <= {200, 429}


def test_a_bad_database_url_is_refused_without_its_password(tmp_path: Path) -> None:
    # Probe: a malformed database URL was printed at start-up with its password.
    planner = Planner(
        tmp_path, PLANNER_DATABASE_URL="postgresql+psycopg://planner:s3cr3t-pw@db:54x32/planner"
    )
    planner.start(wait=False)
    assert planner.proc is not None
    assert planner.proc.wait(60) != 0
    text = planner.log.read_text()
    assert "s3cr3t-pw" not in text
    assert "database_url" in text
    assert "Traceback" not in text


def test_a_public_listener_without_tokens_refuses_to_start(tmp_path: Path) -> None:
    planner = Planner(tmp_path, PLANNER_HOST="0.0.0.0", PLANNER_AUTH__TOKEN_FILE="")
    planner.env.pop("PLANNER_AUTH__TOKEN_FILE")
    planner.start(wait=False)
    assert planner.proc is not None
    assert planner.proc.wait(60) != 0
    assert "auth.token_file" in planner.log.read_text()
