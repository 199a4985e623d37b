"""ETA accuracy on recorded job logs: a deterministic replay through ``planner eta replay``.

Every log of ``LOGS`` (real public training logs and runs of the dev stack, all in
``tests/data/logs`` with their provenance in its README) is replayed with the command's own
function (``planner.eta_cli.run_replay``: the service's rule, history and estimator, at each
logged point only what was known then). MLPerf runs stop at a target accuracy: their logs state
their total once they have ended (``run_stop``, the tokens trained; ``adapters.logs.mlperf``);
the interrupted Megatron-DeepSpeed run is replayed with the iterations it ran. Megatron-LM CI
tables and modded-nanogpt print no time: their clock is the running sum of their iteration
times.

Figures per log, judged against the job's own end (relative to its duration, from its first
logged point): the median absolute p50 error from 10 % and from 50 % progress on, the signed p50
error at 10, 30 and 50 %, and the share of points from 10 % on whose p10-p90 band held the real
remaining time, for the model's band (no finished jobs: what ``planner eta replay`` prints) and
for the band calibrated on the *other* logs (leave-one-out conformal calibration,
``planner.forecast.bands``: what the service publishes once a cluster has finished jobs).
Overall: the median over all points from 10 % (and 50 %) on with each log weighing the same,
and the mean coverage over logs. Targets: median p50 error <= 5 % from 10 % on,
<= 2 % from 50 % on, coverage 75-85 %.

Beside the planner's, the ETA users get today: Kubeflow Trainer's TrainJob progress
(``status.trainerStatus.estimatedRemainingSeconds``, KEP-2779 "Track TrainJob progress", in
``kubeflow/trainer`` ``docs/proposals/2779-trainjob-progress``), which the training loop reports
as the time elapsed over the steps done times the steps left, with no band: here, at each point
the planner gives an ETA at, ``elapsed_s / (iteration - i0) * (total - iteration)`` with ``i0``
and the elapsed time counted from the log's first record, as the planner's elapsed time is. Its
signed error at the same progress points and its median absolute error from 10 % on form a
second table.

On the project's 2-core machine the whole run takes about 1-2 minutes (most of it the 20,344
points of the modded-nanogpt 1.5B log).

    .venv/bin/python -m benchmarks.eta_replay            # prints the markdown section
    .venv/bin/python -m benchmarks.eta_replay --results  # and writes it into RESULTS.md
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from planner.eta_cli import run_replay
from planner.forecast.bands import BandCalibration, BandPoint
from planner.forecast.replay import MARKS
from planner.forecast.values import Quantiles
from planner.wiring.logs import read_job_log

ROOT = Path(__file__).resolve().parents[1]
LOGS_DIR = ROOT / "tests" / "data" / "logs"
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
BEGIN, END = "<!-- eta-replay:begin -->", "<!-- eta-replay:end -->"

LOGS: tuple[tuple[str, int | None, str], ...] = (
    ("mlperf-v3.0-nvidia-gpt3-175b-dgxh100-n64-result_0.log", None, "MLPerf GPT-3 175B, 512 H100"),
    ("mlperf-v3.1-nvidia-gpt3-175b-eos-n1344-result_0.log", None, "MLPerf GPT-3 175B, 10,752 H100"),
    ("modded-nanogpt-medium-7500steps.log", None, "modded-nanogpt medium, 8 H100"),
    ("modded-nanogpt-scaleup1b-20344steps.log", None, "modded-nanogpt 1.5B, 8 H100"),
    ("megatron-deepspeed-gpt3-125m-8gpu-interrupted.log", 2130, "Megatron-DeepSpeed GPT-3 125M"),
    ("deepspeed-chat-rlhf-opt1.3b-350m.log", None, "DeepSpeed-Chat RLHF OPT-1.3B"),
    ("megatron-ci-deepseekv3-proxy-release-h100-golden.json", None, "Megatron-LM CI DeepSeek-V3"),
    ("megatron-ci-nemotron3-super-release-gb200-golden.json", None, "Megatron-LM CI Nemotron-3"),
    ("tiny_gpt_megatron_900it.log", None, "dev stack: tiny GPT, steady"),
    ("tiny_gpt_l4h192_megatron_300it.log", None, "dev stack: tiny GPT 4 layers"),
    ("tiny_gpt_l3h256_megatron_250it.log", None, "dev stack: tiny GPT 3 layers"),
    ("tiny_gpt_eval_slowphase_1500it.log", None, "dev stack: evaluations, slow phase"),
    ("tiny_gpt_ckpt_restart_1200it.log", None, "dev stack: checkpoints, restart"),
    ("tiny_gpt_slowrank_eval_1000it.log", None, "dev stack: evaluations, slowed rank"),
    ("tiny_gpt_e2e_stall_quiet_1500it.log", None, "dev stack: end-to-end test job, quiet"),
    ("tiny_gpt_e2e_stall_hog_1500it.log", None, "dev stack: end-to-end test job, CPU hog"),
)


@dataclass(frozen=True, slots=True)
class LogRun:
    """One replayed log: its summary line, its points (progress, elapsed time, iteration,
    band) and the iteration of its first record."""

    name: str
    what: str
    summary: dict[str, Any]
    progress: np.ndarray
    elapsed: np.ndarray
    bands: list[Quantiles]
    iterations: np.ndarray
    first_iteration: int

    @property
    def duration(self) -> float:
        return float(self.summary["duration_s"])

    def errors(self) -> np.ndarray:
        p50 = np.array([b.p50 for b in self.bands])
        return (self.elapsed + p50 - self.duration) / self.duration

    def trainjob_errors(self) -> np.ndarray:
        """The error of Kubeflow Trainer's TrainJob ETA at each point (module doc); NaN where
        no step was done since the first record (it reports none)."""
        total = float(self.summary["total_iterations"])
        done = (self.iterations - self.first_iteration).astype(float)
        left = np.maximum(total - self.iterations, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            remaining = np.where(done > 0, self.elapsed / done * left, np.nan)
        return (self.elapsed + remaining - self.duration) / self.duration

    def band_points(self) -> list[BandPoint]:
        return [
            BandPoint(progress=float(p), raw=b, actual_s=self.duration - float(e))
            for p, e, b in zip(self.progress, self.elapsed, self.bands, strict=True)
        ]


def replay_all() -> list[LogRun]:
    """Replay every log of ``LOGS`` through ``planner eta replay``'s function."""
    runs = []
    for name, total, what in LOGS:
        path = LOGS_DIR / name
        if not path.exists():
            raise SystemExit(f"{path} is missing (see tests/data/logs/README.md)")
        lines, summary = run_replay(str(path), total_iterations=total)
        records = read_job_log(path.read_text(encoding="utf-8", errors="replace"))[0]
        runs.append(
            LogRun(
                name=name,
                what=what,
                summary=summary,
                progress=np.array([line["progress"] for line in lines]),
                elapsed=np.array([line["elapsed_s"] for line in lines]),
                bands=[Quantiles(**line["eta_s"]) for line in lines],
                iterations=np.array([line["iteration"] for line in lines]),
                first_iteration=records[0].iteration,
            )
        )
    return runs


