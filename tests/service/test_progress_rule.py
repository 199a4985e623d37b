"""The service takes step times by the one rule of planner.forecast.observations: a progress
report without a printed time gives no step time (the service used to difference its own read
times, which measure the polling, not the job)."""

from __future__ import annotations

from pathlib import Path

from planner.specs.job import JobStatus

from .conftest import Clock, JobFactory, ScriptedSource
from .test_service import app_for, cycle, job_view


def test_a_rate_across_two_polls_uses_printed_times(
    tmp_path: Path,
    db_url: str,
    source: ScriptedSource,
    clock: Clock,
    make_job: JobFactory,
) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "model: {num_layers: 2, hidden_size: 128, num_attention_heads: 4, seq_length: 128,"
        " vocab_size: 1024}\nhardware: {gpu: h100-sxm, num_gpus: 2}\n"
        "parallelism: {micro_batch_size: 4, global_batch_size: 8}\ntraining: {train_iters: 100}\n"
    )
    start = clock.now
    with app_for(db_url, source, clock) as client:
        for ratio, updated, polled in ((0.2, None, 40.0), (0.3, 50.0, 60.0), (0.5, 90.0, 100.0)):
            clock.now = start + polled
            source.set_jobs(
                make_job(
                    status=JobStatus.RUNNING,
                    comment=f"planner:scenario={scenario}",
                    start_time_s=start,
                    progress_ratio=ratio,
                    progress_updated_s=None if updated is None else start + updated,
                )
            )
            cycle(client)
        samples = job_view(client)["samples"]
        assert [s["iteration"] for s in samples] == [20, 30, 50]
        # 20 -> 30: the first report had no printed time: no rate from read times.
        # 30 -> 50: both printed, 40 s for 20 iterations.
        assert [s["step_time_s"] for s in samples] == [None, None, 2.0]
        assert samples[-1]["num_iterations"] == 20
