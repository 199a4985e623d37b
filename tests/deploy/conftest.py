"""One real stack for the deploy tests: a planner process (tests/deploy/planner_feed.py: the real
app, ingest loop and /metrics, fed by a scripted scheduler source) scraped every second by a real
Prometheus 2.42 that evaluates deploy/prometheus/rules/planner.yml and sends alerts to a real
Alertmanager 0.25, which posts them to a webhook receiver in this process.

The rules Prometheus loads are deploy/prometheus/rules/planner.yml with every alert's ``for``
set to 0s (nothing else changed), so the end-to-end test does not wait 15 minutes; the ``for``
durations themselves are covered by the promtool unit tests.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from tests.deploy import stack

REPO = stack.REPO
RULES = REPO / "deploy" / "prometheus" / "rules" / "planner.yml"


@dataclass
class PlannerStack:
    prom: stack.PromStack
    planner_url: str
    sink: stack.WebhookSink
    planner: subprocess.Popen[bytes]


def rules_without_for(src: Path, dst: Path) -> None:
    doc = yaml.safe_load(src.read_text())
    for group in doc["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                rule["for"] = "0s"
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.fixture(scope="session")
def planner_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlannerStack]:
    stack.skip_unless_installed("prometheus", "promtool", "prometheus-alertmanager", "amtool")
    root = tmp_path_factory.mktemp("deploy-stack")
    port = stack.free_port()
    planner = stack.spawn(
        [
            stack.PYTHON,
            "-m",
            "tests.deploy.planner_feed",
            "--port",
            str(port),
            "--workdir",
            str(root / "planner"),
        ],
        ready_line="Uvicorn running",
        log_path=root / "planner.log",
        env={"PYTHONPATH": str(REPO)},
    )
    sink = stack.WebhookSink()
    rules = root / "rules" / "planner.yml"
    rules_without_for(RULES, rules)
    try:
        prom = stack.start(
            root / "stack",
            scrape_jobs={"planner": [f"127.0.0.1:{port}"]},
            rules_glob=str(rules),
            webhook_url=sink.url,
        )
    except BaseException:
        sink.close()
        stack.terminate(planner)
        raise
    try:
        # First scrape of a planner that has run at least one ingest cycle and its review.
        prom.wait_for('planner_job_info{job_id="101"}', timeout_s=60)
        prom.wait_for("planner_capacity_review_timestamp_seconds", timeout_s=240)
        yield PlannerStack(
            prom=prom, planner_url=f"http://127.0.0.1:{port}", sink=sink, planner=planner
        )
    finally:
        stack.stop(prom)
        sink.close()
        stack.terminate(planner)


def planner_metrics(planner_url: str) -> str:
    r = httpx.get(f"{planner_url}/metrics", timeout=10)
    r.raise_for_status()
    return r.text
