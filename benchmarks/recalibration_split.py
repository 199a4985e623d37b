"""Compute and network recalibrated apart, on real DDP jobs.

Real runs of ``deploy/dev/tiny_gpt/train.py`` (PyTorch DDP over gloo on the dev machine's CPUs)
under the dev Slurm stack, of different communication shares: the same model on 2 ranks and on
1 rank (no gradient all-reduce), and on 2 ranks at other micro-batch sizes (the all-reduce is
the same, the compute is not). Every rank prints its ``rank_step`` line (compute and step time
per iteration of each logging interval). The planner predicts each job as its scenario says
(2 or 1 ``h100-sxm``: the dev stack's GRES are fake), so the factors are CPU over H100 and
large; what matters is whether they carry over to another job.

For each ordered pair (teacher, new job): the teacher's robust mean step time (the ETA's, as
the service computes it) and its window share (slowest rank's compute over step, complete
intervals) go through ``OnlineCalibration.observe`` and ``observe_split``; the new job's model
prediction through ``apply``. Reported: the new job's error against its own measured robust
mean step, with one factor for the whole step (``calibration.factor`` of the step method) and
with the compute and network factors apart; and, per teacher, how the split reproduces its own
measured window and gap (a self-check on the job's timings, independent of machine load).

    # record the runs (needs the dev Slurm stack, deploy/dev/slurm-up.sh); writes tests/data/logs
    flock /tmp/planner-integration.lock .venv/bin/python -m benchmarks.recalibration_split --run
    .venv/bin/python -m benchmarks.recalibration_split     # analyse the recorded logs (Markdown)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from adapters.logs import LogTailer
from adapters.sampling.files import read_sample_run
from benchmarks.recalibration import robust_mean_step_s
from planner.calibration import CalibratedEfficiency, device_spec, fit_calibration
from planner.calibration.online import (
    CalibrationKey,
    CalibrationLevel,
    Component,
    OnlineCalibration,
)
from planner.calibration.online_split import (
    IntervalTiming,
    intervals_from_records,
    window_share,
)
from planner.perf import predict
from planner.scenario import parse_scenario, predict_documents
from planner.scenario.documents import prediction_json
from planner.specs.job import RankStepRecord, TailCursor

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests/data/logs"
SAMPLES = ROOT / "tests/data/calibration/cpu_epyc_2core_fp32"
KEY = CalibrationKey(scheduler="slurm", cluster="dev", gpu="h100-sxm", framework="megatron")
TRAIN_ITERS = 400


@dataclass(frozen=True, slots=True)
class Run:
    """One recorded job: ``ranks`` DDP ranks at ``micro_batch`` sequences each, one
    micro-batch per iteration (global batch = ranks x micro-batch)."""

    name: str
    ranks: int
    micro_batch: int

    @property
    def log(self) -> Path:
        return LOGS / f"recal_split_{self.name}.log"

    def args(self) -> list[str]:
        return [
            "--num-layers", "2", "--hidden-size", "128", "--num-attention-heads", "4",
            "--seq-length", "128", "--max-position-embeddings", "128", "--vocab-size", "1024",
            "--micro-batch-size", str(self.micro_batch),
            "--global-batch-size", str(self.micro_batch * self.ranks),
            "--train-iters", str(TRAIN_ITERS), "--log-interval", "5",
            "--lr", "1.0e-3", "--min-lr", "1.0e-4", "--lr-warmup-iters", "10",
        ]  # fmt: skip

    def scenario(self) -> dict[str, Any]:
        doc = yaml.safe_load((ROOT / "deploy/dev/tiny_gpt/scenario.yaml").read_text())
        doc["name"] = self.name
        doc["hardware"]["num_gpus"] = self.ranks
        doc["parallelism"].update(
            data_parallel=self.ranks,
            micro_batch_size=self.micro_batch,
            global_batch_size=self.micro_batch * self.ranks,
        )
        doc["training"]["train_iters"] = TRAIN_ITERS
        return dict(doc)


RUNS = (
    Run("dp2_mb4", 2, 4),
    Run("dp1_mb4", 1, 4),
    Run("dp2_mb1", 2, 1),
    Run("dp2_mb16", 2, 16),
)


def _slurm_env() -> dict[str, str]:
    root = Path(os.environ.get("STACK_ROOT", "/tmp/planner-dev-stack"))
    return {**os.environ, "SLURM_CONF": str(root / "slurm/etc/slurm.conf")}


def _controller_up(env: dict[str, str]) -> bool:
    ping = subprocess.run(
        ["scontrol", "ping"], capture_output=True, text=True, env=env, check=False
    )
    return "is UP" in ping.stdout


def stack_up() -> bool:
    """Start the dev Slurm stack unless it runs; True when this call started it."""
    env = _slurm_env()
    if _controller_up(env):
        return False
    stack = {**env, "STACK_ROOT": str(Path(env["SLURM_CONF"]).parents[2])}
    subprocess.run(["bash", str(ROOT / "deploy/dev/slurm-up.sh")], env=stack, check=True)
    return True


def stack_down() -> None:
    """Stop the dev Slurm stack (only when ``stack_up`` started it)."""
    env = _slurm_env()
    stack = {**env, "STACK_ROOT": str(Path(env["SLURM_CONF"]).parents[2])}
    subprocess.run(["bash", str(ROOT / "deploy/dev/slurm-down.sh")], env=stack, check=False)


def record(run: Run) -> None:
    """Run ``run`` under the dev Slurm stack and copy its output to ``run.log``."""
    env = _slurm_env()
    out = Path("/tmp") / f"recal-split-{run.name}-%j.out"
    train = ROOT / "deploy/dev/tiny_gpt/train.py"
    command = " ".join(["srun", sys.executable, str(train), *run.args()])
    submitted = subprocess.run(
        [
            "sbatch", "--parsable", "-J", f"recal-{run.name}", "-N", "1", "-n", str(run.ranks),
            "-c", "1", f"--gres=gpu:h100:{run.ranks}", "-o", str(out),
            f"--wrap=export OMP_NUM_THREADS=1; {command}",
        ],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    job_id = submitted.stdout.strip().split(";")[0]
    while True:
        time.sleep(5)
        queued = subprocess.run(
            ["squeue", "-h", "-j", job_id], capture_output=True, text=True, env=env, check=False
        )
        if not queued.stdout.strip():
            break
    shutil.copyfile(str(out).replace("%j", job_id), run.log)


def rank_intervals(path: Path) -> list[IntervalTiming]:
    """The logging intervals every rank reported, as the job's ``rank_step`` lines give them."""
    records, _ = LogTailer(tz=UTC).read(TailCursor(path=str(path)))
    return intervals_from_records(r for r in records if isinstance(r, RankStepRecord))


