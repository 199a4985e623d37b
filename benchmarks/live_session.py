"""The live ETA on a job with pauses, a slower phase and a noisy host: a session of ``planner
serve`` watching a real DDP job on the dev Slurm, recorded once into ``tests/data/live/``, then
replayed here (deterministic) and judged against the job's own timings.

**The job** (``deploy/dev/tiny_gpt/train.py``, 2 ranks over gloo on CPU under ``srun``, the shape
of ``deploy/dev/tiny_gpt/job.sbatch``, Megatron-LM arguments written out in its batch script):
900 iterations logged every 5, an evaluation of 200 forward passes after every multiple of 90
(Megatron-LM's rule, the last iteration included: ``megatron/training/training.py`` evaluates
``if args.eval_interval and iteration % args.eval_interval == 0``), every rank's compute x1.35
from iteration 361 to the end (a slower phase), and a noisy host: beside it a schedule of 0-2
busy processes switching every 4-20 s (``HOGS``), on top of whatever else the shared machine
runs (the ``noisy_eval_*`` sessions shared it with other test suites; the ``scheduled_noise_*``
ones ran alone, at hidden size 384: ``HIDDEN_SIZE``). Every rank prints its ``rank_step`` line
(millisecond wall-clock stamps): the ground truth of the evaluations' lengths and of the pace.

**Recording** (``--record DIR``, as root, the dev Slurm free): starts the dev Slurm (when it is
not running), a fresh ``planner serve`` (SQLite, ingest every 2 s), submits the job with the
scenario of ``deploy/dev/tiny_gpt/scenario.yaml``, runs the noise schedule, polls
``/v1/jobs/{id}`` every second and writes ``DIR/job.log`` (the job's output), ``DIR/job.sbatch``,
``DIR/scenario.yaml`` and ``DIR/session.json`` (the job's start and end from Slurm, the noise
schedule as run, and every ETA the service published: when it was made and at what iteration).

**Judging** (default): the session's log is replayed (``planner.forecast.replay``: the path the
service takes, ``tests/service/test_live_equals_replay.py``) as the fresh service saw it, and
with a calibrated prior (the pace of the job's first tenth, log-sd 0.05: what a cluster's online
calibration gives after earlier runs of the same job on a quieter host), and reports the
median absolute p50 error from 10 % progress (in % of the job's duration, against Slurm's end),
the p10-p90 coverage from 10 % on, the reported phase start against the true one (iteration
361) and every evaluation's counted length against its real length (from the ``rank_step``
stamps around it, less the steady pace). ``--results`` writes the section into
``benchmarks/RESULTS.md``; ``--trace`` prints each session's p50 error over progress split into
the part of its pace and the part of its pauses (:func:`error_parts`).

    flock /tmp/planner-integration.lock .venv/bin/python -m benchmarks.live_session --record \
        tests/data/live/noisy_eval_slowphase_900it
    .venv/bin/python -m benchmarks.live_session [--results | --trace]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Final

import httpx
import numpy as np

from adapters.logs import read_job_log
from planner.demo_cli import sbatch_tiny_gpt
from planner.forecast.arguments import schedule_from_arguments
from planner.forecast.replay import Replay, replay, summarize
from planner.specs.job import ProgressRecord

REPO: Final = Path(__file__).resolve().parents[1]
LIVE: Final = REPO / "tests" / "data" / "live"
TRAIN_ITERS: Final = 900
EVAL_INTERVAL: Final = 90
EVAL_ITERS: Final = 200
PHASE_FACTOR: Final = 1.35
SESSIONS: Final = {
    # recorded while other test suites shared the machine (its README): the host's own load
    # swung the pace beside the noise schedule.
    # a slower phase from 10 % to 25 % of the run, over before 30 % (as the end-to-end test's)
    "noisy_eval_tempphase_900it": (91, 225),
    # a slower phase from 40 % of the run to its end: nothing before 40 % can foresee it
    "noisy_eval_slowphase_900it": (361, TRAIN_ITERS),
    # the same two jobs recorded with nothing else running on the machine: the noise is the
    # seeded schedule alone (``HOGS``), so the host's swings are known and repeatable
    "scheduled_noise_tempphase_900it": (91, 225),
    "scheduled_noise_slowphase_900it": (361, TRAIN_ITERS),
}
"""The recorded sessions, by directory name: the slower phase (first and last iteration)."""
CALIBRATED_BY: Final = {
    "noisy_eval_tempphase_900it": "noisy_eval_slowphase_900it",
    "noisy_eval_slowphase_900it": "noisy_eval_tempphase_900it",
    "scheduled_noise_tempphase_900it": "scheduled_noise_slowphase_900it",
    "scheduled_noise_slowphase_900it": "scheduled_noise_tempphase_900it",
}
"""The session whose steady pace is the calibrated planner's prior: the other job recorded on
the same host in the same conditions (what a cluster's online calibration learns there)."""
HIDDEN_SIZE: Final = {
    "scheduled_noise_tempphase_900it": 384,
    "scheduled_noise_slowphase_900it": 384,
}
"""The job's hidden size where it is not the batch script's 128: on a quiet machine hidden 128
steps in about 30 ms, so 900 iterations take a minute and the noise schedule's stretches of
4-20 s span most of the run; hidden 384 (ffn 1,536) steps in about 0.15 s (the README of
``tests/data/live``), about the pace the first sessions had between their host's swings."""


def job_args(phase: tuple[int, int]) -> str:
    """The job's arguments beyond the shape of ``job.sbatch``, with the slower phase ``phase``
    (first and last iteration)."""
    return (
        f"--eval-interval {EVAL_INTERVAL} --eval-iters {EVAL_ITERS} "
        f"--slow-phase-from-iteration {phase[0]} --slow-phase-to-iteration {phase[1]} "
        f"--slow-phase-factor {PHASE_FACTOR} --slow-phase-mode compute"
    )


HOGS: Final = (0, 1, 2)
"""Busy processes beside the job in each stretch of the noise schedule."""
HOG_SECONDS: Final = (4.0, 20.0)
NOISE_SEED: Final = 28
PUBLISHED_FIELDS: Final = (
    "made_at_s",
    "iteration",
    "progress_ratio",
    "method",
    "completion_time_s",
    "step_time_s",
    "observed_step_time_s",
    "pauses_s",
    "phase_start_iteration",
)
"""What the session keeps of each ETA the service published."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Noise:
    """The noisy host: stretches of ``HOGS`` busy processes, each ``HOG_SECONDS`` long, drawn
    from a seeded generator, run until :meth:`stop`; ``schedule`` is what ran (start epoch s,
    busy processes)."""

    def __init__(self, seed: int = NOISE_SEED) -> None:
        self.rng = random.Random(seed)
        self.schedule: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            count = self.rng.choice(HOGS)
            seconds = self.rng.uniform(*HOG_SECONDS)
            self.schedule.append((time.time(), count))
            hogs = [
                subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)
            ]
            self._stop.wait(seconds)
            for hog in hogs:
                hog.send_signal(signal.SIGKILL)
                hog.wait()
        self.schedule.append((time.time(), 0))


def _slurm_env() -> dict[str, str]:
    root = Path(os.environ.get("STACK_ROOT", "/tmp/planner-dev-stack"))
    return {**os.environ, "SLURM_CONF": str(root / "slurm" / "etc" / "slurm.conf")}


def _sacct(job_id: str, env: dict[str, str]) -> tuple[float | None, float | None]:
    """The job's start and end (epoch s) as Slurm's accounting has them."""
    out = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "Start,End"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    ).stdout.strip()

    def epoch(text: str) -> float | None:
        try:
            return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
        except ValueError:
            return None

    parts = out.splitlines()[0].split("|") if out else []
    return (epoch(parts[0]), epoch(parts[1])) if len(parts) == 2 else (None, None)


def record(out: Path) -> None:
    """Record a session into ``out`` (module docstring; its name picks the phase of
    ``SESSIONS``)."""
    args = job_args(SESSIONS[out.name])
    env = _slurm_env()
    started = subprocess.run(["pgrep", "-x", "slurmctld"], capture_output=True, check=False)
    subprocess.run(["bash", str(REPO / "deploy/dev/slurm-up.sh")], check=True, env=env)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"live-session-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o777)
    port = _free_port()
    serve_log = (work / "serve.log").open("ab")
    service = subprocess.Popen(
        [sys.executable, "-m", "planner", "serve", "--port", str(port)],
        env={
            **env,
            "PLANNER_DATABASE_URL": f"sqlite:///{work / 'planner.db'}",
            "PLANNER_INGEST_INTERVAL_S": "2",
            "PLANNER_SLURM__ENABLED": "on",
            "PLANNER_SLURM__ALLOWED_FILE_ROOTS": json.dumps([str(work)]),
            "PYTHONUNBUFFERED": "1",
        },
        stdout=serve_log,
        stderr=subprocess.STDOUT,
        cwd=REPO,
    )
    url = f"http://127.0.0.1:{port}"
    noise = Noise()
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/readyz", timeout=5).is_success:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        scenario = work / "scenario.yaml"
        hidden = HIDDEN_SIZE.get(out.name, 128)
        text = (REPO / "deploy/dev/tiny_gpt/scenario.yaml").read_text()
        if "hidden_size: 128\n" not in text or "ffn_hidden_size: 512\n" not in text:
            raise SystemExit("deploy/dev/tiny_gpt/scenario.yaml no longer states hidden 128")
        scenario.write_text(
            text.replace("hidden_size: 128\n", f"hidden_size: {hidden}\n").replace(
                "ffn_hidden_size: 512\n", f"ffn_hidden_size: {4 * hidden}\n"
            )
        )
        submitted = sbatch_tiny_gpt(
            REPO,
            env,
            script=work / "job.sbatch",
            scenario=scenario,
            args=args,
            train_iters=TRAIN_ITERS,
            output=f"{work}/job-%j.out",
            hidden_size=hidden,
        )
        if submitted.returncode != 0:
            raise SystemExit(f"sbatch failed: {submitted.stderr.strip()}")
        job_id = submitted.stdout.strip().split(";")[0]
        print(f"job {job_id} submitted; polling {url}/v1/jobs/{job_id}", flush=True)
        noise.start()
        published: dict[float, dict[str, Any]] = {}
        job: dict[str, Any] = {}
        deadline = time.monotonic() + 1500
        while time.monotonic() < deadline:
            response = httpx.get(f"{url}/v1/jobs/{job_id}", timeout=10)
            if response.status_code == 200:
                job = response.json()
                eta = job.get("eta")
                if eta and eta.get("made_at_s") is not None and job["status"] == "running":
                    kept = {k: eta.get(k) for k in PUBLISHED_FIELDS}
                    published.setdefault(eta["made_at_s"], {**kept, "polled_at_s": time.time()})
                if not job["active"] and job.get("end_time_s"):
                    break
            time.sleep(1.0)
        noise.stop()
        start_s, end_s = _sacct(job_id, env)
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(work / f"job-{job_id}.out", out / "job.log")
        shutil.copy(work / "job.sbatch", out / "job.sbatch")
        shutil.copy(scenario, out / "scenario.yaml")
        session = {
            "job_id": job_id,
            "recorded_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "host": {"cpus": os.cpu_count(), "load_average": os.getloadavg()},
            "job_args": args,
            "train_iters": TRAIN_ITERS,
            "start_time_s": start_s if start_s is not None else job.get("start_time_s"),
            "end_time_s": end_s if end_s is not None else job.get("end_time_s"),
            "service_start_time_s": job.get("start_time_s"),
            "service_end_time_s": job.get("end_time_s"),
            "prediction": job.get("prediction"),
            "noise_schedule": noise.schedule,
            "published_etas": [published[k] for k in sorted(published)],
        }
        (out / "session.json").write_text(json.dumps(session, indent=1) + "\n")
        print(f"recorded {len(published)} ETAs of job {job_id} into {out}", flush=True)
    finally:
        noise.stop()
        if service.poll() is None:
            service.terminate()
            service.wait(timeout=30)
        if started.returncode != 0:  # it was not running: stop what this run started
            subprocess.run(["bash", str(REPO / "deploy/dev/slurm-down.sh")], env=env, check=False)


# ---------------------------------------------------------------------------- judging

RESULTS: Final = REPO / "benchmarks" / "RESULTS.md"
BEGIN, END = "<!-- live-session:begin -->", "<!-- live-session:end -->"
CALIBRATED_LOG_SD: Final = 0.05


def rank0_stamps(log_text: str) -> dict[int, float]:
    """Rank 0's ``rank_step`` wall-clock stamps (epoch s, to the millisecond) by iteration."""
    out: dict[int, float] = {}
    for line in log_text.splitlines():
        if '"event": "rank_step"' not in line:
            continue
        doc = json.loads(line[line.index("{") :])
        if doc["rank"] == 0:
            out[int(doc["iteration"])] = float(doc["time_s"])
    return out


def true_evaluations(log_text: str, interval: int, total: int) -> dict[int, float]:
    """Each evaluation's real length (s), by the iteration it follows: the wall time of the
    logging interval that holds it (rank 0's stamps) less that interval's steady time (the
    median pace of the two intervals before and the two after it). The last one (after the
    last iteration, before the job's end) is not in any interval and is left out."""
    stamps = rank0_stamps(log_text)
    its = sorted(stamps)
    out: dict[int, float] = {}
    for k in range(interval, total, interval):
        if k not in stamps:
            continue
        j = its.index(k)
        if j + 3 >= len(its) or j < 2:
            continue
        nxt = its[j + 1]
        paces = [
            (stamps[its[i + 1]] - stamps[its[i]]) / (its[i + 1] - its[i])
            for i in (j - 2, j - 1, j + 1, j + 2)
        ]
        out[k] = stamps[nxt] - stamps[k] - (nxt - k) * float(np.median(paces))
    return out


def counted_evaluations(run: Replay, interval: int, total: int) -> dict[int, float]:
    """The pause time the replay's history counted after each multiple of ``interval``."""
    pauses = [] if run.history is None else run.history.pauses
    out: dict[int, float] = {}
    for k in range(interval, total, interval):
        out[k] = sum(p.duration_s for p in pauses if p.after_iteration <= k < p.iteration)
    return out


def steady_pace_s(session_dir: Path) -> float:
    """A recorded session's steady wall-clock pace outside its slower phase, s per iteration
    (rank 0's stamps, the intervals holding an evaluation left out): what a cluster's online
    calibration learns from that run of the job."""
    phase = SESSIONS[session_dir.name]
    stamps = rank0_stamps((session_dir / "job.log").read_text())
    its = sorted(stamps)
    seconds = iterations = 0.0
    for a, b in itertools.pairwise(its):
        if a % EVAL_INTERVAL == 0 or (phase[0] <= b and a <= phase[1]):
            continue
        seconds += stamps[b] - stamps[a]
        iterations += b - a
    return seconds / iterations


def error_parts(run: Replay, log_text: str, end_s: float) -> list[dict[str, float]]:
    """Each point's p50 error from 10 % progress on, split into its pace and its pauses, in
    fractions of the job's duration (``run.duration_s``): ``pace`` is (the projected step time
    less the real steady pace of the rest of the run) times the iterations left, ``pauses``
    is (the pauses and shutdown projected less the real rest of the time beyond that steady
    pace). The real pace is rank 0's stamps from the point to the last iteration, the
    intervals holding an evaluation left out; ``end_s`` is the job's end (epoch s). The
    parts add up to the error but for the band's log-normal match (its median of a sum)."""
    stamps = rank0_stamps(log_text)
    its = sorted(stamps)
    steps = [(a, b, stamps[b] - stamps[a]) for a, b in itertools.pairwise(its)]
    duration = run.duration_s or 0.0
    out: list[dict[str, float]] = []
    for point in run.points:
        estimate, it = point.estimate, point.iteration
        if point.progress < 0.1 or estimate is None or it not in stamps or it >= its[-1]:
            continue
        steady = [(b - a, s) for a, b, s in steps if a >= it and a % EVAL_INTERVAL]
        left = its[-1] - it
        pace_s = sum(s for _, s in steady) / sum(n for n, _ in steady)
        rest_s = end_s - stamps[it] - pace_s * left
        ahead_s = (estimate.pauses_s or 0.0) + (estimate.shutdown_s or 0.0)
        out.append(
            {
                "progress": point.progress,
                "error": (point.elapsed_s + point.eta_s.p50 - duration) / duration,
                "pace": (estimate.step_time_s.p50 - pace_s) * left / duration,
                "pauses": (ahead_s - rest_s) / duration,
            }
        )
    return out


def judge(session_dir: Path) -> dict[str, Any]:
    """The figures of a recorded session (module docstring)."""
    log_text = (session_dir / "job.log").read_text()
    session = json.loads((session_dir / "session.json").read_text())
    launch = (session_dir / "job.sbatch").read_text()
    schedule = schedule_from_arguments(launch)
    records, stated, _, last_s = read_job_log(log_text)
    total = stated or TRAIN_ITERS
    prediction = session.get("prediction") or {}
    model_s = prediction.get("iteration_time_s")
    other = LIVE / CALIBRATED_BY[session_dir.name]
    variants: dict[str, tuple[float | None, float]] = {
        "fresh planner (the model's H100 prior)": (model_s, 0.3),
        "calibrated by the other session (prior: its steady pace, log-sd 0.05)": (
            steady_pace_s(other),
            CALIBRATED_LOG_SD,
        ),
    }
    figures: dict[str, Any] = {"session": session_dir.name, "variants": {}}
    truth = true_evaluations(log_text, EVAL_INTERVAL, total)
    for name, (prior, sd) in variants.items():
        run = replay(
            records,
            total_iterations=total,
            end_time_s=last_s,
            prior_step_time_s=prior,
            prior_log_sd=sd,
            schedule=schedule,
        )
        summary = summarize(run)
        counted = counted_evaluations(run, EVAL_INTERVAL, total)
        phases = [] if run.history is None else list(run.history.phases)
        parts = error_parts(run, log_text, last_s) if last_s is not None else []
        figures["variants"][name] = {
            "summary": summary,
            "parts": parts,
            "evaluations": {
                k: {"real_s": truth[k], "counted_s": counted.get(k, 0.0)} for k in sorted(truth)
            },
            "phases": [{**dataclasses.asdict(p), "description": p.description} for p in phases],
        }
    figures["published"] = _published(session, records, last_s)
    figures["records"] = len(records)
    figures["duration_s"] = None if last_s is None else last_s - _first_time(records)
    figures["load_average"] = session.get("host", {}).get("load_average")
    figures["noise_schedule"] = session.get("noise_schedule")
    return figures


def _first_time(records: list[ProgressRecord]) -> float:
    stamp = records[0].timestamp_s
    assert stamp is not None
    return stamp


def _published(
    session: dict[str, Any], records: list[ProgressRecord], last_s: float | None
) -> dict[str, Any]:
    """The errors of the ETAs the live service published while recording (the code of that
    day), judged as the replay is: against the log's end, from the first logged point."""
    if last_s is None:
        return {}
    t0 = _first_time(records)
    duration = last_s - t0
    errors, inside = [], []
    for eta in session.get("published_etas") or []:
        ratio = eta.get("progress_ratio") or 0.0
        if ratio < 0.1 or eta.get("method") == "done":
            continue
        band = eta["completion_time_s"]
        errors.append(abs(band["p50"] - last_s) / duration)
        inside.append(band["p10"] <= last_s <= band["p90"])
    if not errors:
        return {}
    return {
        "etas": len(errors),
        "median_abs_p50_error_ratio_from_10pct": float(np.median(errors)),
        "p10_p90_coverage_ratio": float(np.mean(inside)),
    }


def section(sessions: list[dict[str, Any]]) -> str:
    """The markdown section of RESULTS.md for the judged ``sessions``."""
    lines = [
        BEGIN,
        "",
        "## Live ETA on a noisy host: recorded sessions",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} with `.venv/bin/python -m benchmarks.live_session "
        "--results`: each session of `tests/data/live` (a real DDP job on the dev Slurm: "
        "evaluations every 10 %, a slower phase x1.35, a noisy host; README there) replayed "
        "through the service's path (`tests/service/test_live_equals_replay.py` asserts the "
        "service and the replay agree at every poll), as a fresh planner (the scenario's H100 "
        "prior, which the CPU pace conflicts with) and as a planner calibrated by the other "
        "session recorded in the same conditions (its steady pace as the prior, log-sd 0.05). "
        "Errors in % of the job's "
        "duration against the end its log printed; coverage from 10 % on; phases: the phase "
        "events noted (start iteration, pace ratio, iteration first seen); evaluations: each "
        "one's counted length against its real length (rank 0's millisecond stamps around it, "
        "less the steady pace), the largest relative difference. *live*: what the service "
        "published while the session was recorded (the code of that day).",
        "",
        "| session | planner | median abs p50 error from 10 % | its pace alone | its pauses "
        "alone | p10-p90 coverage % | p50 error at 10 % | 30 % | 50 % | phase events (start, "
        "ratio, seen at) | evaluations: largest difference % |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for figures in sessions:
        truth = SESSIONS[figures["session"]]
        for name, v in figures["variants"].items():
            s = v["summary"]
            at = s["p50_error_ratio_at"]
            phases = "; ".join(
                f"{p['start_iteration']}, x{p['ratio']:.2f}, {p['seen_iteration']}"
                for p in v["phases"]
            )
            worst = max(
                abs(e["counted_s"] - e["real_s"]) / e["real_s"] for e in v["evaluations"].values()
            )
            pace_alone, pauses_alone = _alone(v["parts"])
            lines.append(
                f"| `{figures['session']}` (phase {truth[0]}-{truth[1]}) | {name} | "
                f"{100 * s['median_abs_p50_error_ratio']['from_10pct']:.1f} | "
                f"{100 * pace_alone:.1f} | {100 * pauses_alone:.1f} | "
                f"{100 * s['p10_p90_coverage_ratio']:.0f} | {100 * at['10pct']:+.1f} | "
                f"{100 * at['30pct']:+.1f} | {100 * at['50pct']:+.1f} | {phases or 'none'} | "
                f"{100 * worst:.0f} |"
            )
        live = figures["published"]
        if live:
            lines.append(
                f"| `{figures['session']}` | *live* ({live['etas']} ETAs) | "
                f"{100 * live['median_abs_p50_error_ratio_from_10pct']:.1f} | | | "
                f"{100 * live['p10_p90_coverage_ratio']:.0f} | | | | | |"
            )
    lines += [
        "",
        "The sessions recorded with the noise schedule alone (`scheduled_noise_*`, 2026-12-05, "
        "the README of `tests/data/live`: the same two jobs at hidden size 384 on the machine "
        "with no other suite running, 0.15 s per iteration quiet and x1.85 while the schedule "
        "runs a busy process) meet the targets but one: p50 error from 10 % on 3.8 % and 3.2 % "
        "with the fresh planner, 4.4 % and 2.5 % calibrated (`tests/forecast/"
        "test_live_sessions.py` asserts <= 5 %), coverage 82 % and 89 %, every evaluation "
        "within 5 % and 17 % of its length, and the late session's slower phase (from 361) "
        "reported from 345 (x1.88, seen at 395: the schedule's busy process from iteration 340 "
        "and the phase read as one change, 16 iterations, 4 % of its start, early). The early "
        "session's phase (91-225, x1.2 on the wall clock) is no event of its own: the schedule "
        "ran two busy processes from iteration 75 to 95 and from 125 to 160 (x1.85 each), and "
        "the events from 75 (x1.58), 95 (x0.80), 125 (x1.70) and 185 (x0.51) are those swings "
        "with the phase inside them. The live service published 3.4 % and 2.3 % (coverage 86 % "
        "and 93 %). Where the p50 still errs (`--trace`): in the early session from 24 % to "
        "35 % of the run (-20 to -29 %), the newest pace is the quiet stretch after the phase "
        "(no busy process from iteration 180 to 315) projected over a rest that ran under one "
        "half of the time (pace -11 to -19 %), and the evaluations ahead are projected at the "
        "length of the two seen, one of them quiet (pauses -8 to -11 %); in the late session "
        "before its phase, the phase ahead (-14 to -31 % at 10-16 % and 24-38 %).",
        "",
        "Against the targets (p50 error <= 5 % from 10 % on, coverage 70-90 %, the phase within "
        "10 % of its start, every evaluation within 20 % of its length), the first two "
        "sessions, recorded while other test suites loaded the machine: the coverage is within "
        "70-90 % in both sessions (73 % and 81 % with the fresh planner; 67 % and 72 % before a "
        "pace that just changed widened the band's side toward the pace before it by the chance "
        'that the phase ends: `planner.forecast.eta`, "A pace that just changed"), every '
        "evaluation is counted within 20 %, and the slower phase of the session that keeps it "
        "to the end is reported within 10 % of its start (and first seen 39 iterations after "
        "it); the p50 error misses (6.8 % and 6.3 %: the p50 projects the newest pace). On this "
        "machine the pace swung with the load of the other test suites by up to 4x (0.05-0.32 s "
        "per iteration, the README of `tests/data/live`), and the slower phases could not be "
        "foreseen before they began: in the late-phase session every point from 10 % to 40 % "
        "is early by the phase still ahead (-10 to -22 %). In the other session the host's "
        "load rose at iteration 60, before the job's own slower phase (the noise schedule went "
        "from 0 to 2 busy processes there; rank 0's stamps: 137 ms per iteration over 30-60, "
        "180 ms over 60-90, 215-236 ms in the phase), so the change "
        "reported from 50-60 is the pace's real change (judged under a long-run noise measured "
        "on batches that had seen no swing yet), the job's own x1.35 from 91 is then a 20-30 % "
        "change on a pace that swung twofold, and the phase is reported from 135 (x1.62 when "
        "first seen at 155, 4.2 sd of the long-run noise: where the host's load rose again "
        "inside the phase, 44 iterations after its start, so not within 10 % of it), its end "
        "(iteration 225) from 185-190 (seen at 230) and from 225 (x0.73, seen at 245), and the "
        "host's own later change (its load fell away at 465-500) an event from 465 (x0.60) "
        "seen only at 795. "
        "The *live* row of that "
        "session differs from the fresh replay by the shutdown the service had learnt from the "
        "jobs already in the dev Slurm's accounting (about 17 s added to every ETA; the replay "
        "takes it as `shutdown_s` and `shutdown_sd_s`): the same phases and pauses ahead at "
        "every poll.",
        "",
        "Why the p50 errs (`python -m benchmarks.live_session --trace`: each point's error over "
        "progress split into its pace, the projected step time less the real steady pace of the "
        "rest of the run on rank 0's stamps times the iterations left, and its pauses, the "
        "pauses and shutdown projected less the rest of the real time; *its pace alone* in the "
        "table is the median error with the pauses exact, *its pauses alone* with the pace "
        "exact): the pace. In the early-phase session the ETA projects the newest pace to the "
        "end, and each pace it follows is a stretch the host's load put there: +12 to +61 % from "
        "17 to 30 % (the slower phase from 135, 0.21-0.24 s per iteration against 0.11-0.12 for "
        "the rest of the run), +14 to +20 % from 45 to 58 % (the load rose at 365: 0.15-0.16 "
        "against 0.10), -3 to -9 % from 63 to 74 % (it fell at 500: 0.06-0.08 against 0.11), "
        "and the pauses add +7 to +10 % from 12 to 30 % (the first evaluations were the "
        "longest). In the late-phase session the points from 10 to 44 % are early by the phase "
        "ahead (-10 to -22 %, all but three), those from 45 to 70 % late "
        "by +5 to +9 % (the phase's 0.29-0.33 s projected against 0.23-0.26 for the rest: the "
        "load fell after 60 %), those after within 2 %.",
        "",
        "Estimators tried on 2026-12-04 (second session; not in the tree; fresh planner, early "
        "and late session): a changepoint posterior instead of the hard switch (the Bayes factor "
        "of the newest change under the long-run noise, effect prior log-sd 0.1-1.0, prior odds "
        "1 over the splits searched; the p50 the posterior's mix of the phase's pace and the pace "
        "pooled with the stretch before it) 7.0-7.1 % and 6.3 %, its hard form (pooled under 3, "
        "4 or 6 sd) 7.2 % and 6.3 %: the pooled pace is no nearer (0.12-0.14 s from 45 to 58 % "
        "of the early session against 0.10); the p50 as the delta-t expectation (the phase's "
        "share of the rest `ln(1 + x) / x`, `x = N / L`) toward the stretch before the ETA's "
        "change point 11.4 % and 6.9 %, toward the run's whole pace before it 16.0 % and 2.9 % "
        "(the same when only changes under 4 sd of the long-run noise may end); evaluations at "
        "the projected pace (each one's length times the projected over its own steady step "
        "time: they lasted 41-77 steps of the pace around them, 45-60 for 12 of 18, against "
        "2.5-13.8 s) 8.3 % and 9.4 %, the pace's error then counting twice; the change-point "
        "search under 0.5, 1 or 1.5 times the long-run noise on both clocks 7.1/16.9/17.0 % and "
        "6.8/6.9/5.4 %. No estimator of the past pace tried so far meets 5 % on both: the early "
        "session's rest ran faster than any stretch before it but its newest ones, the late "
        "session's slower than its phase. Adopted: the long-run noise leaves out the blur of "
        'whole-second times (`planner.forecast.level`, "Pace noise"; both sessions print whole '
        "seconds): coverage 72 % and 80 % (72 % and 79 % before), p50 unchanged. Adopted on "
        "2026-12-04 (third session): the long-run noise is cut into `max(4, floor(sqrt(m)))` "
        "batches, a count that never falls as observations come (batches of `floor(sqrt(m))` "
        "made 5 of 15 observations but 4 of 16), and before there are batches the band's "
        "degrees of freedom are the noise prior's alone (it counted the observations, and "
        "the 8th, bringing the first batches, widened the band: "
        "`tests/forecast/test_eta.py::test_more_observations_narrow_the_band`): fresh planner "
        "6.8 to 6.7 % and 6.3 % unchanged, coverage 72 % and 80 to 81 %; the late session's "
        "slower phase first seen at 435 instead of 480, the end of the early session's phase "
        "found (215, seen at 310) and its host's change at 500 seen at 615 (instead of a "
        "change from 615 seen at 800).",
        "",
        "Rules tried on these two sessions and not adopted, because each helped one session "
        "and hurt the other (a rule chosen on these two alone would be fitted to them): the "
        "change-point search judged under the long-run pace noise instead of the step-to-step "
        "noise (early-phase session 16.9 %, coverage 53 %); overlapping batch means for the "
        "long-run noise (steadier band; the late session's slower phase is then no phase event); "
        "the current phase's pace shrunk toward the run's mean pace by the rate of change "
        "points seen (a random level-shift hazard: late session 4.2 %, coverage 79 %; early "
        "session 12.2 %, 61 %); evaluations projected in steady steps rather than seconds (early "
        "session 5.9 %, late session 12.5 %: its slower phase slowed training, not evaluation).",
        "",
        "Tried on 2026-12-04 and not adopted, because the replay of recorded logs "
        "(`benchmarks/eta_replay.py`) got worse: the p50 as the expectation under the same "
        "delta-t persistence, the pace returning to the one before the phase when the phase "
        "ends, helped both sessions (early 4.4 %, coverage 68 %; late 3.9 %, 79 %) but moved "
        "the replay's overall median from 10 % on from 1.32 to 1.50 %: the end-to-end test's "
        "job (quiet) 1.40 to 4.70 % (+3.4 to +13.9 % at 30 %: after its stall ended, the pace "
        "before was the stall's), Megatron-DeepSpeed 1.89 to 4.31 % (a drift goes on), the "
        "restart run 7.18 to 7.37 %; the same toward the run's typical pace (the median of its "
        "batch paces) gave early 12.2 %, late 4.1 % (the hazard rule's result again), and only "
        "for a phase younger than the stretch before it 7.1 % and 6.7 %. Only for a change "
        "within the pace's long-run swings (under 4 sd of its long-run noise: no phase event; "
        "a sustained change projected to the end) it met the target in both sessions (early "
        "4.4 %, coverage 68 %; late 4.0 %, 79 %) and on the replay helped Nemotron-3 (1.11 to "
        "0.64 %) and the slow-phase run (7.16 to 6.49 %) but hurt the end-to-end test's job "
        "under a CPU hog (0.94 to 2.95 %; at 30 %, +0.2 to +3.2 %) and moved the "
        "overall medians from 1.32 to 1.38 % (from 10 %) and 0.95 to 1.01 % (from 50 %). The "
        "pace alone (the "
        "remaining steady time against rank 0's stamps, pauses apart) asks opposite things of "
        "the two sessions: the early one is best followed by the newest pace (the "
        "phase-following pace 5.2 % median; the run's mean pace 12.2 %, exponentially weighted "
        "means of half-life 50-400 iterations 7.1-11.8 %: the host's load fell over the run), "
        "the late one by long averages (the run's mean 3.7 %, half-life 200 iterations 2.1 %, "
        "the phase-following pace 6.2 %: the host's load fell after 60 %). The early session's "
        "pauses add +7 to +10 % of its duration from 10 % to 30 % (its first evaluations were "
        "its longest, 8.4 and 9.3 s, against 2.5-9.4 s later).",
        "",
        "Tried on 2026-12-04 (fourth session; not in the tree; fresh planner, early and late "
        "session; the replay's overall median from 10 % and 50 % on against 1.32 % and 0.95 %; "
        "`benchmarks/eta_band_coverage.py` unchanged by each, its log has no phase). An "
        "online, per-run mix of the newest pace (the p50's pace) and the run's mean pace (its "
        "steady time over its iterations), each weighted by the inverse of its mean squared log "
        "error on the run's own earlier ETA points (the pace it gave then against the steady "
        "pace from then to now, weighted by the iterations since; no lookahead): early 14.2 %, "
        "late 3.1 % (coverage 63 % and 81 %); replay 1.40 % and 1.09 % (the end-to-end test's "
        "job quiet 1.41 to 2.91 %, under a CPU hog 0.94 to 3.58 %, Megatron-DeepSpeed 1.89 to "
        "3.07 %, the restart run 7.18 to 8.19 %; Nemotron-3 1.11 to 0.33 %, the slow-phase run "
        "7.16 to 6.39 %). The weights it learns are alike in the two sessions (median weight "
        "of the newest pace from 10 % on 0.42 and 0.47), while fixed weights show they want "
        "opposite ones (0, 0.25, 0.5, 0.75, 1: early 17.1, 14.8, 12.0, 9.0, 6.7 %; late 3.8, "
        "2.3, 3.0, 4.1, 6.3 %): the run's own past does not tell them apart. Its forms: the "
        "better-scored one alone 17.1 % and 6.3 %; every earlier point weighing the same 13.6 % "
        "and 3.3 %; exponentially weighted means of half-life 100, 200 and 400 iterations as "
        "the long-run pace 11.4/12.9/13.6 % and 4.5/3.9/3.5 %. The same mix of the newest pace "
        "and the delta-t expectation toward the stretch before the change point (the estimator "
        "above that helped both sessions; alone here 4.3 % and 4.0 %): early 5.3 %, late 4.0 % "
        "(coverage 68 % and 81 %, weights again alike: 0.43 and 0.49), replay 1.45 % and 1.06 % "
        "(end-to-end quiet 3.18 %, CPU hog 2.24 %, Megatron-DeepSpeed 2.87 %; the restart run "
        "5.85 %, Nemotron-3 0.67 %); only for a change under 4 sd of the long-run noise (the "
        "gate above) early 5.4 %, late 4.2 %, replay 1.35 % and 0.94 % (CPU hog 0.94 to "
        "1.71 %, Megatron-DeepSpeed 1.90 %, the end-to-end quiet log unchanged; Nemotron-3 "
        "0.80 %, the restart run 6.13 %): the nearest, but it gives back the gain of the "
        "delta-t p50 alone on the early session and still costs the replay from 10 % on. Mean "
        "reversion: the log paces of the long-run noise's batches as an AR(1) around the "
        "run's mean pace, the p50 that mean plus the newest pace's deviation times the mean "
        "of `phi^k` over the batches ahead, `phi` the batches' "
        "lag-1 autocorrelation: `phi` came out 0.32 and 0.26 (medians; batches of 11-85 "
        "iterations, about as long as the noise schedule's stretches), so the p50 was nearly "
        "the run's mean pace: early 16.6 %, late 3.2 % (coverage 62 % and 77 %; 15.6 % and "
        "4.0 % with `phi` corrected for its small-sample bias, `+ (1 + 3 phi) / k`), replay "
        "1.41 % and 1.10 % (end-to-end quiet 4.16 %, CPU hog 4.82 %, Megatron-DeepSpeed 3.85 %). "
        "The early session's phase cannot be reported within 10 % of its start by any detector "
        "of the pace, in seconds or per iteration, on the wall clock or the printed compute "
        "times (the two agree within 1 %: the phase's extra, a sleep of 0.35 times each "
        "step's compute, is inside the printed time): the host's load fell as it began. The "
        "noise schedule ran 2 busy processes from iteration 55-60 until 7.5 s into the "
        "evaluation after iteration 90, none until iteration 130-135, then 2 until 180; rank "
        "0's stamps: 180 ms per iteration over 60-90, 152 ms over 95-125, so the pace fell "
        "15 % where the job's own step time rose 35 %. Against the same load the phase shows "
        "(none: 125 ms over 10-55, 152 ms over 95-125, x1.22; two: 180 ms over 60-90, 243 ms "
        "over 135-180, x1.35), but the planner does not see the host's load; the rise at "
        "130-135 is the change it reports (from 135, 0.2-3.1 sd of the long-run noise: no "
        "event).",
        "",
        "Tried on 2026-12-04 (fifth session) and reverted: the long-run pace noise on batches"
        " anchored on fixed boundaries of a power-of-two number of steady iterations (instead"
        " of batches re-cut from the newest observation at every poll). It did what it was "
        "for: the estimate read 0.165 at iteration 165 of the early session and 1.647 at 170 "
        "(a MAD of 3-4 differences of whole-second-blurred batch paces, drawn afresh at each "
        "poll as every boundary moved), and anchored it changed more than twofold between "
        "successive polls at 2 and 3 of 162 polls instead of 14 and 47; fresh planner 6.73 to"
        " 6.82 % and 6.30 to 6.31 %, calibrated 7.56 to 7.06 %, the late session's slower "
        "phase seen at 400 instead of 435, the replay unchanged (1.32 % and 0.95 %). But a "
        "clean x1.5 step on a noiseless log (the metrics test's feed, "
        "`tests/deploy/planner_feed.py`: 40 intervals, the change at the 10th) was no longer "
        "a phase event: the batch that straddles the change has a pace between the two, so "
        "the step moves two of the 4-5 batch differences, their median is a quarter of the "
        "step, and the step is then under 4 sd of a noise it made itself (the batches re-cut "
        "from the newest observation happened to put the change on a boundary). A next try "
        "should measure the long-run noise on the differences that do not span a detected "
        "change point.",
        "",
        "Adopted on 2026-12-04 (sixth session): the anchored batches again, each batch that "
        "holds a change point the ETA's search found (either clock) cut in two there "
        '(`planner.forecast.level`, "Pace noise"), so that no batch mixes two phases and a '
        "change moves one batch difference, as on a boundary. The feed's x1.5 step, read at "
        "once as the service reads it: 3.4 sd of a long-run noise of 0.37 per iteration with "
        "the anchored batches alone (no event), 61 sd of 0.021 cut (60.6 sd re-cut from the "
        "newest; `tests/forecast/test_noisy_host.py`, the feed's log). Against the batches "
        "re-cut at every poll (the tree before): fresh planner 6.73 to 6.80 % and 6.30 to "
        "6.31 %, coverage 72 % and 81 % unchanged; calibrated 7.56 to 7.07 % and 6.30 to "
        "6.31 %, coverage 72 % unchanged and 79 to 81 %; from 10 % progress on the noise "
        "changed more than twofold between successive polls at 5 and 3 of 162 polls instead "
        "of 14 and 47 (on the swinging synthetic run of `tests/forecast/test_noisy_host.py`, "
        "seeds 2 and 3: 3 and 5 instead of 13 and 17, and 5 and 2 phase events instead of 3 "
        "and 4); the late session's slower phase first seen at 400 instead of 435 (from 380, "
        "x1.44) and its host's speed-up at 620 instead of 700; in the early session the phase "
        "is an event from 135 (seen at 155: 4.2 sd of a noise of 0.47 per iteration; 0.64 "
        "with the batch that holds the change uncut, 3.1 sd, and 1.21 re-cut, 1.6 sd), its "
        "end from 185-190 and 210 (seen "
        "at 230 and 245 instead of 215 at 310), the host's change at 500 no event. The "
        "replay of recorded logs (`benchmarks.eta_replay`) unchanged overall: 1.32 % and "
        "0.95 %, coverage 75 % and 82 % (per log at most 0.02 points of p50 error; the model "
        "band's coverage of Megatron-DeepSpeed 61 to 57 %, of the steady tiny GPT 66 to 68 %); "
        "`benchmarks/eta_band_coverage.py` (learnt level) 11/18 to 12/18. The p50 is the "
        "newest phase's pace either way, and moves by at most 0.1 point: the noise sets the "
        "band, the prior's weight and the phase events, not the pace projected.",
        "",
        "Tried in the same session and not adopted: leaving out of the MAD the batch "
        "differences that span a change point the search found (instead of cutting the batch "
        "there): the feed's step 53 sd, fresh planner 6.8 % and 6.3 %, coverage 73 % and "
        "81 %, but the search's change points on a shared host are mostly its swings, and "
        "with their differences left out the noise was too low: the late session had a phase "
        "event from 95 (x1.28, seen at 125: the host's swing, no phase of the job) before its "
        "slower phase, and on the swinging synthetic run the noise still jumped twofold at 5 "
        "and 8 of 162 polls with 6 and 8 phase events (no phase in it); leaving out only the "
        "differences across the current phase's change point: the same false event at 95, "
        "the early session's end of phase no event. Cutting the batches at the current "
        "phase's change point only: the same figures as cutting at all of them on the late "
        "session, the early session's end of phase from 185 and 210 as well, jumps at 1 and "
        "6 of 162 polls of the recorded sessions, 2 and 6 on the synthetic run.",
        "",
        "Adopted on 2026-12-04 (seventh session): a phase's pace is compared with the stretch "
        "before the earlier of the two clocks' change points when they lie fewer than "
        '`CHANGE_MIN_OBS` (3) observations apart (`planner.forecast.level`, "Two clocks"): '
        "the two clocks often place one change a few observations apart, and the phase's ratio "
        "(`phase_ratio`, published, and the z of a phase event) was measured against the "
        "sliver between them. An x1.5 step that the wall clock saw one interval before the "
        "printed times read x1.02 at 1 sd (no phase event; now x1.48 at 81 sd: "
        "`tests/forecast/test_pauses_and_phases.py`); in the early session from 290 to 400 "
        "the pace that had fallen from 0.18 to 0.13 s per iteration read x1.33, slower, "
        "against two intervals at 0.10 (now x0.73-0.74). Fresh planner 6.8 % and 6.3 % "
        "unchanged, coverage 72 to 73 % and 81 %; the early session's end of phase reported "
        "from 225, its true end (x0.73; from 210, x0.63, before), and the host's fall of load "
        "at 465-500 an event seen at 795 (none before); the late session's phase x1.44 to "
        "x1.46. The replay of recorded logs unchanged, every log (1.32 % and 0.95 %); "
        "`benchmarks/eta_band_coverage.py` unchanged (learnt level 12/18). Tried with it: "
        "the long-run noise's batches cut once per such pair of change points (not at both): "
        "p50 unchanged, coverage 73 % and 81 % (calibrated 74 %), the phase from 135 read "
        "x1.37 instead of x1.55: no gain, not adopted.",
        "",
        "Tried in the same session and not adopted: the pace-return rule (the p50 as the "
        "delta-t expectation that the phase ends and the pace returns to the stretch before "
        "it: early 4.3 %, late 4.0 %, replay 1.50 % and 1.10 % on the tree before) owed its gain "
        "on the early session to that sliver: from 290 to 400 it pulled the p50 toward the "
        "sliver's 0.10 s per iteration, which the rest of the run happened to match. Compared "
        "with the stretch before the phase, it gives early 13.3 %, late 4.0 % (coverage 67 % "
        "and 80 %), replay 1.51 % and 1.12 % (Megatron-DeepSpeed 1.89 to 4.24 %, end-to-end "
        "quiet 1.41 to 4.99 %, under a CPU hog 0.94 to 3.17 %). What the replay logs it hurt "
        "show: after a stall (the end-to-end test's job) the stretch before the newest phase is "
        "the stall, and a drift (Megatron-DeepSpeed, 0.58 to 0.67 s over the run, one change "
        "at 1.9-4.4 sd) goes on; the late session's gain comes from reverting its job's own "
        "slower phase, which lasted to the end (the host's load fell after 60 %, so the p50 "
        "fell nearer by the wrong cause). Gates a production ETA can observe, each with the "
        "stretch before the phase: only after the run's pace swung both ways among the "
        "change points its fit holds (early 12.9 %, late 6.3 % and from 50 % on 1.7 to 4.0 %: "
        "a sliver of 5-20 iterations at 0.20 between 0.197 and 0.30 counts as a swing; replay "
        "1.32 % and 0.96 %, the restart run 7.18 to 4.30 %), only when the previous change went "
        "the other way (early 13.4 %, late 6.3 %), only slowdowns (early 6.8 %, from 50 % on "
        "3.2 to 4.3 %, late 3.1 %; replay 1.38 % and 0.99 %: Megatron-DeepSpeed 4.24 %, the "
        "restart run 9.45 %), only speed-ups (early 14.6 %, late 6.3 %), only changes under 4 "
        "sd of the long-run noise (early 12.6 %, late 6.5 %, replay 1.38 % and 1.00 %). None "
        "helps both sessions without hurting the replay: the pace-return rule is dropped.",
        "",
        "The evaluation prior, 2026-12-05 (hand-written). Before the job's first evaluation "
        "is seen, each evaluation ahead is projected at `eval_iters` x the steady step x 1/3 "
        '(`planner.forecast.pauses`, "The evaluation prior"): at iteration 90 of the early '
        "session 200 x 0.177 s / 3 = 11.8 s (the late session 11.6 s), against 8.2 s counted "
        "after it (10.7 s in the late session). `eval_iters` is read right (200 in the launch"
        " and in the job's argument dump). The step is the newest phase's pace, 0.177 s per "
        "iteration, raised by the host's load (two busy processes from iteration 55-60 until "
        "7.5 s into that evaluation; 0.158 s around it on rank 0's stamps, about 0.11 s over "
        "the rest of the run): the pace projected for training carries the same error (+23 % "
        "of the duration at that point). The ratio: one evaluation iteration against the "
        "steady step around it, on rank 0's stamps, is 0.23-0.39 in the early session (median"
        " 0.26), 0.20-0.29 in the late one (0.23), 0.19-0.20 in the end-to-end test's two "
        "logs and 0.21-0.25 in the slowed-rank log; against the forward and backward compute "
        "time the ranks print, medians 0.30-0.40. So 1/3 is the forward's FLOP share of the "
        "compute (Megatron-LM's `evaluate()` runs `forward_backward_func(..., "
        "forward_only=True)` under `torch.no_grad()`, `megatron/training/training.py`, "
        "NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553), and this job's step "
        "also holds the gloo gradient all-reduce and the optimizer step, which an evaluation "
        "does not run. The public Megatron-DeepSpeed GPT-3 125M log (8 GPUs) goes the other "
        "way: 0.73-0.89 of a step per evaluation iteration. The ratio stays 1/3 with its "
        "log-sd 0.7: a ratio taken from the dev job's logs would be fitted to them and is "
        "contradicted by the GPU log. Nor would it move the figures: the prior sets only the "
        "points before the first evaluation is seen, one point from 10 % on in each session; "
        "at 0.289 (1/3 of the compute share of the scenario's model step, 0.867) and at 0.25 "
        "the early session's 10 % point goes from +42.7 % to +35.6 % and +29.3 %, the late "
        "session's from -21.8 % to -25.6 % and -29.0 %, and the median errors (6.8 % and 6.3 "
        "%) and coverage (73 % and 81 %) do not change, fresh or calibrated. The pauses' "
        "share of the error after 10 % (+7 to +10 % up to 30 % in the early session) is the "
        "evaluations seen, the first two the longest (8.4 and 9.3 s, under the host's load), "
        "projected at their mean. What was wrong with the prior, and is fixed: an evaluation "
        "iteration covers `--eval-global-batch-size` samples (Megatron-LM "
        'd85365bd23a891b3fd7036273d9e4e745d348b4d, "Allow the evaluation batch size to differ'
        ' from the training batch size"; `validate_args` defaults it to '
        "`--global-batch-size`), which the schedule did not read: the prior now scales by "
        "that batch over the training one "
        "(`tests/forecast/test_pauses_and_phases.py::test_an_evaluation_batch_larger_than_the_training_batch_lengthens_the_prior`)."
        " No recorded log sets it: both sessions, `benchmarks.eta_replay` (1.32 % and 0.95 %,"
        " coverage 75 % and 82 %) and `benchmarks.eta_band_coverage` (learnt level 12/18) are"
        " unchanged, output for output.",
    ]
    return "\n".join([*lines, "", END])


def _alone(parts: list[dict[str, float]]) -> tuple[float, float]:
    """Median absolute p50 error with the pauses exact (the pace's error alone) and with the
    pace exact (the pauses' error alone), from :func:`error_parts`."""
    if not parts:
        return math.nan, math.nan
    errors = np.array([p["error"] for p in parts])
    pace = np.array([p["pace"] for p in parts])
    pauses = np.array([p["pauses"] for p in parts])
    return float(np.median(np.abs(errors - pauses))), float(np.median(np.abs(errors - pace)))


def trace(sessions: list[dict[str, Any]]) -> str:
    """Each session's p50 error over progress with the fresh planner, split into its pace and
    its pauses (:func:`error_parts`), in % of the job's duration, every 2.5 % of progress."""
    lines = []
    for figures in sessions:
        parts = next(iter(figures["variants"].values()))["parts"]
        lines += [figures["session"], "progress %  error %  pace %  pauses %"]
        mark = 0.0
        for p in parts:
            if p["progress"] + 1e-9 < mark:
                continue
            mark = p["progress"] + 0.025
            lines.append(
                f"{100 * p['progress']:10.1f} {100 * p['error']:+8.1f} "
                f"{100 * p['pace']:+7.1f} {100 * p['pauses']:+9.1f}"
            )
    return "\n".join(lines)


def write_results(text: str) -> None:
    """Replace (or append) the section in RESULTS.md."""
    body = RESULTS.read_text()
    if BEGIN in body and END in body:
        head, rest = body.split(BEGIN, 1)
        body = head + text + rest.split(END, 1)[1]
    else:
        body = body.rstrip("\n") + "\n\n" + text + "\n"
    RESULTS.write_text(body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", type=Path, default=None, help="record a session into DIR")
    parser.add_argument("--results", action="store_true", help="write into RESULTS.md")
    parser.add_argument(
        "--trace", action="store_true", help="print each p50 error over progress, split"
    )
    args = parser.parse_args(argv)
    if args.record is not None:
        record(args.record)
        return 0
    sessions = [judge(LIVE / name) for name in SESSIONS]
    if args.trace:
        print(trace(sessions))
        return 0
    text = section(sessions)
    print(text)
    if args.results:
        write_results(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
