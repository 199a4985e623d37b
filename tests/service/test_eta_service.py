"""The ETA in the service: wall-clock pace and pauses from timestamped logs, ended jobs
keep what they were and teach their cluster (band calibration, shutdown), a job continuing
another's run keeps its history, a requeued job resumes from it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

import planner.forecast.replay as replay_module
from adapters.logs import read_job_log
from planner.forecast.arguments import schedule_from_arguments
from planner.forecast.eta import estimate_running
from planner.forecast.history import ProgressHistory
from planner.specs.job import JobStatus

from .conftest import Clock, JobFactory, ScriptedSource
from .test_service import app_for, cycle, job_view, metric_value

T0 = 1_800_000_000.0
SCENARIO = (
    "model: {num_layers: 2, hidden_size: 128, num_attention_heads: 4, seq_length: 128,"
    " vocab_size: 1024}\nhardware: {gpu: h100-sxm, num_gpus: 2}\n"
    "parallelism: {micro_batch_size: 4, global_batch_size: 8}\ntraining: {train_iters: 200}\n"
)


def stamped_line(iteration: int, total: int, at_s: float, ms: float) -> str:
    """A Megatron-LM iteration line with its timestamp (printed in the host's zone)."""
    stamp = dt.datetime.fromtimestamp(at_s).strftime("%Y-%m-%d %H:%M:%S")
    return (
        f" [{stamp}] iteration {iteration:8d}/{total:8d} | consumed samples: {iteration * 8:12d} |"
        f" elapsed time per iteration (ms): {ms:.1f} | learning rate: 1.000000E-04 |"
        " global batch size:     8 | lm loss: 6.900000E+00 | loss scale: 1.0 |"
        " number of skipped iterations:   0 | number of nan iterations:   0 |\n"
    )


def run_log(
    start: float, total: int, upto: int, *, step_s: float, eval_every: int, eval_s: float
) -> tuple[str, float]:
    """Log lines every 10 iterations to ``upto`` of a run at ``step_s`` per iteration with an
    evaluation of ``eval_s`` after every multiple of ``eval_every`` (the printed time leaves it
    out, as Megatron-LM's timer does); returns the text and the time of the last line."""
    lines, now = [], start
    for i in range(10, upto + 1, 10):
        now += 10 * step_s
        if (i - 10) % eval_every == 0 and i > 10:
            now += eval_s
        lines.append(stamped_line(i, total, now, 1000 * step_s))
    return "".join(lines), now


def running_job(make_job: JobFactory, log: Path, scenario: Path, **kw: Any) -> Any:
    base: dict[str, Any] = {
        "status": JobStatus.RUNNING,
        "comment": f"planner:scenario={scenario}",
        "stdout_path": str(log),
        "command": "train.py --eval-interval 50 --eval-iters 10",
    }
    base.update(kw)
    return make_job(**base)


def first_run_ended(
    client: Any,
    tmp_path: Path,
    source: ScriptedSource,
    clock: Clock,
    make_job: JobFactory,
    scenario: Path,
    *,
    upto: int,
    ended: JobStatus,
) -> float:
    """Job 1 of a 200-iteration run (1 s per iteration, an evaluation of 20 s every 50) seen
    running up to ``upto``, then ended with ``ended``; returns the time of its last line."""
    start = clock.now
    log = tmp_path / "1.out"
    text, last = run_log(start, 200, upto, step_s=1.0, eval_every=50, eval_s=20.0)
    log.write_text(text)
    clock.now = last + 1.0
    source.set_jobs(running_job(make_job, log, scenario, job_id="1", start_time_s=start))
    cycle(client)
    clock.now = last + 5.0
    source.set_jobs(make_job(job_id="1", status=ended, start_time_s=start, end_time_s=last))
    cycle(client)
    return last


def test_pauses_are_projected_and_an_ended_job_teaches_its_cluster(
    tmp_path: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    log = tmp_path / "a.out"
    start = clock.now = T0
    with app_for(db_url, source, clock) as client:
        text, last = run_log(start, 200, 40, step_s=1.0, eval_every=50, eval_s=20.0)
        log.write_text(text)
        clock.now = last + 1.0
        source.set_jobs(running_job(make_job, log, scenario, start_time_s=start))
        cycle(client)
        # 120 of 200 iterations at 1 s each, an evaluation of 20 s after 50 and 100
        text, last = run_log(start, 200, 120, step_s=1.0, eval_every=50, eval_s=20.0)
        log.write_text(text)
        clock.now = last + 1.0
        source.set_jobs(running_job(make_job, log, scenario, start_time_s=start))
        cycle(client)
        eta = job_view(client)["eta"]
        assert eta["step_time_s"]["p50"] == pytest.approx(1.0, rel=0.05)
        # 80 iterations and the evaluations after 150 and 200 are ahead
        assert eta["pauses_s"] == pytest.approx(40.0, rel=0.2)
        assert eta["remaining_s"]["p50"] == pytest.approx(80.0 + 40.0 - 1.0, rel=0.05)
        assert job_view(client)["eta_history"]

        # The job runs to its end; the scheduler's accounting reports it without its command
        # or comment: it keeps its description, prediction and ETA history.
        text, last = run_log(start, 200, 200, step_s=1.0, eval_every=50, eval_s=20.0)
        log.write_text(text)
        end = last + 20.0 + 5.0  # the final evaluation, then 5 s of teardown
        clock.now = end + 2.0
        source.set_jobs(make_job(status=JobStatus.COMPLETED, start_time_s=start, end_time_s=end))
        cycle(client)
        ended = job_view(client)
        assert ended["active"] is False
        assert ended["described_by"] == "scenario_file"
        assert ended["prediction"] is not None
        assert ended["eta"]["finished"] is True
        assert len(ended["eta_history"]) >= 2
        outcome = ended["outcome"]
        assert outcome["duration_s"] == pytest.approx(end - start)
        assert outcome["ran_all_iterations"] is True, (outcome, ended["progress"])
        assert abs(outcome["p50_error_ratio_at"]["50pct"]) < 0.03
        assert outcome["shutdown_s"] == pytest.approx(5.0, abs=2.0)

        body = client.get("/v1/calibrations").json()
        (cluster,) = body["eta"]
        assert (cluster["scheduler"], cluster["cluster"], cluster["num_jobs"]) == (
            "slurm",
            "test",
            1,
        )
        assert cluster["shutdown_s"] == pytest.approx(5.0, abs=2.0)
        assert [b["progress"] for b in cluster["buckets"]] == [
            "0-10%",
            "10-25%",
            "25-50%",
            "50-75%",
            "75-100%",
        ]
        metrics = client.get("/metrics").text
        coverage = metric_value(
            metrics, "planner_eta_band_coverage_ratio", 'cluster="test",scheduler="slurm"'
        )
        assert 0.0 <= coverage <= 1.0

        # The next job of the cluster gets the shutdown learnt from the first.
        log_b = tmp_path / "b.out"
        text, last = run_log(clock.now, 200, 60, step_s=1.0, eval_every=50, eval_s=20.0)
        log_b.write_text(text)
        clock.now = last
        job_b = running_job(make_job, log_b, scenario, job_id="43", start_time_s=end + 2.0)
        source.set_jobs(job_b)
        cycle(client)
        eta_b = job_view(client, "43")["eta"]
        assert eta_b["shutdown_s"] == pytest.approx(5.0, abs=2.0)
        assert eta_b["band_calibrated"] is True


def test_a_job_continuing_a_run_keeps_its_history_and_a_requeued_one_resumes(
    tmp_path: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    clock.now = T0
    with app_for(db_url, source, clock) as client:
        # it stops (out of time) at 120; a new job of the same run starts from the checkpoint
        # of 100, 30 s later
        last = first_run_ended(
            client, tmp_path, source, clock, make_job, scenario, upto=120, ended=JobStatus.TIMEOUT
        )
        second = tmp_path / "2.out"
        restart_at = last + 30.0
        lines = [stamped_line(i, 200, restart_at + 15.0 + (i - 100), 1000.0) for i in (110, 120)]
        second.write_text("".join(lines))
        clock.now = restart_at + 40.0
        source.set_jobs(
            running_job(make_job, second, scenario, job_id="2", start_time_s=restart_at)
        )
        cycle(client)
        view = job_view(client, "2")
        assert view["progress"]["iteration"] == 120
        eta = view["eta"]
        # its own two lines say little; the run's history says 1 s per iteration and an
        # evaluation of 20 s every 50
        assert eta["step_time_s"]["p50"] == pytest.approx(1.0, rel=0.1)
        assert eta["pauses_s"] == pytest.approx(40.0, rel=0.3)

        # requeued: pending again, it resumes from 120 plus the run's restart overhead
        clock.now += 5.0
        source.set_jobs(
            make_job(
                job_id="2",
                status=JobStatus.PENDING,
                comment=f"planner:scenario={scenario}",
                command="train.py --eval-interval 50 --eval-iters 10",
                expected_start_time_s=clock.now + 100.0,
            )
        )
        cycle(client)
        pending = job_view(client, "2")["eta"]
        assert pending["iteration"] == 120
        # its completion is the queue forecast's (never Slurm's start estimate plus the runtime)
        assert pending["completion_from"] == "queue_forecast"
        # the continuation's overhead: the time lost against an uninterrupted run
        # (25 s from its start to its first line, at 110, and the 10 iterations done again)
        assert pending["shutdown_s"] == pytest.approx(25.0 + 10.0, abs=1.0)
        assert pending["remaining_s"]["p50"] > 80.0 + 40.0 + 30.0


def test_a_fresh_rerun_of_a_job_does_not_continue_the_previous_run(
    tmp_path: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    # CI of 2026-11-26: the tiny GPT job run again (same name, user and total) within a minute
    # of the previous one took that run's pace and pauses as its own, as if it had resumed.
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    clock.now = T0
    with app_for(db_url, source, clock) as client:
        last = first_run_ended(
            client, tmp_path, source, clock, make_job, scenario, upto=200, ended=JobStatus.COMPLETED
        )
        # the same job again from the start, twice as slow: its first line at 10, as the first's
        second = tmp_path / "2.out"
        rerun_at = last + 10.0
        lines = [stamped_line(i, 200, rerun_at + 5.0 + 2.0 * i, 2000.0) for i in (10, 20)]
        second.write_text("".join(lines))
        clock.now = rerun_at + 50.0
        source.set_jobs(running_job(make_job, second, scenario, job_id="2", start_time_s=rerun_at))
        cycle(client)
        eta = job_view(client, "2")["eta"]
        # its own pace (the model, recalibrated on the first run, is blended in apart) and no
        # evaluation seen yet: the first run's are not its own
        assert eta["observed_step_time_s"] == pytest.approx(2.0, rel=0.05)
        assert [p["slots_seen"] for p in eta["pauses"]["periods"]] == [0]


@pytest.mark.parametrize("upto", [300, 450, 900])
def test_the_service_reads_a_log_as_its_replay_does(
    tmp_path: Path,
    db_url: str,
    source: ScriptedSource,
    clock: Clock,
    make_job: JobFactory,
    monkeypatch: pytest.MonkeyPatch,
    upto: int,
) -> None:
    # One rule in one place: the service's stored samples must give the estimator what the
    # replay of the same log gives it (the printed compute times were dropped by the store:
    # the service missed a phase that `planner eta replay` found, CI of 2026-11-26).
    data = Path(__file__).resolve().parents[1] / "data" / "logs"
    lines = (data / "tiny_gpt_eval_slowphase_1500it.log").read_text().splitlines(keepends=True)
    records, _, _, _ = read_job_log("".join(lines))
    last = next(k for k, r in enumerate(records) if r.iteration >= upto)
    records = records[: last + 1]
    assert records[-1].timestamp_s is not None
    command = "train.py --eval-interval 300 --eval-iters 150"
    replayed: list[Any] = []

    def spy(**kw: Any) -> Any:
        estimate = estimate_running(**kw)
        replayed.append(estimate)
        return estimate

    with monkeypatch.context() as patched:
        patched.setattr(replay_module, "estimate_running", spy)
        replay_module.replay(
            records, total_iterations=1500, schedule=schedule_from_arguments(command)
        )
    want = replayed[-1]

    log = tmp_path / "job.out"
    cut = next(
        k for k, line in enumerate(lines) if f"iteration {records[-1].iteration:8d}/" in line
    )
    log.write_text("".join(lines[: cut + 1]))
    clock.now = records[-1].timestamp_s
    source.set_jobs(
        make_job(
            job_id="1",
            status=JobStatus.RUNNING,
            stdout_path=str(log),
            command=command,
            start_time_s=records[0].timestamp_s,
        )
    )
    with app_for(db_url, source, clock) as client:
        cycle(client)
        eta = job_view(client, "1")["eta"]
    assert eta["iteration"] == records[-1].iteration
    assert eta["phase_start_iteration"] == want.phase_start_iteration
    assert eta["observed_step_time_s"] == pytest.approx(want.observed_step_time_s, rel=1e-9)
    assert eta["step_time_log_sd"] == pytest.approx(want.step_time_log_sd, rel=1e-9)
    assert eta["pauses_s"] == pytest.approx(want.pauses_s, rel=1e-6)


def test_a_sustained_slower_phase_is_an_event_a_metric_and_not_an_evaluation(
    tmp_path: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    # 300 iterations at 1 s, then 1.4 s from iteration 150 on; an evaluation of 20 s after
    # every 50. The evaluations are pauses, the slower pace a phase: each its own event.
    log = tmp_path / "phase.out"
    start = clock.now = T0
    lines, now = [], start
    with app_for(db_url, source, clock) as client:
        for i in range(10, 301, 10):
            step = 1.4 if i > 150 else 1.0
            now += 10 * step
            if (i - 10) % 50 == 0 and i > 10:
                now += 20.0
            lines.append(stamped_line(i, 300, now, 1000 * step))
            if i % 30 == 0 or i == 300:
                log.write_text("".join(lines))
                clock.now = now + 1.0
                source.set_jobs(
                    running_job(make_job, log, tmp_path / "none.yaml", start_time_s=start)
                )
                cycle(client)
        view = job_view(client)
        phases = [e for e in view["events"] if e["kind"] == "phase"]
        assert len(phases) == 1, view["events"]
        assert abs(phases[0]["iteration"] - 150) <= 15
        assert phases[0]["ratio"] == pytest.approx(1.4, rel=0.1)
        assert phases[0]["description"].startswith("job slowed by 4")
        evaluations = [e for e in view["events"] if e["kind"] == "evaluation"]
        assert [e["iteration"] for e in evaluations] == [50, 100, 150, 200, 250]
        assert all(e["duration_s"] == pytest.approx(20.0, abs=2.0) for e in evaluations)
        assert view["eta"]["phase"]["start_iteration"] == phases[0]["iteration"]
        metrics = client.get("/metrics").text
        labels = 'cluster="test",job_id="42",scheduler="slurm"'
        assert metric_value(metrics, "planner_job_phase_slowdown_ratio", labels) == (
            pytest.approx(1.4, rel=0.1)
        )
        assert (
            metric_value(metrics, "planner_job_phase_start_iteration", labels)
            == (phases[0]["iteration"])
        )


def test_a_job_that_progressed_has_its_history_read_at_most_once_per_cycle(
    tmp_path: Path,
    db_url: str,
    source: ScriptedSource,
    clock: Clock,
    make_job: JobFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the store of its progress writes the history, its ETA reads it: the object written is
    # handed over rather than read back from the dict (planner.service.loops.histories)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    log = tmp_path / "a.out"
    start = clock.now = T0
    reads: list[object] = []
    read = ProgressHistory.from_json.__func__  # type: ignore[attr-defined]

    def counted(cls: type[ProgressHistory], doc: object) -> ProgressHistory:
        if doc:
            reads.append(doc)
        history: ProgressHistory = read(cls, doc)
        return history

    with app_for(db_url, source, clock) as client:
        for upto in (40, 80, 120):
            text, last = run_log(start, 200, upto, step_s=1.0, eval_every=50, eval_s=20.0)
            log.write_text(text)
            clock.now = last + 1.0
            source.set_jobs(running_job(make_job, log, scenario, start_time_s=start))
            reads.clear()
            with monkeypatch.context() as patched:
                patched.setattr(ProgressHistory, "from_json", classmethod(counted))
                cycle(client)
            assert len(reads) <= 1, upto
        eta = job_view(client)["eta"]
    # what reading it back gives: 80 iterations and the evaluations after 150 and 200 ahead
    assert eta["iteration"] == 120
    assert eta["pauses_s"] == pytest.approx(40.0, rel=0.2)
    assert eta["remaining_s"]["p50"] == pytest.approx(80.0 + 40.0 - 1.0, rel=0.05)