@dataclass(frozen=True, slots=True)
class Measured:
    """A recorded run: its model prediction, robust mean step (s), iterations, window share."""

    run: Run
    prediction: dict[str, Any]
    step_s: float
    iterations: int
    share: float


def _cpu_predictions(runs: tuple[Run, ...], *, operators: bool) -> list[dict[str, Any]]:
    """Predictions with this machine's sampled CPU as the device (``device_spec`` of the
    recorded sampling run; ``operators``: its fitted operator models too)."""
    run = read_sample_run(SAMPLES)
    cal = fit_calibration(run.ops, run.collectives, metadata=dict(run.metadata))
    spec = device_spec(cal, key="cpu-local")
    eff = CalibratedEfficiency(cal, device_key="cpu-local", attention_batch_heads=16)
    out = []
    for r in runs:
        sc = parse_scenario(r.scenario())
        hw = dataclasses.replace(sc.hardware, gpu=spec, gpus_per_node=2, nvlink_domain_size=2)
        p = predict(dataclasses.replace(sc, hardware=hw), eff if operators else None)
        out.append(prediction_json(p, r.name))
    return out


VIEWS = (
    ("H100 (the GRES the dev stack hands out, as the service predicts)", "h100"),
    ("this machine's sampled CPU, analytic engine (`device_spec`)", "cpu"),
    ("this machine's sampled CPU, fitted operator models (`CalibratedEfficiency`)", "cpu-ops"),
)
"""Model views: the device and engine each run is predicted with."""


def measure(runs: tuple[Run, ...], view: str) -> list[Measured]:
    if view == "h100":
        predictions = predict_documents([r.scenario() for r in runs])
    else:
        predictions = _cpu_predictions(runs, operators=view == "cpu-ops")
    out = []
    for run, prediction in zip(runs, predictions, strict=True):
        step_s, n = robust_mean_step_s(run.log)
        share = window_share(rank_intervals(run.log))
        assert share is not None, f"{run.log}: no complete rank_step intervals"
        out.append(Measured(run, prediction, step_s, n, share))
    return out


