"""Start and stop a real Prometheus (+ Alertmanager) with deploy/prometheus/prometheus-up.sh.

Each stack lives in its own ``STACK_ROOT`` (a pytest temp dir) on free 127.0.0.1 ports, so test
packages can run their own without clashing with a dev stack. Tests skip with a clear reason
only when the Debian binaries are absent (``deploy/dev/install-deps.sh`` installs them).
"""

from __future__ import annotations

import gzip
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
PROM_SCRIPTS = REPO / "deploy" / "prometheus"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def skip_unless_installed(*binaries: str) -> None:
    missing = [b for b in binaries if shutil.which(b) is None]
    if missing:
        pytest.skip(
            f"{', '.join(missing)} not installed: run deploy/dev/install-deps.sh "
            "(Debian packages prometheus, prometheus-alertmanager)"
        )


@dataclass
class PromStack:
    """A running Prometheus (and maybe Alertmanager) under ``root``."""

    root: Path
    prom_port: int
    am_port: int | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.prom_port}"

    def query(self, promql: str, at_s: float | None = None) -> list[dict[str, Any]]:
        data = {"query": promql}
        if at_s is not None:
            data["time"] = str(at_s)
        r = httpx.post(f"{self.url}/api/v1/query", data=data, timeout=10)
        r.raise_for_status()
        return list(r.json()["data"]["result"])

    def wait_for(self, promql: str, timeout_s: float = 30.0, min_results: int = 1) -> list[Any]:
        """Poll ``promql`` until it returns at least ``min_results`` series."""
        deadline = time.monotonic() + timeout_s
        result: list[Any] = []
        while time.monotonic() < deadline:
            result = self.query(promql)
            if len(result) >= min_results:
                return result
            time.sleep(0.25)
        raise AssertionError(f"{promql!r} returned {len(result)} series after {timeout_s} s")

    def log(self, name: str) -> str:
        path = self.root / "log" / f"{name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def start(
    root: Path,
    *,
    scrape_jobs: Mapping[str, Sequence[str]],
    rules_glob: str | None = None,
    backfill_gz: Path | None = None,
    webhook_url: str | None = None,
    scrape_interval: str = "1s",
) -> PromStack:
    """Run prometheus-up.sh in ``root``; raises RuntimeError (with its log) when it fails."""
    prom_port = free_port()
    am_port = free_port() if webhook_url else None
    env = {
        **os.environ,
        "STACK_ROOT": str(root),
        "PROM_PORT": str(prom_port),
        "PROM_SCRAPE_INTERVAL": scrape_interval,
        "PROM_SCRAPE_JOBS": ";".join(f"{k}={','.join(v)}" for k, v in scrape_jobs.items()),
        "PROM_RULES_GLOB": rules_glob or "",
        "WITH_ALERTMANAGER": "1" if webhook_url else "0",
    }
    if am_port is not None and webhook_url:
        env["ALERTMANAGER_PORT"] = str(am_port)
        env["ALERTMANAGER_WEBHOOK_URL"] = webhook_url
    if backfill_gz is not None:
        om = root / "backfill.om"
        root.mkdir(parents=True, exist_ok=True)
        om.write_bytes(gzip.decompress(backfill_gz.read_bytes()))
        env["PROM_BACKFILL_OPENMETRICS"] = str(om)
    stack = PromStack(root=root, prom_port=prom_port, am_port=am_port, env=env)
    proc = subprocess.run(
        ["bash", str(PROM_SCRIPTS / "prometheus-up.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if proc.returncode != 0:
        stop(stack)
        raise RuntimeError(f"prometheus-up.sh failed:\n{proc.stderr[-3000:]}")
    return stack


def stop(stack: PromStack) -> None:
    subprocess.run(
        ["bash", str(PROM_SCRIPTS / "prometheus-down.sh")],
        env={**stack.env, "PURGE": "1"},
        capture_output=True,
        timeout=60,
        check=False,
    )


class WebhookSink:
    """An Alertmanager webhook receiver on 127.0.0.1 that keeps every POSTed JSON body."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        sink = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                sink.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout_s: float
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for body in list(self.bodies):
                if predicate(body):
                    return body
            time.sleep(0.25)
        raise AssertionError(f"no matching notification in {timeout_s} s: {self.bodies}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def spawn(
    argv: Sequence[str],
    *,
    ready_line: str,
    log_path: Path,
    timeout_s: float = 120.0,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start a helper process and wait until its log shows ``ready_line``; ``timeout_s`` only
    catches a hang (a planner's start took over 30 s beside the unit tests at a load of 9)."""
    log = log_path.open("wb")
    proc = subprocess.Popen(
        list(argv), stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
    )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready_line in log_path.read_text(errors="replace"):
            return proc
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    terminate(proc)
    raise RuntimeError(f"{argv[:3]} did not start:\n{log_path.read_text(errors='replace')[-3000:]}")


def terminate(proc: subprocess.Popen[bytes]) -> None:
    """Stop a process this test started (by its own handle)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


PYTHON = sys.executable
