"""A real Prometheus (Debian 2.42) loaded with backfilled dcgm-exporter and training series
(tests/data/prometheus/telemetry.om.gz) and scraping four live ``job_exporter`` ranks."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.deploy import stack

REPO = Path(__file__).resolve().parents[3]
BACKFILL = REPO / "tests" / "data" / "prometheus" / "telemetry.om.gz"
EXPORTER = REPO / "adapters" / "prometheus" / "job_exporter.py"
LIVE_JOB_ID = "live-77"
LIVE_RANKS = 4
SLOW_RANK = 2
SLOW_FACTOR = 1.5
COMPUTE_TIME_S = 0.02


@dataclass
class Telemetry:
    prom: stack.PromStack
    exporters: list[subprocess.Popen[bytes]]


@pytest.fixture(scope="session")
def telemetry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Telemetry]:
    stack.skip_unless_installed("prometheus", "promtool")
    root = tmp_path_factory.mktemp("prom-adapter")
    ports = [stack.free_port() for _ in range(LIVE_RANKS)]
    exporters = []
    try:
        for rank, port in enumerate(ports):
            # Run as a plain script: the helper must work when copied into a training repo.
            exporters.append(
                stack.spawn(
                    [
                        stack.PYTHON,
                        str(EXPORTER),
                        "--demo",
                        "--port",
                        str(port),
                        "--rank",
                        str(rank),
                        "--world-size",
                        str(LIVE_RANKS),
                        "--job-id",
                        LIVE_JOB_ID,
                        "--node",
                        f"node{rank // 2 + 1}",
                        "--iterations",
                        "1000000",
                        "--log-interval",
                        "5",
                        "--compute-time-s",
                        str(COMPUTE_TIME_S),
                        "--slow-factor",
                        str(SLOW_FACTOR if rank == SLOW_RANK else 1.0),
                        "--step-time-s",
                        str(COMPUTE_TIME_S * SLOW_FACTOR + 0.005),
                    ],
                    ready_line="job_exporter demo",
                    log_path=root / f"exporter-{rank}.log",
                )
            )
        prom = stack.start(
            root / "stack",
            scrape_jobs={"training": [f"127.0.0.1:{p}" for p in ports]},
            backfill_gz=BACKFILL,
        )
    except BaseException:
        for p in exporters:
            stack.terminate(p)
        raise
    try:
        yield Telemetry(prom=prom, exporters=exporters)
    finally:
        stack.stop(prom)
        for p in exporters:
            stack.terminate(p)
