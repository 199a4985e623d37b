"""``planner demo``: the whole loop on real parts, in a few minutes, from a clone.

It starts the local single-node Slurm of ``deploy/dev`` (when it is not running already), starts
``planner serve`` watching it, submits a real PyTorch DDP training job (``deploy/dev/tiny_gpt``:
2 ranks on CPU under ``srun``, Megatron-LM arguments, an evaluation every quarter of the run and
rank 1 slowed x1.6 from 40 % on), and prints what the planner says while the job runs: progress,
the ETA with its p10-p90 band, the pauses it expects, the straggler flag when it appears, and the
links to ``/v1/jobs/{id}`` and ``/metrics``. When the job ends it prints how the band narrowed
around the real end, then stops what it started (the service, the job if still running, the
Slurm it brought up) and removes its files (``--keep`` keeps them).

Needs root (the Slurm daemons switch users), the Debian packages of the dev stack
(``bash deploy/dev/install-deps.sh --demo`` as root) and PyTorch in this interpreter
(``bash deploy/dev/demo.sh`` does all of it, through ``sudo`` when it is not run as root). Errors
say which is missing (exit 2). It prints only what means something: no line before the job
has logged an iteration, the band once the pace is measured (from 5 % of the run on), the
pauses ahead with where they come from (the launch's evaluation interval, the pauses seen), a
line per phase (a sustained change of pace), the straggler flag, and at the end where the
time went.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NotRequired, TypedDict

import typer

EXIT_INVALID = 2
STACK_ROOT = Path(os.environ.get("STACK_ROOT", "/tmp/planner-dev-stack"))
MARKS = (0.1, 0.25, 0.5, 0.75, 0.9)
SETTLED_PROGRESS = 0.05
SETTLED_OBSERVATIONS = 3
MIN_PAUSE_S = 0.5
"""Pauses shorter than this (s) are not worth a word."""
EVAL_ITERS = 60
"""Forward passes per evaluation of the demo's job: a pause of a few seconds."""

SCENARIO = """name: tiny-gpt-demo
model: {num_layers: 2, hidden_size: 128, num_attention_heads: 4, ffn_hidden_size: 512,
        vocab_size: 1024, seq_length: 128, activation: gelu}
hardware: {gpu: h100-sxm, num_gpus: 2, gpus_per_node: 8}
parallelism: {tensor_parallel: 1, pipeline_parallel: 1, data_parallel: 2, micro_batch_size: 4,
              global_batch_size: 8, overlap_grad_reduce: false}
training: {framework: megatron, train_iters: TRAIN_ITERS}
"""


class _Band(TypedDict):
    """A p10/p50/p90 band (s, or epoch s for a completion time; null: unknown)."""

    p10: float | None
    p50: float | None
    p90: float | None


class _PausePeriod(TypedDict, total=False):
    """A recurring pause the ETA projects (``planner.forecast.pauses.PausePeriod``)."""

    kind: str
    interval: int
    per_slot_s: float
    slots_seen: int
    slots_ahead: int
    source: str


class _PauseForecast(TypedDict, total=False):
    """The pauses ahead as the ETA projects them: recurring ones, then stalls (s)."""

    periods: list[_PausePeriod]
    irregular_s: float


class _Eta(TypedDict, total=False):
    """The parts of a job's ``eta`` object the demo prints (``GET /v1/jobs/{id}``)."""

    method: str
    step_time_s: _Band
    completion_time_s: _Band | None
    progress_ratio: float | None
    num_observations: int
    pauses_s: float | None
    pauses: _PauseForecast | None


class _Progress(TypedDict, total=False):
    """A job's ``progress`` object: iterations logged of its total, and their ratio."""

    iteration: int | None
    train_iters: int | None
    progress_ratio: float | None


class _Event(TypedDict, total=False):
    """One event of a job's history: a phase (``description``) or a pause (``duration_s``)."""

    kind: str
    iteration: int
    description: str
    duration_s: float


class _Outcome(TypedDict, total=False):
    """An ended job's outcome: the p50 ETA's relative error at marks of progress."""

    p50_error_ratio_at: dict[str, float | None]


class _Job(TypedDict):
    """The parts of ``GET /v1/jobs/{id}`` the demo reads (the API's ``JobDetail``)."""

    status: str
    active: bool
    start_time_s: float | None
    end_time_s: float | None
    progress: _Progress
    eta: _Eta | None
    events: NotRequired[list[_Event]]
    outcome: _Outcome | None


