"""The live queue forecast places a pending job on nodes, on the real dev Slurm with a real
``planner serve``.

A CPU-only job holds one CPU of node1 and runs past its one-minute time limit (Slurm ends it
there). A job asking for both nodes exclusively, with all 8 GPUs of each, waits for it although
every GPU is free: Slurm gives it the nodes only once the CPU-only job is gone. The planner's
forecast must say so: start at the CPU-only job's predicted end (its time limit: it reports no
progress), not now. Judged against what the jobs did: the forecast start lies between the
holder's limit and its real end, and the waiting job really started after that end.

What the test saw is printed (and appended to $PLANNER_E2E_REPORT when set).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

# the service of the capacity tests: queue forecasts every 5 s, 5 s Slurm command timeout
from tests.integration.test_capacity_on_slurm import service  # noqa: F401
from tests.integration.test_end_to_end import Service, report, wait_until
from tests.slurm_stack import SlurmStack, SubmittedJobs

pytestmark = pytest.mark.integration

#: The CPU-only job's time limit, minutes (it sleeps far longer: Slurm ends it at the limit).
HOLDER_LIMIT_MIN = 1
#: Slurm prints whole seconds; a forecast's time is read after its poll.
SLACK_S = 2.0


def test_whole_node_job_waits_for_the_cpu_job_on_its_node(
    service: Service,  # noqa: F811 - the fixture imported above
    slurm_stack: SlurmStack,
    slurm_jobs: SubmittedJobs,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    wait_until("first ingest cycle", 60, lambda: service.get("/readyz").status_code == 200)
    tmp_path.chmod(0o777)
    slurm_stack.wait_until_idle("before a job takes both whole nodes")
    out = f"--output={tmp_path}/%x-%j.out"
    holder = slurm_jobs.add(
        slurm_stack.sbatch(
            "-J", "cpuholder", "-n1", "-w", "node1", "-t", str(HOLDER_LIMIT_MIN),
            f"--chdir={tmp_path}", out, "--wrap", "sleep 600",
        )
    )  # fmt: skip
    wait_until("the CPU-only job to run", 60, lambda: service.job(holder)["status"] == "running")
    waiting = slurm_jobs.add(
        slurm_stack.sbatch(
            "-J", "wholenodes", "-N2", "--exclusive", "--gres=gpu:h100:8", "-t", "2",
            f"--chdir={tmp_path}", out, "--wrap", "sleep 5",
        )
    )  # fmt: skip
    holder_start = float(service.job(holder)["start_time_s"])
    limit_end = holder_start + 60.0 * HOLDER_LIMIT_MIN

    def forecast() -> dict[str, Any] | None:
        job = service.job(waiting)
        made = job.get("queue_forecast") or {}
        return made if job["status"] == "pending" and made.get("start_s") else None

    first = wait_until("a queue forecast for the waiting job", 60, forecast)
    pending_made: list[dict[str, Any]] = [first]

    def started() -> dict[str, Any] | None:
        job = service.job(waiting)
        made = job.get("queue_forecast") or {}
        if job["status"] == "pending" and made.get("start_s"):
            pending_made.append(made)
        return job if job["status"] in ("running", "completed") and job["start_time_s"] else None

    running = wait_until("the waiting job to start", 240, started, every_s=1.0)
    real_start = float(running["start_time_s"])
    ended = wait_until(
        "the CPU-only job's end time",
        60,
        lambda: service.job(holder).get("end_time_s"),
    )
    holder_end = float(ended)
    made = pending_made  # every forecast seen while the waiting job waited
    figures = {
        "holder_job_id": holder,
        "waiting_job_id": waiting,
        "holder_limit_end_minus_start_s": round(limit_end - holder_start, 1),
        "holder_real_end_minus_limit_end_s": round(holder_end - limit_end, 1),
        "waiting_real_start_minus_holder_end_s": round(real_start - holder_end, 1),
        "forecasts": len(made),
        "fleet": first["fleet"],
        "first_start_p50_minus_made_s": round(first["start_s"]["p50"] - first["made_at_s"], 1),
        "first_start_p50_minus_limit_end_s": round(first["start_s"]["p50"] - limit_end, 1),
        "first_start_p50_minus_real_start_s": round(first["start_s"]["p50"] - real_start, 1),
        "last_start_p50_minus_real_start_s": round(made[-1]["start_s"]["p50"] - real_start, 1),
    }
    with capsys.disabled():
        report({"pending_forecast": figures})
    assert real_start >= holder_end - SLACK_S, figures  # Slurm kept it waiting for the holder
    for m in made:
        band = m["start_s"]
        # not "now": the holder's predicted end (its limit), at most when it really ended
        assert band["p10"] >= limit_end - SLACK_S, (m, figures)
        assert band["p50"] <= max(holder_end, m["made_at_s"]) + SLACK_S, (m, figures)
        assert band["p90"] <= max(holder_end, m["made_at_s"]) + SLACK_S, (m, figures)