def _taught(teacher: Measured) -> OnlineCalibration:
    """An online calibration that has seen ``teacher`` alone (as the service feeds it)."""
    cal = OnlineCalibration()
    cal.observe(
        KEY,
        teacher.run.name,
        predicted_step_s=teacher.prediction["iteration_time_s"],
        observed_step_s=teacher.step_s,
        num_iterations=teacher.iterations,
        time_s=0.0,
    )
    cal.observe_split(
        KEY,
        teacher.run.name,
        breakdown=teacher.prediction["breakdown_s"],
        observed_step_s=teacher.step_s,
        window_share=teacher.share,
        num_iterations=teacher.iterations,
        time_s=0.0,
    )
    return cal


def _factor(cal: OnlineCalibration, component: Component) -> str:
    c = cal.component_correction(component, KEY)
    return "–" if c.level is CalibrationLevel.NONE else f"{c.factor:.0f}"


def report(measured: list[Measured], view: str) -> tuple[list[float], list[float]]:
    """Print the view's tables; return the |errors| of one and of two factors over all pairs."""
    print(f"### Model: {view}\n")
    print(
        "| run | ranks x micro-batch | model step | model network share | measured step "
        "| window share (measured) | step factor | compute factor | network factor |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for m in measured:
        b = m.prediction["breakdown_s"]
        net = sum(v for k, v in b.items() if k.endswith("_comm_exposed"))
        cal = _taught(m)
        print(
            f"| {m.run.name} | {m.run.ranks} x {m.run.micro_batch} "
            f"| {1e3 * m.prediction['iteration_time_s']:.3g} ms "
            f"| {100 * net / m.prediction['iteration_time_s']:.0f} % | {1e3 * m.step_s:.1f} ms "
            f"| {100 * m.share:.1f} % | {_factor(cal, Component.STEP)} "
            f"| {_factor(cal, Component.COMPUTE)} | {_factor(cal, Component.NETWORK)} |"
        )
    print(
        "\nNew job's error against its own measured mean step, from one teacher job "
        "(one factor: the whole-step ratio; two factors: compute and network apart):\n"
    )
    print("| teacher | new job | error, model | error, one factor | error, two factors |")
    print("| --- | --- | --- | --- | --- |")
    one_errors, two_errors, same_one, same_two = [], [], [], []
    for teacher in measured:
        cal = _taught(teacher)
        for new in measured:
            if new is teacher:
                continue
            out = cal.apply(new.prediction, KEY)
            model = new.prediction["iteration_time_s"]
            one = model * cal.correction(KEY).factor / new.step_s - 1
            two = out["calibrated_iteration_time_s"] / new.step_s - 1
            one_errors.append(abs(one))
            two_errors.append(abs(two))
            if new.run.ranks == teacher.run.ranks:
                same_one.append(abs(one))
                same_two.append(abs(two))
            print(
                f"| {teacher.run.name} | {new.run.name} | {_pct(model / new.step_s - 1)} "
                f"| {_pct(one)} | {_pct(two)} |"
            )
    print(
        f"\nMedian |error| over the {len(one_errors)} pairs: one factor "
        f"{100 * statistics.median(one_errors):.1f} %, two factors "
        f"{100 * statistics.median(two_errors):.1f} %; over the {len(same_one)} pairs of "
        f"2-rank jobs: one factor {100 * statistics.median(same_one):.1f} %, two factors "
        f"{100 * statistics.median(same_two):.1f} %.\n"
    )
    return one_errors, two_errors


def _pct(x: float) -> str:
    return f"{100 * x:+.1f} %"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="store_true", help="record the runs on the dev Slurm")
    args = parser.parse_args(argv)
    if args.run:
        started_stack = stack_up()
        try:
            for run in RUNS:
                started = time.time()
                record(run)
                print(f"recorded {run.log} in {time.time() - started:.0f} s", file=sys.stderr)
        finally:
            if started_stack:
                stack_down()
    print("## 4. Compute and network apart: real DDP jobs on the dev Slurm (issue 13, item 8)\n")
    print(
        f"Measured {datetime.now(UTC):%Y-%m-%d} with `python -m benchmarks.recalibration_split` "
        f"from runs of `deploy/dev/tiny_gpt/train.py` (2 layers, hidden 128, 128 tokens, "
        f"{TRAIN_ITERS} iterations, DDP over gloo on this 2-core machine, every rank printing "
        "its `rank_step` line) recorded under the dev Slurm stack with `--run` (logs in "
        "`tests/data/logs/recal_split_*.log`).\n"
    )
    for label, view in VIEWS:
        report(measure(RUNS, view), label)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
