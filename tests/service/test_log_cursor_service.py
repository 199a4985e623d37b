"""A job's log read on by a new planner over the same store (a restart) gives the progress one
planner gives: what the log's parser learnt from lines before the stored cursor (here a Hugging
Face Trainer's training summary, its bar's clock and the records held until the bar is adopted)
travels with the cursor the service stores (``TailCursor.parser_state``)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from planner.specs.job import JobStatus
from tests.adapters.logs.test_trainer_bar import refresh, summary

from .conftest import Clock, JobFactory, ScriptedSource
from .test_service import app_for, cycle, job_view

CYCLES = 40
STEPS_PER_CYCLE = 3
STEP_S = 10.0


def _trainer_log_part(cycle_index: int) -> str:
    """What the job printed in the ``cycle_index``-th 30 s: its summary and bar opening first,
    then three bar refreshes of 10 s steps (300 steps in all)."""
    total = CYCLES * STEPS_PER_CYCLE
    head = "\n".join(summary(total)) + "\n\r" + refresh(0, total, 0.0) if cycle_index == 0 else ""
    steps = range(cycle_index * STEPS_PER_CYCLE + 1, (cycle_index + 1) * STEPS_PER_CYCLE + 1)
    return head + "".join("\r" + refresh(n, total, 5.0 + STEP_S * n) for n in steps)


def _samples(
    root: Path, make_job: JobFactory, restarts: frozenset[int]
) -> list[tuple[int, float | None, int]]:
    """The job's stored samples after every cycle read its log, the planner started anew (same
    store, same clock) before the cycles in ``restarts``."""
    root.mkdir()
    db_url = f"sqlite:///{root / 'planner.db'}"
    source, clock = ScriptedSource(), Clock()
    log = root / "job.out"
    source.set_jobs(
        make_job(
            status=JobStatus.RUNNING,
            start_time_s=clock.now,
            time_limit_s=36000.0,
            stdout_path=str(log),
            work_dir=str(root),
        )
    )
    with contextlib.ExitStack() as planner:
        client = planner.enter_context(app_for(db_url, source, clock))
        for k in range(CYCLES):
            if k in restarts:
                planner.close()
                client = planner.enter_context(app_for(db_url, source, clock))
            with log.open("a") as out:
                out.write(_trainer_log_part(k))
            clock.now += STEPS_PER_CYCLE * STEP_S
            assert cycle(client) == {"slurm": "ok"}
        samples = job_view(client)["samples"]
    return [(s["iteration"], s["step_time_s"], s["num_iterations"]) for s in samples]


def test_a_trainer_bar_read_on_after_planner_restarts_gives_the_same_samples(
    tmp_path: Path, make_job: JobFactory
) -> None:
    """Restarts while the bar's records are held (cycle 5: 150 s of bar) and after it was
    adopted (cycles 20 and 30): the samples one planner stores, to the last step."""
    one = _samples(tmp_path / "one", make_job, frozenset())
    restarted = _samples(tmp_path / "restarted", make_job, frozenset({5, 20, 30}))
    assert restarted == one
    assert one[-1][0] == CYCLES * STEPS_PER_CYCLE - 1  # the last refresh is read one late
    assert any(step_time_s is not None for _, step_time_s, _ in one[-10:])
