"""ETA accuracy and band coverage on a recorded real training log.

Replays ``tests/data/logs/tiny_gpt_megatron_900it.log`` (the dev stack's tiny GPT, PyTorch DDP
over gloo on 2 CPU cores, 900 iterations) through the log parser and the ETA estimator, cutting
the log at every 45 iterations from 10 % to 95 % progress as if the planner were reading it live,
and reports, per ``level_log_sd`` (``learnt``: the default, the spread of the job's own pace,
``planner.forecast.level.level_spread``): the p50 completion-time error relative to the time
left, and how often the p10-p90 band holds the real end (the last line's timestamp). The wider
replay over many logs is ``benchmarks/eta_replay.py``.

    .venv/bin/python benchmarks/eta_band_coverage.py > benchmarks/results/eta_band_coverage.md
"""

from __future__ import annotations

from datetime import UTC
from pathlib import Path

from adapters.logs import LogTailer
from planner.forecast.eta import estimate_running
from planner.forecast.observations import observations_from_progress
from planner.specs.job import TailCursor

LOG = Path(__file__).resolve().parents[1] / "tests/data/logs/tiny_gpt_megatron_900it.log"
TRAIN_ITERS = 900


def main() -> None:
    records, _ = LogTailer(tz=UTC).read(TailCursor(path=str(LOG)))
    end_s = records[-1].timestamp_s
    assert end_s is not None
    print("| level_log_sd | band holds the end | mean p50 error | max abs p50 error |")
    print("| --- | --- | --- | --- |")
    for level in (0.0, 0.03, 0.05, 0.06, 0.08, None):
        inside = total = 0
        errors: list[float] = []
        for cut in range(90, TRAIN_ITERS, 45):
            upto = [r for r in records if r.iteration <= cut]
            now_s = upto[-1].timestamp_s
            assert now_s is not None
            est = estimate_running(
                prior_step_time_s=None,
                prior_log_sd=0.3,
                observations=observations_from_progress(upto, read_time_s=now_s),
                iteration=cut,
                train_iters=TRAIN_ITERS,
                last_progress_time_s=now_s,
                now_s=now_s,
                level_log_sd=level,
            )
            band = est.completion_time_s
            assert band is not None
            total += 1
            inside += band.p10 <= end_s <= band.p90
            errors.append((band.p50 - end_s) / (end_s - now_s))
        mean = sum(errors) / len(errors)
        worst = max(abs(e) for e in errors)
        label = "learnt" if level is None else f"{level:.2f}"
        print(f"| {label} | {inside}/{total} | {100 * mean:+.1f} % | {100 * worst:.1f} % |")


if __name__ == "__main__":
    main()