class _Flag(TypedDict, total=False):
    """A flagged rank of the live straggler report."""

    rank: int
    node: str | None
    slowdown: float


class _Stragglers(TypedDict, total=False):
    """The parts of ``GET /v1/jobs/{id}/stragglers`` the demo prints."""

    available: bool
    stragglers: list[_Flag]
    slowdown: float
    action: str
    advice: str


def _fail(message: str) -> typer.Exit:
    typer.echo(f"planner demo: {message}", err=True)
    return typer.Exit(EXIT_INVALID)


def _repo() -> Path:
    """The clone's root (``deploy/dev`` lives there, not in an installed package)."""
    root = Path(__file__).resolve().parents[1]
    if not (root / "deploy" / "dev" / "slurm-up.sh").is_file():
        raise _fail(
            f"deploy/dev is not next to the planner package ({root}): run the demo from a clone "
            "installed with `pip install -e .`"
        )
    return root


def _as_root_hint() -> str:
    """How to run the demo as root from here: through sudo where it exists."""
    if shutil.which("sudo") is not None:
        return "`sudo .venv/bin/planner demo` or `bash deploy/dev/demo.sh`"
    return "a root shell (sudo is not installed)"


def _preflight(repo: Path) -> None:
    if os.geteuid() != 0:
        raise _fail(f"run it as root: the local Slurm's daemons switch users ({_as_root_hint()})")
    missing = [b for b in ("munged", "slurmctld", "slurmd") if not Path(f"/usr/sbin/{b}").exists()]
    if missing or shutil.which("sbatch") is None:
        raise _fail(
            f"Slurm is not installed ({', '.join(missing) or 'sbatch'} missing): run "
            f"`bash {repo}/deploy/dev/install-deps.sh --demo` as root"
        )
    probe = subprocess.run(
        [sys.executable, "-c", "import torch"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        raise _fail(
            f"PyTorch is not installed in {sys.executable}: install the CPU build "
            "(`pip install torch --index-url https://download.pytorch.org/whl/cpu`) or run "
            "`bash deploy/dev/demo.sh`"
        )


def _controller_up(env: dict[str, str]) -> bool:
    """True when a slurmctld answers on the dev stack's configuration."""
    try:
        ping = subprocess.run(
            ["scontrol", "ping"], capture_output=True, text=True, timeout=15, env=env, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "is UP" in ping.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _clock(epoch_s: float) -> str:
    return dt.datetime.fromtimestamp(epoch_s).strftime("%H:%M:%S")


def _wait(what: str, timeout_s: float, probe: Callable[[], Any]) -> Any:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = probe()
        except httpx.HTTPError:
            value = None
        if value:
            return value
        time.sleep(0.5)
    raise _fail(f"timed out after {timeout_s:.0f} s waiting for {what}")


def _line(job: _Job, now_s: float) -> str | None:
    """The progress line of one poll; None before the job has logged an iteration of a known
    total (nothing to say yet)."""
    progress = job["progress"]
    eta: _Eta = job.get("eta") or {}
    done, total = progress.get("iteration") or 0, progress.get("train_iters") or 0
    if done <= 0 or total <= 0:
        return None
    ratio = progress.get("progress_ratio") or done / total
    head = f"{100 * ratio:5.1f}%  iteration {done:5d}/{total}"
    completion = eta.get("completion_time_s")
    if not completion:
        return f"{head}  (no ETA yet)"
    p10, p50, p90 = completion["p10"], completion["p50"], completion["p90"]
    if p10 is None or p50 is None or p90 is None:
        return f"{head}  (no ETA yet)"
    text = f"{head}  ETA {_clock(p50)} (in {max(0.0, p50 - now_s):5.0f} s)"
    if _settled(eta, ratio):
        text += f"  p10-p90 {_clock(p10)}-{_clock(p90)} ({p90 - p10:4.0f} s wide)"
    else:
        text += "  (measuring the pace: the band from 5 % on)"
    step_s = eta["step_time_s"]["p50"] if "step_time_s" in eta else None
    text += f"  step {math.nan if step_s is None else step_s * 1000:5.1f} ms"
    pauses = _pauses_text(eta)
    return f"{text}  {pauses}" if pauses else text


def _settled(eta: _Eta, ratio: float) -> bool:
    """Whether the band is worth printing: from ``SETTLED_PROGRESS`` of the run on, once the
    pace comes from the job's own steps (``SETTLED_OBSERVATIONS`` of them), not the model
    alone: before that it spans everything the first seconds of a job allow."""
    return (
        ratio >= SETTLED_PROGRESS
        and (eta.get("num_observations") or 0) >= SETTLED_OBSERVATIONS
        and eta.get("method") != "prior"
    )


def _pauses_text(eta: _Eta) -> str | None:
    """``pauses ahead 7 s: 3 evaluations of 2.4 s (launch)``: the pauses the ETA projects,
    per recurring kind with where its interval and length come from; None when none."""
    forecast: _PauseForecast = eta.get("pauses") or {}
    parts = []
    for period in forecast.get("periods") or []:
        ahead, each = period.get("slots_ahead") or 0, period.get("per_slot_s") or 0.0
        if ahead <= 0 or each < MIN_PAUSE_S:
            continue
        kind = period.get("kind") or "pause"
        seen = "seen" if (period.get("slots_seen") or 0) > 0 else "expected"
        origin = "launch" if period.get("source") == "arguments" else "history"
        parts.append(
            f"{ahead} {kind}{'s' if ahead > 1 else ''} of {each:.1f} s "
            f"(every {period.get('interval')} iterations: {origin}; length {seen})"
        )
    irregular = forecast.get("irregular_s") or 0.0
    if irregular >= MIN_PAUSE_S:
        parts.append(f"{irregular:.0f} s of stalls")
    total = eta.get("pauses_s") or 0.0
    if not parts or total < MIN_PAUSE_S:
        return None
    return f"pauses ahead {total:.0f} s: {', '.join(parts)}"


def _phase_lines(job: _Job, shown: set[int]) -> list[str]:
    """A line per phase event (a sustained change of pace) not shown yet; ``shown`` holds the
    start iterations already printed (updated)."""
    out = []
    for event in job.get("events") or []:
        iteration = event.get("iteration")
        if event.get("kind") != "phase" or iteration is None or iteration in shown:
            continue
        shown.add(iteration)
        out.append(f"phase: {event.get('description')}")
    return out


def _flagged_ranks(report: _Stragglers) -> frozenset[int]:
    """The ranks a straggler report names (none when it is not available)."""
    if not report.get("available"):
        return frozenset()
    return frozenset(f["rank"] for f in report.get("stragglers") or [] if "rank" in f)


def _straggler_line(report: _Stragglers) -> str | None:
    flags = report.get("stragglers") or []
    if not report.get("available") or not flags:
        return None
    ranks = ", ".join(
        f"rank {f.get('rank')} on {f.get('node') or '?'} ({f.get('slowdown', 0):.2f}x)"
        for f in flags
    )
    return (
        f"straggler flagged: {ranks}; the step is {report.get('slowdown', 1.0):.2f}x what it "
        f"would be without it; advice: {report.get('action')}: {report.get('advice')}"
    )


def _narrowing(history: list[tuple[float, _Band]], end_s: float) -> list[str]:
    """The completion band at each mark of progress, relative to the real end."""
    lines = ["progress   p10 - end   p50 - end   p90 - end   (seconds; the band narrows)"]
    shown: set[int] = set()
    for mark in MARKS:
        index = next((k for k, (r, _) in enumerate(history) if r >= mark), None)
        if index is None or index in shown:
            continue
        shown.add(index)
        ratio, band = history[index]
        offsets = (
            math.nan if q is None else q - end_s for q in (band["p10"], band["p50"], band["p90"])
        )
        lines.append(f"{100 * ratio:6.1f}%  " + "  ".join(f"{o:+10.1f}" for o in offsets))
    return lines


def demo(
    port: Annotated[int, typer.Option(help="Port of the planner's API (0: a free one)")] = 8080,
    train_iters: Annotated[
        int, typer.Option("--train-iters", min=200, help="Iterations of the training job")
    ] = 600,
    keep: Annotated[bool, typer.Option(help="Keep the demo's files and the local Slurm")] = False,
) -> None:
    """Run the whole loop on real parts: local Slurm, a real PyTorch job, the planner watching."""
    repo = _repo()
    _preflight(repo)
    began = time.monotonic()
    timings: dict[str, float] = {}
    port = port or _free_port()
    work = Path(tempfile.mkdtemp(prefix="planner-demo-"))
    work.chmod(0o777)
    service: subprocess.Popen[bytes] | None = None
    job_id: str | None = None
    conf = STACK_ROOT / "slurm" / "etc" / "slurm.conf"
    env = {**os.environ, "SLURM_CONF": str(conf)}
    started_slurm = not (conf.exists() and _controller_up(env))
    try:
        if started_slurm:
            typer.echo("starting the local Slurm (deploy/dev/slurm-up.sh) ...")
            subprocess.run(
                ["bash", str(repo / "deploy/dev/slurm-up.sh")],
                check=True,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            timings["the local Slurm up"] = time.monotonic() - began
        mark = time.monotonic()
        log = (work / "planner-serve.log").open("ab")
        service = subprocess.Popen(
            [sys.executable, "-m", "planner", "serve", "--port", str(port)],
            env={
                **env,
                "PLANNER_DATABASE_URL": f"sqlite:///{work / 'planner.db'}",
                "PLANNER_INGEST_INTERVAL_S": "2",
                "PLANNER_SLURM__ENABLED": "on",
                # the job's log and scenario are in the demo's directory, not the job's
                # working directory (the clone): the service reads job files only under those
                "PLANNER_SLURM__ALLOWED_FILE_ROOTS": json.dumps([str(work)]),
                "PYTHONUNBUFFERED": "1",
            },
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        import httpx

        _wait("the planner to answer /readyz", 180, lambda: httpx.get(f"{url}/readyz").is_success)
        timings["planner serve ready"] = time.monotonic() - mark
        job_id = _submit(repo, work, env, train_iters)
        typer.echo(
            f"submitted job {job_id}: a tiny GPT, 2 DDP ranks on CPU, {train_iters} iterations,"
        )
        typer.echo("  an evaluation every quarter of the run, rank 1 slowed x1.6 from 40 % on")
        typer.echo(f"the planner's view of it: {url}/v1/jobs/{job_id}")
        typer.echo(f"its metrics:              {url}/metrics  (planner_job_eta_seconds, ...)")
        final = _watch(url, job_id, train_iters, timings)
        job_id = None if not final["active"] else job_id
    finally:
        mark = time.monotonic()
        _clean(service, job_id, env, repo, started_slurm and not keep, work, keep)
        timings["clean-up"] = time.monotonic() - mark
        typer.echo(_timings_line(timings, time.monotonic() - began))
        typer.echo("demo cleaned up")  # the last line: nothing it started is left


def _timings_line(timings: dict[str, float], total_s: float) -> str:
    """``where the time went: ...``: each step of the demo and the whole (s)."""
    steps = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in timings.items())
    return f"where the time went: {steps}; in all {total_s:.0f} s"


def sbatch_tiny_gpt(
    repo: Path,
    env: dict[str, str],
    *,
    script: Path,
    scenario: Path,
    args: str,
    train_iters: int,
    output: str,
    hidden_size: int = 128,
) -> subprocess.CompletedProcess[str]:
    """Submit the dev stack's tiny GPT (``deploy/dev/tiny_gpt``) with ``sbatch --parsable``:
    its batch script written to ``script`` with the job's arguments ``args`` written out (as a
    user's script holds them, so the planner reads its schedule), ``scenario`` named in its
    comment, ``train_iters`` iterations, its output to ``output`` (an ``sbatch -o`` pattern);
    ``hidden_size`` replaces the batch script's 128 (a heavier step, same shape otherwise;
    ``ValueError`` if the script no longer states 128). Returns sbatch's result (stdout:
    ``job_id[;cluster]``); the caller checks it."""
    body = (repo / "deploy/dev/tiny_gpt/job.sbatch").read_text()
    if hidden_size != 128:
        if "--hidden-size 128 " not in body:
            raise ValueError("deploy/dev/tiny_gpt/job.sbatch no longer passes --hidden-size 128")
        body = body.replace("--hidden-size 128 ", f"--hidden-size {hidden_size} ")
    script.write_text(body.replace("${TINY_GPT_EXTRA_ARGS:-}", args))
    return subprocess.run(
        [
            "sbatch",
            "--parsable",
            f"--comment=planner:scenario={scenario}",
            f"--output={output}",
            f"--chdir={repo}",
            str(script),
        ],
        env={
            **env,
            "PLANNER_PYTHON": sys.executable,
            "TINY_GPT_DIR": str(repo / "deploy/dev/tiny_gpt"),
            "TINY_GPT_TRAIN_ITERS": str(train_iters),
        },
        capture_output=True,
        text=True,
        check=False,
    )


def _submit(repo: Path, work: Path, env: dict[str, str], train_iters: int) -> str:
    scenario = work / "scenario.yaml"
    scenario.write_text(SCENARIO.replace("TRAIN_ITERS", str(train_iters)))
    args = (
        f"--eval-interval {train_iters // 4} --eval-iters {EVAL_ITERS} --slow-rank 1 "
        "--slow-factor 1.6 "
        f"--slow-from-iteration {int(train_iters * 0.4)}"
    )
    result = sbatch_tiny_gpt(
        repo,
        env,
        script=work / "job.sbatch",
        scenario=scenario,
        args=args,
        train_iters=train_iters,
        output=f"{work}/tiny-gpt-%j.out",
    )
    if result.returncode != 0:
        raise _fail(f"sbatch failed: {result.stderr.strip()}")
    return result.stdout.strip().split(";")[0]


def _watch(url: str, job_id: str, train_iters: int, timings: dict[str, float]) -> _Job:
    """Print the planner's view of the job until it ends; then how the band narrowed.
    ``timings`` gets how long the job waited in the queue and ran (s)."""
    import httpx

    history: list[tuple[float, _Band]] = []
    last_iteration = -1
    shown: frozenset[int] = frozenset()  # the ranks of the last straggler line printed
    phases: set[int] = set()
    submitted = time.monotonic()
    running: float | None = None
    deadline = submitted + 60 + 2.0 * train_iters
    while True:
        if time.monotonic() > deadline:
            raise _fail(f"job {job_id} did not end in time; see {url}/v1/jobs/{job_id}")
        response = httpx.get(f"{url}/v1/jobs/{job_id}", timeout=10)
        if response.status_code == 404:  # not polled from Slurm yet
            time.sleep(1.0)
            continue
        response.raise_for_status()
        job: _Job = response.json()  # the API's JobDetail (its OpenAPI contract)
        ended_s = job["end_time_s"]
        if not job["active"] and ended_s:
            break
        if running is None and job["status"] == "running":
            running = time.monotonic()
            timings["job queued"] = running - submitted
        iteration = job["progress"].get("iteration") or 0
        eta: _Eta = job.get("eta") or {}
        if iteration != last_iteration and job["status"] == "running":
            line = _line(job, time.time())
            if line is not None:
                last_iteration = iteration
                typer.echo(line)
            band, ratio = eta.get("completion_time_s"), eta.get("progress_ratio")
            if band and ratio is not None:
                history.append((ratio, band))
        for text in _phase_lines(job, phases):
            typer.echo(text)
        # a line whenever the flagged ranks change (a contended core may name a rank for a
        # while before the slowed one is found)
        report: _Stragglers = httpx.get(f"{url}/v1/jobs/{job_id}/stragglers", timeout=10).json()
        line = _straggler_line(report)
        ranks = _flagged_ranks(report)
        if line and ranks != shown:
            shown = ranks
            typer.echo(line)
        time.sleep(2.0)
    timings["job running, seen to its end"] = time.monotonic() - (running or submitted)
    end_s = float(ended_s)
    started_s = job["start_time_s"]
    took = "" if started_s is None else f" after {end_s - started_s:.0f} s"
    typer.echo(f"job {job_id} {job['status']} at {_clock(end_s)}{took}")
    for text in _narrowing(history, end_s):
        typer.echo(text)
    counted = [e for e in job.get("events") or [] if e.get("kind") not in ("phase", "restart")]
    if counted:
        lengths = ", ".join(f"{e.get('duration_s', math.nan):.1f}" for e in counted)
        typer.echo(f"pauses the planner counted ({len(counted)}): {lengths} s")
    typer.echo(_kept_line(url, job_id, job.get("outcome") or {}))
    return job


def _kept_line(url: str, job_id: str, outcome: _Outcome) -> str:
    """Where the ended job is kept, and its p50 error at 30 % progress (a ratio of its
    duration in the outcome) in % of its duration."""
    ratio = outcome.get("p50_error_ratio_at", {}).get("30pct")
    error = "not measured" if ratio is None else f"{100 * ratio:+.1f} % of its duration"
    return (
        f"the planner keeps the ended job with its ETA history and outcome: {url}/v1/jobs/{job_id}"
        f" (p50 error at 30 %: {error})"
    )


def _clean(  # noqa: PLR0917 - what the demo started, in the order it stops them
    service: subprocess.Popen[bytes] | None,
    job_id: str | None,
    env: dict[str, str],
    repo: Path,
    stop_slurm: bool,
    work: Path,
    keep: bool,
) -> None:
    if job_id is not None:
        subprocess.run(["scancel", job_id], env=env, check=False, capture_output=True)
    if service is not None and service.poll() is None:
        service.terminate()
        try:
            service.wait(timeout=20)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait()
    if stop_slurm:
        subprocess.run(["bash", str(repo / "deploy/dev/slurm-down.sh")], env=env, check=False)
    if keep:
        typer.echo(f"kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
