"""The live path is the replay path: the service, reading a job's log poll after poll, publishes at
every poll the estimate ``planner eta replay`` makes at the last record that poll read.

Each test writes a recorded log to the job's output file the way the job wrote it (up to the
records a poll saw, polls splitting the records of one printed second as real polls do), runs
one ingest cycle per poll and compares the service's ETA with the replay of the same log at the
same record: method, observed pace, phase, pauses ahead and the completion band, point by point.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adapters.logs import read_job_log
from benchmarks.live_session import SESSIONS
from planner.forecast.arguments import schedule_from_arguments
from planner.forecast.replay import Replay, ReplayPoint, replay
from planner.service.loops.outcomes import ETA_CALIBRATION
from planner.specs.job import JobState, JobStatus, ProgressRecord

from .conftest import Clock, ScriptedSource
from .test_service import app_for, cycle

DATA = Path(__file__).resolve().parents[1] / "data"
LINE = re.compile(r"iteration\s+(\d+)/\s*\d+ \|.*elapsed time per iteration")


def progress_lines(lines: list[str]) -> list[int]:
    """Index of each Megatron-LM iteration line of ``lines`` (one per progress record)."""
    return [k for k, line in enumerate(lines) if LINE.search(line)]


def polls_of(records: list[ProgressRecord], every: int) -> list[int]:
    """Record index each poll's read ends at: every ``every`` records (so a poll splits the
    records of one printed second whenever ``every`` is not a multiple of them), and the last."""
    ends = list(range(every - 1, len(records), every))
    if ends[-1] != len(records) - 1:
        ends.append(len(records) - 1)
    return ends


def compare(service_eta: dict[str, Any], point: ReplayPoint, where: str) -> None:
    """The service's ETA is the replay's estimate at ``point``."""
    estimate = point.estimate
    assert estimate is not None
    assert service_eta["method"] == estimate.method.value, where
    assert service_eta["iteration"] == point.iteration, where
    assert service_eta["phase_start_iteration"] == estimate.phase_start_iteration, where
    for key in ("observed_step_time_s", "pauses_s", "step_time_log_sd"):
        want = getattr(estimate, key)
        if want is None:
            assert service_eta[key] is None, (where, key)
        else:
            assert service_eta[key] == pytest.approx(want, rel=1e-9, abs=1e-9), (where, key)
    assert estimate.completion_time_s is not None
    for q in ("p10", "p50", "p90"):
        want = getattr(estimate.completion_time_s, q)
        assert service_eta["completion_time_s"][q] == pytest.approx(want, rel=0, abs=1e-6), (
            where,
            q,
        )


def live_against_replay(
    tmp_path: Path,
    log_text: str,
    *,
    polls: Callable[[list[ProgressRecord]], list[tuple[int, float]]],
    command: str | None = None,
    batch_script: str | None = None,
    scenario: Path | None = None,
    upto: int | None = None,
    learnt_shutdowns_s: list[float] | None = None,
) -> int:
    """Feed ``log_text`` to a service poll by poll and compare each poll's ETA with the
    replay's at the same record; returns the number of polls compared. ``polls`` gives, for the
    log's records, each poll's last record and its read time; ``command`` / ``batch_script``
    the launch (the schedule), ``scenario`` the job's scenario file (the prior: the replay
    takes the one the service used); ``upto`` cuts the log at that iteration;
    ``learnt_shutdowns_s`` the shutdowns the cluster's finished jobs already taught the
    service (the replay takes the shutdown and its sd from the service's first estimate)."""
    lines = log_text.splitlines(keepends=True)
    records, total, _, _ = read_job_log(log_text)
    at = progress_lines(lines)
    assert len(at) == len(records)
    assert total is not None
    if upto is not None:
        records = records[: next(k for k, r in enumerate(records) if r.iteration >= upto) + 1]
    launch = "\n".join(t for t in (command, batch_script) if t)
    schedule = schedule_from_arguments(launch)
    run: Replay | None = None
    log = tmp_path / "job.out"
    source, clock = ScriptedSource(), Clock()
    db = f"sqlite:///{tmp_path / 'planner.db'}"
    compared = 0
    roots = [str(scenario.parent)] if scenario is not None else None
    launch_fields: dict[str, Any] = {}
    if command is not None:
        launch_fields["command"] = command
    if batch_script is not None:
        launch_fields["batch_script"] = batch_script
    if scenario is not None:
        launch_fields["comment"] = f"planner:scenario={scenario}"
    with app_for(db, source, clock, allowed_file_roots=roots) as client:
        if learnt_shutdowns_s is not None:
            state = {"clusters": {"slurm/test": {"shutdown_s": learnt_shutdowns_s}}}
            client.app.state.planner.store.put_calibration(  # type: ignore[attr-defined]
                ETA_CALIBRATION, state, 0.0
            )
        for end, read_s in polls(records):
            log.write_text("".join(lines[: at[end] + 1]))
            clock.now = read_s
            source.set_jobs(
                JobState(
                    scheduler="slurm",
                    cluster="test",
                    job_id="1",
                    name="train",
                    user="alice",
                    num_gpus=2,
                    gpus_allocated=True,
                    gpu_type="h100",
                    status=JobStatus.RUNNING,
                    stdout_path=str(log),
                    start_time_s=records[0].timestamp_s,
                    **launch_fields,
                )
            )
            cycle(client)
            (row,) = client.app.state.planner.store.find_jobs("1")  # type: ignore[attr-defined]
            eta = row.eta
            if eta is None or eta["method"] == "done":
                continue
            if run is None:  # the prior the service used, from its first estimate on
                run = replay(
                    records,
                    total_iterations=total,
                    schedule=schedule,
                    prior_step_time_s=eta["prior_step_time_s"],
                    prior_log_sd=eta["prior_log_sd"] or 0.3,
                    shutdown_s=eta["shutdown_s"] or 0.0,
                    shutdown_sd_s=eta.get("shutdown_sd_s") or 0.0,
                )
            offset = len(records) - len(run.points)  # records before the first estimate
            if end < offset:
                continue
            where = f"poll ending at record {end} (iteration {records[end].iteration})"
            compare(eta, run.points[end - offset], where)
            compared += 1
    return compared


def every_records(every: int) -> Callable[[list[ProgressRecord]], list[tuple[int, float]]]:
    """Polls every ``every`` records (and at the last), each read half a second after its last
    record was printed."""

    def polls(records: list[ProgressRecord]) -> list[tuple[int, float]]:
        return [(end, (records[end].timestamp_s or 0.0) + 0.5) for end in polls_of(records, every)]

    return polls


@pytest.mark.parametrize(
    ("name", "every", "upto"),
    [
        # lines every 5 iterations of 50-90 ms: polls every 7 lines split the lines of a second
        ("tiny_gpt_e2e_stall_hog_1500it", 7, 750),
        # a restart from a checkpoint: iterations 610-700 done again
        ("tiny_gpt_ckpt_restart_1200it", 5, 900),
    ],
)
def test_the_service_publishes_the_replay_of_its_own_log_at_every_poll(
    tmp_path: Path, name: str, every: int, upto: int
) -> None:
    text = (DATA / "logs" / f"{name}.log").read_text()
    compared = live_against_replay(
        tmp_path, text, polls=every_records(every), command=_launch(text), upto=upto
    )
    assert compared >= 15


def test_a_shutdown_learnt_from_finished_jobs_is_in_the_replay_too(tmp_path: Path) -> None:
    # On a cluster whose finished jobs taught a shutdown (its median and spread), the live ETA
    # adds both; what it publishes lets the replay add the same (the dev Slurm's integration
    # test met this: jobs of earlier tests had ended, and the bands differed by milliseconds).
    text = (DATA / "logs" / "tiny_gpt_e2e_stall_hog_1500it.log").read_text()
    compared = live_against_replay(
        tmp_path,
        text,
        polls=every_records(7),
        command=_launch(text),
        upto=600,
        learnt_shutdowns_s=[3.0, 1.0, 1.0],
    )
    assert compared >= 15


@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_a_recorded_live_session_is_its_replay_at_the_moments_the_service_published(
    tmp_path: Path, name: str
) -> None:
    # The sessions of tests/data/live: a job with evaluations, a slower phase and a noisy
    # host, watched by `planner serve` on the dev Slurm. The service reads the log again at
    # the moments it published an ETA while it was recorded (one in three, to stay fast),
    # with the job's batch script and scenario, and must give what the replay gives there.
    session_dir = DATA / "live" / name
    text = (session_dir / "job.log").read_text()
    published = json.loads((session_dir / "session.json").read_text())["published_etas"]
    scenario = tmp_path / "scenario" / "scenario.yaml"
    scenario.parent.mkdir()
    scenario.write_text((session_dir / "scenario.yaml").read_text())

    def polls(records: list[ProgressRecord]) -> list[tuple[int, float]]:
        index = {r.iteration: k for k, r in enumerate(records)}
        return [
            (index[eta["iteration"]], eta["made_at_s"])
            for eta in published[::3]
            if eta["iteration"] in index
        ]

    compared = live_against_replay(
        tmp_path,
        text,
        polls=polls,
        batch_script=(session_dir / "job.sbatch").read_text(),
        scenario=scenario,
    )
    assert compared >= 15


def _launch(log_text: str) -> str:
    """The launch command of a recorded dev-stack run: the schedule its argument dump states."""
    schedule = schedule_from_arguments(log_text)
    return (
        f"train.py --eval-interval {schedule.eval_interval} --eval-iters {schedule.eval_iters}"
        + (f" --save-interval {schedule.save_interval}" if schedule.save_interval else "")
    )