def at_marks(run: LogRun, errors: np.ndarray) -> list[float | None]:
    """The error of the first point at or past each progress mark (``MARKS``) that has one."""
    out: list[float | None] = []
    for mark in MARKS:
        index = np.flatnonzero((run.progress >= mark) & np.isfinite(errors))
        out.append(float(errors[index[0]]) if index.size else None)
    return out


def median_abs_from(run: LogRun, errors: np.ndarray, start: float = 0.1) -> float | None:
    chosen = (run.progress >= start) & np.isfinite(errors)
    return float(np.median(np.abs(errors[chosen]))) if chosen.any() else None


def coverage(run: LogRun, bands: list[Quantiles]) -> float:
    """Share of points from 10 % on whose band held the real remaining time."""
    remaining = run.duration - run.elapsed
    held = np.array([b.p10 <= r <= b.p90 for b, r in zip(bands, remaining, strict=True)])
    late = run.progress >= 0.1
    return float(np.mean(held[late]))


def calibrated(run: LogRun, others: list[LogRun]) -> list[Quantiles]:
    """The run's bands calibrated on the other logs (leave-one-out)."""
    calibration = BandCalibration()
    for other in others:
        calibration.add_job(other.name, 0.0, other.band_points())
    table = calibration.table()
    return [table.adjust(float(p), b) for p, b in zip(run.progress, run.bands, strict=True)]


