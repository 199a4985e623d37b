"""Label values of ``/metrics`` are bounded: a job's name and user (typed by its user) and a
node name (printed by the job in its log's ``rank_step`` lines) are cut to
``job_fields.LABEL_CHARS`` characters with the cut marker and a digest of the whole value."""

from __future__ import annotations

import re
import time
from pathlib import Path

from planner.service.job_fields import LABEL_CHARS, MARKER, label
from planner.specs.job import JobStatus
from tests.deploy.planner_feed import write_log

from .conftest import Clock, JobFactory, ScriptedSource
from .test_service import app_for, cycle

HUGE_NAME = "n" * (10 * 1024 * 1024)  # 10 MiB
HUGE_USER = "u" * 100_000
HUGE_NODE = "node-" + "x" * 10_000  # 10 kB


def test_a_huge_job_name_and_node_name_keep_metrics_small(
    tmp_path: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    now = time.time()
    clock.now = now
    log = tmp_path / "train.out"
    write_log(log, now)  # rank 2 (on node2) computes 1.5x slower: a flagged straggler
    log.write_text(log.read_text().replace('"node2"', f'"{HUGE_NODE}"'))
    job = make_job(
        status=JobStatus.RUNNING,
        name=HUGE_NAME,
        user=HUGE_USER,
        start_time_s=now - 400,
        stdout_path=str(log),
        node_list=("node1", "node2"),
    )
    with app_for(db_url, source, clock) as client:
        source.set_jobs(job)
        assert cycle(client) == {"slurm": "ok"}
        report = client.get("/v1/jobs/42/stragglers").json()
        assert report["available"] is True
        assert any(f["node"] == HUGE_NODE for f in report["stragglers"])
        response = client.get("/metrics")
    text = response.text
    assert response.status_code == 200
    assert len(response.content) < 64 * 1024
    values = re.findall(r'="((?:[^"\\]|\\.)*)"', text)
    assert values
    assert max(len(v) for v in values) <= LABEL_CHARS
    (rank_line,) = [
        line for line in text.splitlines() if line.startswith("planner_job_straggler_rank_")
    ]
    assert f'node="{label(HUGE_NODE)}"' in rank_line
    assert MARKER in label(HUGE_NODE)
    (info,) = [line for line in text.splitlines() if line.startswith("planner_job_info{")]
    assert 'name="nnnn' in info
    assert MARKER in info
    assert 'user="uuuu' in info


def test_long_label_values_stay_distinct_and_short_ones_unchanged() -> None:
    a, b = "c" * 300 + "a", "c" * 300 + "b"
    assert len(label(a)) == LABEL_CHARS
    assert label(a) != label(b)
    assert label("x" * LABEL_CHARS) == "x" * LABEL_CHARS
    assert label(7) == "7"
