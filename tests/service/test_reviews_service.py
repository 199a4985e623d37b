"""Capacity reviews in the service: the pending jobs' queue forecast in ``/v1/jobs``, ``POST
/v1/reviews`` (JSON, HTML, errors), the scheduled review stored and served with its metrics, and
today's queue in the jobs-snapshot format."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from planner.capacity import LocalExecutor, read_snapshot
from planner.capacity.documents import load_document
from planner.service.loops.queue_forecast import queue_order, runtime_band
from planner.service.main import create_app
from planner.service.settings import Settings, parse_schedule
from planner.service.store.sql import SqlStore
from planner.specs.job import ClusterSnapshot, JobState, JobStatus, NodeState

from .conftest import Clock, JobFactory, ScriptedSource
from .test_service import SCENARIO, megatron_line, metric_value

EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"
DAY = 86400.0
NODES = tuple(
    NodeState(
        name=f"node{i}",
        state="allocated",
        num_gpus=8,
        num_gpus_allocated=8,
        gpu_type="h100",
        partitions=("debug",),
    )
    for i in (1, 2)
)


def _document(path: Path) -> Any:
    """A YAML example file as a JSON request body (the planner's loader; dates as ISO text)."""
    return json.loads(json.dumps(load_document(path.read_text(), path.name).value, default=str))


def _client(db_url: str, source: ScriptedSource, clock: Clock, **settings: Any) -> TestClient:
    config = Settings(database_url=db_url, ingest_interval_s=5.0, **settings)
    # the jobs' logs lie beside the database: read under the job-file rules as in service
    config.slurm.allowed_file_roots = [str(Path(db_url.removeprefix("sqlite:///")).parent)]
    app = create_app(
        config, store=SqlStore(db_url), sources=[source], clock=clock, start_loops=False
    )
    return TestClient(app)


def _cycle(client: TestClient) -> None:
    report = client.app.state.planner.ingestor.run_cycle()  # type: ignore[attr-defined]
    assert report.all_ok, report.results


def _queue(
    tmp_path: Path, clock: Clock, make_job: JobFactory, *, done: int = 90
) -> tuple[JobState, ...]:
    """The issue's case on two 8-GPU nodes: job 42 holds all 16 GPUs with no time limit and
    ``100 - done`` iterations of 0.5 s left; 43 (described) and 44 (not) wait for GPUs, and
    Slurm's estimate for them is a year away."""
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    log = tmp_path / "job.out"
    log.write_text("".join(megatron_line(i, 100, 500.0) for i in range(5, done + 1, 5)))
    comment = f"planner:scenario={scenario}"
    common = {"partition": "debug", "submit_time_s": clock.now - 100}
    return (
        make_job(
            job_id="42",
            status=JobStatus.RUNNING,
            num_gpus=16,
            comment=comment,
            start_time_s=clock.now - 60,
            time_limit_s=None,
            stdout_path=str(log),
            node_list=("node1", "node2"),
            **common,
        ),
        make_job(
            job_id="43",
            name="next",
            status=JobStatus.PENDING,
            num_gpus=8,
            gpus_allocated=False,
            comment=comment,
            expected_start_time_s=clock.now + 365 * DAY,
            **common,
        ),
        make_job(
            job_id="44",
            name="bare",
            status=JobStatus.PENDING,
            num_gpus=8,
            gpus_allocated=False,
            time_limit_s=1800.0,
            expected_start_time_s=clock.now + 365 * DAY,
            **{**common, "submit_time_s": clock.now - 50},
        ),
    )


def _set(source: ScriptedSource, clock: Clock, jobs: tuple[JobState, ...]) -> None:
    source.answer = ClusterSnapshot(
        scheduler="slurm", cluster="test", taken_at_s=clock.now, jobs=jobs, nodes=NODES
    )


def test_a_pending_job_starts_when_the_running_jobs_are_predicted_to_end(
    tmp_path: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    """The issue's scenario: Slurm's estimate is a year away (the running job has no limit);
    the planner's predicted start is the running job's predicted end, and the pending job's
    completion is that start plus its predicted runtime, never Slurm's estimate plus it."""
    jobs = _queue(tmp_path, clock, make_job)
    _set(source, clock, jobs)
    with _client(db_url, source, clock) as client:
        _cycle(client)
        running = client.get("/v1/jobs/42").json()
        left = running["eta"]["remaining_s"]["p50"]
        assert left == pytest.approx(10 * 0.5, rel=0.5)  # 10 iterations of 0.5 s
        waiting = client.get("/v1/jobs/43").json()
        forecast = waiting["queue_forecast"]
        assert forecast["scheduler_start_s"] == clock.now + 365 * DAY  # beside, by its name
        assert forecast["runtime_from"] == "eta"
        assert forecast["fleet"] == "nodes"
        start = forecast["start_s"]
        assert clock.now <= start["p10"] <= start["p50"] <= start["p90"] <= clock.now + 120
        runtime = waiting["eta"]["remaining_s"]["p50"]
        done = forecast["completion_s"]["p50"]
        assert done == pytest.approx(start["p50"] + runtime, rel=0.05)
        assert waiting["eta"]["completion_time_s"] == forecast["completion_s"]
        assert waiting["eta"]["completion_from"] == "queue_forecast"
        assert waiting["eta"]["completion_time_s"]["p90"] < clock.now + DAY
        # Job 44 has no predicted runtime: its start is forecast (after 43: both fit at once
        # on 16 GPUs), its completion is not.
        bare = client.get("/v1/jobs/44").json()["queue_forecast"]
        assert bare["runtime_from"] == "time_limit"
        assert bare["start_s"]["p50"] == pytest.approx(start["p50"], abs=1.0)
        assert bare["completion_s"] is None
        metrics = client.get("/metrics").text
        labels = 'cluster="test",job_id="43",scheduler="slurm"'
        assert metric_value(
            metrics, "planner_job_predicted_start_timestamp_seconds", labels
        ) == pytest.approx(start["p50"])
        assert metric_value(
            metrics, "planner_job_predicted_completion_timestamp_seconds", labels
        ) == pytest.approx(done)

        # An unchanged queue within the interval keeps its forecast; a job ending redoes it.
        clock.now += 2.0
        _cycle(client)
        again = client.get("/v1/jobs/43").json()["queue_forecast"]
        assert again["made_at_s"] == forecast["made_at_s"]
        assert again["start_s"] == start
        clock.now += 3.0
        _set(source, clock, jobs[1:])  # 42 ended
        _cycle(client)
        redone = client.get("/v1/jobs/43").json()["queue_forecast"]
        assert redone["made_at_s"] == clock.now
        assert redone["start_s"]["p50"] == pytest.approx(clock.now, abs=1.0)  # GPUs are free


def test_no_gpu_nodes_no_forecast_and_the_setting_turns_it_off(
    tmp_path: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    jobs = _queue(tmp_path, clock, make_job)
    source.answer = ClusterSnapshot(scheduler="slurm", cluster="test", taken_at_s=0, jobs=jobs)
    with _client(db_url, source, clock) as client:
        _cycle(client)
        forecast = client.get("/v1/jobs/43").json()["queue_forecast"]
        assert forecast["start_s"] is None
        assert forecast["completion_s"] is None
        assert "no pool" in forecast["reason"]
        eta = client.get("/v1/jobs/43").json()["eta"]
        assert eta["completion_time_s"] is None  # not Slurm's estimate plus the runtime
    _set(source, clock, jobs)
    off = {"queue_forecast": {"enabled": False}}
    with _client(f"sqlite:///{tmp_path / 'off.db'}", source, clock, **off) as client:
        _cycle(client)
        assert client.get("/v1/jobs/43").json()["queue_forecast"] is None


def test_runtime_band_and_queue_order_rules(make_job: JobFactory) -> None:
    now = 1_000_000.0
    running = make_job(status=JobStatus.RUNNING, start_time_s=now - 100, time_limit_s=1000.0)
    band, basis = runtime_band(None, running, now_s=now, horizon_s=DAY)
    assert (basis, band.p50_s) == ("time_limit", 900.0)
    eta = {"remaining_s": {"p10": 50.0, "p50": 100.0, "p90": None}}
    band, basis = runtime_band(eta, running, now_s=now, horizon_s=DAY)
    assert (basis, band.p10_s, band.p50_s, band.p90_s) == ("eta", 50.0, 100.0, 900.0)
    unlimited = make_job(status=JobStatus.RUNNING, time_limit_s=None)
    band, basis = runtime_band({"finished": True, "remaining_s": {"p50": 5.0}}, unlimited,
                               now_s=now, horizon_s=DAY)  # fmt: skip
    assert (basis, band.p50_s) == ("none", 2 * DAY)
    pending = [
        make_job(job_id="9", status=JobStatus.PENDING, submit_time_s=5.0),
        make_job(job_id="10", status=JobStatus.PENDING, submit_time_s=5.0),
        make_job(job_id="3", status=JobStatus.PENDING, submit_time_s=9.0),
        make_job(job_id="11", status=JobStatus.RUNNING),
        make_job(job_id="12", status=JobStatus.PENDING, queue_position=0),
    ]
    assert [j.job_id for j in queue_order(pending)] == ["11", "12", "9", "10", "3"]


def test_post_review_runs_on_the_live_queue_as_json_html_or_markdown(
    tmp_path: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    _set(source, clock, _queue(tmp_path, clock, make_job))
    body = {
        "fleet": _document(EXAMPLES / "fleet.yaml"),
        "plan": _document(EXAMPLES / "plan.yaml"),
        "what_ifs": _document(EXAMPLES / "what-if-more-h100.yaml"),
        "samples": 8,
        "sizing": False,
    }
    with _client(db_url, source, clock) as client:
        _cycle(client)
        answer = client.post("/v1/reviews", json=body)
        assert answer.status_code == 200, answer.text
        review = answer.json()
        assert review["start_s"] == clock.now  # the live queue is now, after the fleet's start
        assert [r["scenario"] for r in review["comparison"]] == [
            "base",
            "h100-early",
            "b200-pool",
            "ablation-first",
        ]
        base = {j["name"]: j for j in review["scenarios"][0]["jobs"]}
        assert base["42 (train)"]["kind"] == "running"
        assert base["43 (next)"]["kind"] == "pending"
        ablation = base["llama3-8b-ablation"]
        assert ablation["deadline_s"] == clock.now + 19 * DAY  # +19d from the review's start
        page = client.post("/v1/reviews", json=body, headers={"accept": "text/html"})
        assert page.headers["content-type"].startswith("text/html")
        assert page.text.count('class="plotly-graph-div"') == 7
        markdown = client.post(
            "/v1/reviews", json={**body, "what_ifs": []}, headers={"accept": "text/markdown"}
        )
        assert markdown.headers["content-type"].startswith("text/markdown")
        assert "## Deadline risk" in markdown.text
        alone = client.post("/v1/reviews", json={**body, "live_jobs": False, "what_ifs": []})
        assert "42 (train)" not in {j["name"] for j in alone.json()["scenarios"][0]["jobs"]}

        bad = json.loads(json.dumps(body))
        bad["fleet"]["pools"][0]["num_gpu"] = bad["fleet"]["pools"][0].pop("num_gpus")
        wrong = client.post("/v1/reviews", json=bad)
        assert wrong.status_code == 422
        assert wrong.json()["error"] == (
            "fleet: pools[0].num_gpu: unknown field; did you mean 'num_gpus'?"
        )
        too_many = client.post("/v1/reviews", json={**body, "samples": 10**6})
        assert too_many.status_code == 422
        assert too_many.json()["error"].startswith("body.samples:")


def test_scheduled_review_is_stored_served_and_exported(
    tmp_path: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    _set(source, clock, _queue(tmp_path, clock, make_job))
    review = {
        "schedule": "0 6 * * 1",
        "fleet_file": str(EXAMPLES / "fleet.yaml"),
        "plan_file": str(EXAMPLES / "plan.yaml"),
        "what_if_files": [str(EXAMPLES / "what-if-more-h100.yaml")],
        "samples": 8,
        "sizing": False,
        "run_on_start": False,
        "keep": 2,
    }
    with _client(db_url, source, clock, review=review) as client:
        assert client.get("/v1/reviews/latest").status_code == 404
        _cycle(client)
        runner = client.app.state.planner.reviews  # type: ignore[attr-defined]
        first = runner.run_scheduled()
        assert first.error is None
        latest = client.get("/v1/reviews/latest").json()
        assert latest["id"] == first.id
        assert latest["trigger"] == "schedule"
        assert latest["fleet"] == "example-fleet"
        assert latest["result"]["start_s"] == clock.now
        assert latest["summary"][0]["scenario"] == "base"
        page = client.get("/v1/reviews/latest", headers={"accept": "text/html"})
        assert page.text.startswith("<!DOCTYPE html>")
        assert (
            "# Capacity review"
            in client.get("/v1/reviews/latest", headers={"accept": "text/markdown"}).text
        )

        metrics = client.get("/metrics").text
        week = dt.datetime.fromtimestamp(clock.now, dt.UTC).strftime("%Y-%m-%d")
        occupied = metric_value(
            metrics,
            "planner_capacity_forecast_gpus",
            f'pool="h100",quantile="0.5",week="{week}"',
        )
        assert 0 <= occupied <= 768
        capacity = metric_value(
            metrics, "planner_capacity_forecast_capacity_gpus", f'pool="h100",week="{week}"'
        )
        assert capacity == 512  # the +31d addition is later
        assert metric_value(
            metrics, "planner_capacity_review_timestamp_seconds", ""
        ) == pytest.approx(clock.now)
        assert (
            0
            <= metric_value(
                metrics, "planner_plan_deadline_miss_probability", 'job="llama3-8b-ablation"'
            )
            <= 1
        )
        assert 'planner_capacity_expected_deadline_misses{scenario="h100-early"}' in metrics
        weeks = {
            line.split('week="')[1].split('"')[0]
            for line in metrics.splitlines()
            if line.startswith("planner_capacity_forecast_gpus{")
        }
        assert len(weeks) == 13  # 90 days

        # A review that cannot run is stored with its error; the latest good one stays.
        runner.settings = runner.settings.model_copy(update={"plan_file": str(tmp_path / "no")})
        clock.now += 60
        failed = runner.run_scheduled()
        assert "review.plan_file: cannot read" in failed.error
        listed = client.get("/v1/reviews").json()["reviews"]
        assert [r["id"] for r in listed] == [failed.id, first.id]
        assert listed[0]["summary"] is None
        assert client.get("/v1/reviews/latest").json()["id"] == first.id
        runner.run_scheduled()  # keep: 2
        assert len(client.get("/v1/reviews").json()["reviews"]) == 2


def test_the_live_queue_in_the_jobs_snapshot_format(
    tmp_path: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    _set(source, clock, _queue(tmp_path, clock, make_job))
    with _client(db_url, source, clock) as client:
        _cycle(client)
        document = client.get("/v1/reviews/queue").json()
        assert document["taken_at"] == clock.now
        snapshot = read_snapshot(json.dumps(document), "queue.json")
        assert [j.state.job_id for j in snapshot.jobs] == ["42", "43", "44"]
        assert snapshot.jobs[0].running
        running = client.get("/v1/jobs/42").json()["eta"]["remaining_s"]
        assert snapshot.jobs[0].runtime.p50_s == pytest.approx(running["p50"])
        assert snapshot.jobs[2].runtime.p50_s == 1800.0  # its time limit: no prediction
        assert snapshot.jobs[1].team == "alice"


def test_review_schedule_setting() -> None:
    assert parse_schedule("6h") == ("interval", {"seconds": 21600.0})
    kind, cron = parse_schedule("30 6 * * 1-5")
    assert (kind, cron["day_of_week"], cron["hour"]) == ("cron", "mon-fri", "6")
    for bad, message in (
        ("weekly", "neither an interval"),
        ("99 * * * *", "higher than the maximum"),
        ("5s", "at least one minute"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_schedule(bad)
    with pytest.raises(ValueError, match=r"needs review\.fleet_file and review\.plan_file"):
        Settings(review={"schedule": "6h"})


class _CountingExecutor(LocalExecutor):
    """The local loop, counting the chunks it ran and whether it was closed."""

    def __init__(self) -> None:
        self.items = 0
        self.closed = False

    def map(self, fn: Any, shared: Any, items: Any) -> list[Any]:
        self.items += len(items)
        return super().map(fn, shared, items)

    def close(self) -> None:
        self.closed = True


def test_reviews_run_on_the_executor_of_review_ray_address(
    tmp_path: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    """``review.ray_address`` sends a request's and the schedule's samples to the executor the
    composition root makes for that address (Ray), closed after each review."""
    made: list[tuple[str, _CountingExecutor]] = []

    def executor_for(address: str) -> _CountingExecutor:
        made.append((address, _CountingExecutor()))
        return made[-1][1]

    _set(source, clock, _queue(tmp_path, clock, make_job))
    review = {
        "fleet_file": str(EXAMPLES / "fleet.yaml"),
        "plan_file": str(EXAMPLES / "plan.yaml"),
        "samples": 8,
        "sizing": False,
        "ray_address": "10.0.0.1:6379",
    }
    with _client(db_url, source, clock, review=review) as client:
        runner = client.app.state.planner.reviews  # type: ignore[attr-defined]
        runner.executor_for = executor_for
        _cycle(client)
        answer = client.post(
            "/v1/reviews",
            json={"fleet": _document(EXAMPLES / "fleet.yaml"), "samples": 8, "sizing": False},
        )
        assert answer.status_code == 200, answer.text
        assert runner.run_scheduled().error is None
    assert [address for address, _ in made] == ["10.0.0.1:6379"] * 2
    assert all(executor.items > 0 and executor.closed for _, executor in made)