def _pct(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{100 * value:.{digits}f}"


def _weighted_median(values: list[np.ndarray]) -> float:
    """Median of the pooled values, each array weighing the same in total."""
    pooled = np.concatenate(values)
    weights = np.concatenate([np.full(len(v), 1.0 / len(v)) for v in values])
    order = np.argsort(pooled)
    cum = np.cumsum(weights[order])
    return float(pooled[order][np.searchsorted(cum, 0.5 * cum[-1])])


def report(runs: list[LogRun], seconds: float) -> str:
    """The markdown section."""
    rows = []
    late10, late50, raw_cov, cal_cov = [], [], [], []
    for run in runs:
        errors = run.errors()
        at = run.summary["p50_error_ratio_at"]
        med = run.summary["median_abs_p50_error_ratio"]
        loo = calibrated(run, [r for r in runs if r is not run])
        raw_c, cal_c = coverage(run, run.bands), coverage(run, loo)
        late10.append(np.abs(errors[run.progress >= 0.1]))
        late50.append(np.abs(errors[run.progress >= 0.5]))
        raw_cov.append(raw_c)
        cal_cov.append(cal_c)
        rows.append(
            f"| `{run.name}` ({run.what}) | {run.summary['framework']} | {len(errors)} | "
            f"{run.duration:,.0f} | {_pct(med['from_10pct'])} | {_pct(med['from_50pct'])} | "
            f"{_pct(at['10pct'], 1)} | {_pct(at['30pct'], 1)} | {_pct(at['50pct'], 1)} | "
            f"{_pct(raw_c, 0)} | {_pct(cal_c, 0)} |"
        )
    overall10, overall50 = _weighted_median(late10), _weighted_median(late50)
    mean_raw, mean_cal = float(np.mean(raw_cov)), float(np.mean(cal_cov))
    meets = overall10 <= 0.05 and overall50 <= 0.02 and 0.75 <= mean_cal <= 0.85
    today, today_rows, better = [], [], 0
    for run in runs:
        planner, naive = run.errors(), run.trainjob_errors()
        late = (run.progress >= 0.1) & np.isfinite(naive)
        today.append(np.abs(naive[late]))
        mine, theirs = median_abs_from(run, planner), median_abs_from(run, naive)
        better += int(mine is not None and theirs is not None and mine < theirs)
        marks = [_pct(v, 1) for v in at_marks(run, planner) + at_marks(run, naive)]
        today_rows.append(
            f"| `{run.name}` | {_pct(median_abs_from(run, planner))} | "
            f"{_pct(median_abs_from(run, naive))} | " + " | ".join(marks) + " |"
        )
    overall_today = _weighted_median(today)
    heads = " | ".join(f"{round(100 * m)} %" for m in MARKS)
    lines = [
        BEGIN,
        "",
        "## ETA replay (issue 14)",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} with `.venv/bin/python -m benchmarks.eta_replay "
        f"--results` ({seconds:.0f} s): every log replayed by `planner eta replay` as if live "
        "(the service's rule, history and estimator; at each logged point only what was known "
        "then). Errors are `(elapsed + p50 remaining - duration) / duration` against the job's "
        "own end, in % of its duration; coverage is the share of points from 10 % progress on "
        "whose p10-p90 band held the real remaining time, with the model's band (what "
        "`planner eta replay` prints: no finished jobs) and calibrated on the other logs "
        "(leave-one-out conformal calibration by progress bucket: what the service publishes "
        "once its cluster has finished jobs). Logs and provenance: `tests/data/logs/README.md`.",
        "",
        "| log | format | points | duration s | median abs p50 error from 10 % | from 50 % | "
        "p50 error at 10 % | at 30 % | at 50 % | coverage, model band % | calibrated % |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows,
        f"| **overall** (each log weighing the same) | | {sum(len(r.bands) for r in runs)} | | "
        f"**{_pct(overall10)}** | **{_pct(overall50)}** | | | | {_pct(mean_raw, 0)} | "
        f"**{_pct(mean_cal, 0)}** |",
        "",
        f"Targets: median p50 error <= 5 % from 10 % on and <= 2 % from 50 % on, p10-p90 coverage "
        f"75-85 %: {'met' if meets else 'not met'} overall.",
        "",
        "### The ETA users get today: Kubeflow Trainer's TrainJob progress",
        "",
        "The same logs and points, with the ETA a Kubeflow TrainJob reports "
        "(`status.trainerStatus.estimatedRemainingSeconds`, KEP-2779): the time elapsed since "
        "the first logged point over the steps done since it, times the steps left, no band. "
        "Errors as above, in % of the job's duration (negative: predicts the end too early); "
        "the signed errors are those of the first point at or past each progress mark.",
        "",
        f"| log | median abs error from 10 %, planner p50 | TrainJob | planner at {heads} | "
        f"TrainJob at {heads} |",
        "| --- | ---: | ---: | " + " | ".join(["---:"] * (2 * len(MARKS))) + " |",
        *today_rows,
        f"| **overall** (each log weighing the same) | **{_pct(overall10)}** | "
        f"**{_pct(overall_today)}** | " + " | ".join([""] * (2 * len(MARKS))) + " |",
        "",
        f"The planner's median absolute p50 error from 10 % on is lower than the TrainJob's on "
        f"{better} of {len(runs)} logs ({_pct(overall10)} % against {_pct(overall_today)} % "
        "overall); the TrainJob gives no band to hold the real end.",
        "",
        END,
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", action="store_true", help="write the section to RESULTS.md")
    args = parser.parse_args()
    started = time.perf_counter()
    runs = replay_all()
    section = report(runs, time.perf_counter() - started)
    print(section)
    if args.results:
        text = RESULTS.read_text()
        if BEGIN in text:
            head, rest = text.split(BEGIN, 1)
            text = head + section + rest.split(END, 1)[1]
        else:
            text = text.rstrip("\n") + "\n\n" + section + "\n"
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
