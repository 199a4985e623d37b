"""Predicted against real start times of queued jobs, replaying a recorded real Slurm queue:
what ``/v1/jobs`` said about each pending job's start, against when it started.

    .venv/bin/python -m benchmarks.review_replay record   # as root: runs real jobs on the dev stack
    .venv/bin/python -m benchmarks.review_replay          # replays tests/data/slurm/replay
    .venv/bin/python -m benchmarks.review_replay --write  # also writes results/review_replay.md

``record`` starts the dev Slurm (deploy/dev), submits the sequence of real tiny GPT jobs of
``JOBS`` (deploy/dev/tiny_gpt; some with no time limit, some asking for all 16 GPUs) and polls it
every ``POLL_S`` with the Slurm adapter (``adapters.slurm.SlurmSource``), recording every
command it runs (``squeue --json``, ``sinfo --json``, ``sacct --json``, ``scontrol``) with its
output and time, and each job log's size at each poll, into ``tests/data/slurm/replay``.

The replay runs the service's own ingest loop (``planner.service.loops.IngestLoop``: Slurm
adapter, log tailer, description, prediction, ETA, online calibration, queue forecast) over the
recorded outputs in their order, at the recorded times (each log cut to its recorded size), so
every pending job gets the forecast the service made then. Each job's real start comes from the
recording (squeue/sacct). Reported per job and overall: the predicted start (p50 of the queue
forecast) and Slurm's own estimate (``StartTime``, which assumes the running jobs run to their
time limits) minus the real start, at the first poll that saw the job pending and on average
over every poll while it waited, and how often the real start fell in the forecast's p10-p90;
and, as ``benchmarks/pending_replay.py`` reports, the median of |p50 - real start| / (real start
- poll) over the polls at least ``MIN_WAIT_S`` before the start, with the p10-p90 coverage over
those polls. The forecast simulates the recorded cluster's backfill cycle (``bf_interval`` 5 s).
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

from adapters.logs import LogTailer
from adapters.slurm import SlurmSource
from adapters.slurm.source import CommandResult, subprocess_runner
from planner.service.loops import IngestLoop, IngestSettings, queue_forecast
from planner.service.loops.context import QueueForecastConfig
from planner.service.store.sql import SqlStore

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "slurm" / "replay"
RESULTS = Path(__file__).parent / "results" / "review_replay.md"
TINY_GPT = REPO / "deploy" / "dev" / "tiny_gpt"
#: Where the recording ran its jobs (logs, scenarios); the replay rewrites it to a temp dir.
WORKDIR = "/tmp/planner-review-replay"
POLL_S = 3.0
#: How far back sacct reads ended jobs (recording and replay must agree: it is in the argv).
SACCT_WINDOW_S = 900.0
#: The recorded cluster's ``bf_interval`` (deploy/dev/slurm-up.sh: SchedulerParameters).
BACKFILL_INTERVAL_S = 5.0
#: Polls closer than this to a job's real start are left out of the error over the wait.
MIN_WAIT_S = 5.0
WHOLE = ("-N", "2", "--ntasks-per-node=1", "--gres=gpu:h100:8")  # all 16 GPUs, 2 ranks
#: (submit offset s, name, sbatch arguments, iterations): the recorded sequence.
JOBS: tuple[tuple[float, str, tuple[str, ...], int], ...] = (
    (0, "a-16gpu-nolimit", WHOLE, 2800),
    (10, "b-8gpu-nolimit", ("-n", "1", "--gres=gpu:h100:8"), 1600),
    (20, "c-8gpu-10min", ("-n", "1", "--gres=gpu:h100:8", "--time=10"), 1600),
    (30, "d-16gpu-15min", (*WHOLE, "--time=15"), 1200),
    (40, "e-4gpu-3min", ("-n", "1", "--gres=gpu:h100:4", "--time=3"), 1200),
    (120, "f-2gpu-nolimit", ("-n", "1", "--gres=gpu:h100:2"), 800),
)


# ---------------------------------------------------------------------------- recording


class Recorder:
    """A ``SlurmSource`` runner that runs the command and keeps what it printed."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def __call__(
        self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str]
    ) -> CommandResult:
        result = subprocess_runner(argv, timeout_s, env)
        self.records.append(
            {
                "t": time.time(),
                "argv": [Path(argv[0]).name, *argv[1:]],
                "rc": result.returncode,
                "stdout": result.stdout,
                "stderr": result.stderr,
            }
        )
        return result


def _submit(env: dict[str, str], name: str, args: Sequence[str], iters: int) -> str:
    scenario = Path(WORKDIR) / f"{name}.yaml"
    text = (TINY_GPT / "scenario.yaml").read_text()
    scenario.write_text(text.replace("train_iters: 900", f"train_iters: {iters}"))
    done = subprocess.run(
        [
            "sbatch", "--parsable", f"-J{name}", f"--comment=planner:scenario={scenario}",
            f"--output={WORKDIR}/{name}-%j.out", f"--chdir={REPO}", *args,
            str(TINY_GPT / "job.sbatch"),
        ],
        env={**env, "PLANNER_PYTHON": sys.executable, "TINY_GPT_DIR": str(TINY_GPT),
             "TINY_GPT_TRAIN_ITERS": str(iters)},
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return done.stdout.strip().split(";")[0]


def record(out: Path) -> None:
    """Run ``JOBS`` on the dev stack and record the Slurm adapter's commands (module doc)."""
    sys.path.insert(0, str(REPO))
    from tests.slurm_stack import start_stack  # noqa: PLC0415 - the dev stack, record only

    stack = start_stack()
    env = {**os.environ, **stack.env}
    shutil.rmtree(WORKDIR, ignore_errors=True)
    Path(WORKDIR).mkdir(mode=0o777)
    os.chmod(WORKDIR, 0o777)  # slurmd writes the logs as the job's user
    recorder = Recorder()
    source = SlurmSource(
        runner=recorder, env=stack.env, timeout_s=10.0, sacct_window_s=SACCT_WINDOW_S
    )
    began, submitted, sizes = time.time(), {}, []
    while True:
        now = time.time()
        for offset, name, args, iters in JOBS:
            if name not in submitted and now - began >= offset:
                submitted[name] = _submit(env, name, args, iters)
        snapshot = source.snapshot()
        logs = {p.name: p.stat().st_size for p in Path(WORKDIR).glob("*.out")}
        sizes.append({"t": snapshot.taken_at_s, "logs": logs})
        active = [j for j in snapshot.jobs if j.status.is_active and j.job_id in submitted.values()]
        if len(submitted) == len(JOBS) and not active:
            break
        time.sleep(max(0.0, POLL_S - (time.time() - now)))
    out.mkdir(parents=True, exist_ok=True)
    (out / "files").mkdir(exist_ok=True)
    for path in Path(WORKDIR).iterdir():
        if path.suffix == ".out":
            with gzip.open(out / "files" / f"{path.name}.gz", "wb") as f:
                f.write(path.read_bytes())
        else:
            shutil.copy(path, out / "files" / path.name)
    texts: dict[str, int] = {}  # an output seen before is written as its index
    with gzip.open(out / "commands.jsonl.gz", "wt", encoding="utf-8") as f:
        for entry in recorder.records:
            for key in ("stdout", "stderr"):
                if entry[key] in texts:
                    entry[key] = {"same_as": texts[entry[key]]}
                else:
                    texts[entry[key]] = len(texts)
            f.write(json.dumps(entry) + "\n")
    manifest = {
        "workdir": WORKDIR,
        "poll_s": POLL_S,
        "recorded_from_s": began,
        "recorded_to_s": time.time(),
        "jobs": [
            {"name": n, "job_id": submitted[n], "offset_s": o, "sbatch": list(a), "iters": i}
            for o, n, a, i in JOBS
        ],
        "log_sizes": sizes,
        "slurm": subprocess.run(
            ["sinfo", "--version"], env=env, capture_output=True, text=True, check=False
        ).stdout.strip(),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"recorded {len(recorder.records)} commands, {len(sizes)} polls into {out}")


# ---------------------------------------------------------------------------- replay


class Replayer:
    """A ``SlurmSource`` runner answering each command with what it printed at the latest
    recorded run at or before ``now`` (paths under the recording's workdir moved)."""

    def __init__(self, records: list[dict[str, Any]], workdir: str, moved_to: str) -> None:
        self.now = 0.0
        self.by_command: dict[tuple[str, ...], list[tuple[float, CommandResult]]] = {}
        escaped = (workdir.replace("/", "\\/"), moved_to.replace("/", "\\/"))  # JSON's \/

        def moved(text: str) -> str:
            text = text.replace(workdir, moved_to).replace(*escaped)
            if workdir in text or escaped[0] in text:
                raise ValueError(f"a path under {workdir} is left in a recorded output")
            return text

        for r in records:
            result = CommandResult(r["rc"], moved(r["stdout"]), moved(r["stderr"]))
            self.by_command.setdefault(tuple(r["argv"]), []).append((r["t"], result))

    def __call__(
        self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str]
    ) -> CommandResult:
        runs = self.by_command.get((Path(argv[0]).name, *argv[1:]))
        if not runs:
            raise FileNotFoundError(argv[0])
        before = [result for t, result in runs if t <= self.now + 1e-6]
        return before[-1] if before else runs[0][1]


def replay(
    data: Path, *, backfill_interval_s: float = BACKFILL_INTERVAL_S, draw_groups: bool = True
) -> dict[str, Any]:
    """Replay the recording in ``data`` through the ingest loop; the figures (module doc), and
    under ``polls`` what every poll saw of each job while it waited: ``(poll time, p50, p10,
    p90, Slurm's estimate)``, epoch seconds. ``backfill_interval_s``: Slurm's backfill cycle in
    the forecast (0: backfill at every event); ``draw_groups`` False: every job draws its
    runtime from its own band (the forecast before jobs of one program on one hardware shared
    their band and quantile), for the ablation."""
    if not draw_groups:
        with mock.patch.object(queue_forecast, "draw_group", return_value=""):
            return replay(data, backfill_interval_s=backfill_interval_s)
    manifest = json.loads((data / "manifest.json").read_text())
    with gzip.open(data / "commands.jsonl.gz", "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    texts: list[str] = []  # outputs in order of first appearance (``same_as`` indexes them)
    for entry in records:
        for key in ("stdout", "stderr"):
            if isinstance(entry[key], dict):
                entry[key] = texts[entry[key]["same_as"]]
            else:
                texts.append(entry[key])
    polls = [r["t"] for r in records if r["argv"][0] == "squeue"]
    names = {j["job_id"]: j["name"] for j in manifest["jobs"]}
    seen: dict[str, list[tuple[float, float | None, float | None, float | None, float | None]]]
    seen = {job_id: [] for job_id in names}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp) / "work"
        workdir.mkdir()
        for path in (data / "files").glob("*.yaml"):
            shutil.copy(path, workdir / path.name)
        logs = {
            p.name[:-3]: gzip.decompress(p.read_bytes()) for p in (data / "files").glob("*.out.gz")
        }
        replayer = Replayer(records, manifest["workdir"], str(workdir))
        clock = [polls[0]]
        # The recording's jobs ran from the checkout and wrote their files under WORKDIR: as an
        # operator of that cluster would, the replay allows that directory (here moved to
        # ``workdir``) for job files and logs, besides each job's working directory.
        roots = (str(workdir),)
        source = SlurmSource(
            runner=replayer,
            clock=lambda: clock[0],
            sacct_window_s=SACCT_WINDOW_S,
            allowed_file_roots=roots,
        )
        store = SqlStore(f"sqlite:///{Path(tmp) / 'replay.db'}")
        store.migrate()
        loop = IngestLoop(
            store,
            [source],
            LogTailer(allowed_file_roots={"slurm": roots}),
            clock=lambda: clock[0],
            settings=IngestSettings(
                queue_forecast=QueueForecastConfig(backfill_interval_s=backfill_interval_s)
            ),
        )
        sizes = manifest["log_sizes"]
        for t in polls:
            clock[0] = replayer.now = t
            cut = max((s for s in sizes if s["t"] <= t + 1e-6), key=lambda s: s["t"], default=None)
            for name, content in logs.items():
                size = (cut or {"logs": {}})["logs"].get(name)
                target = workdir / name
                if size is None:
                    target.unlink(missing_ok=True)
                else:
                    target.write_bytes(content[:size])
            loop.run_cycle()
            for row in store.list_jobs(status="pending"):
                if row.job_id in seen:
                    made = row.queue_forecast or {}
                    start = made.get("start_s")
                    band = (
                        {q: _number(start.get(q)) for q in ("p10", "p50", "p90")}
                        if isinstance(start, dict)
                        else {}
                    )
                    seen[row.job_id].append(
                        (t, band.get("p50"), band.get("p10"), band.get("p90"),
                         _number((row.state or {}).get("expected_start_time_s")))
                    )  # fmt: skip
        final = {r.job_id: r for r in store.list_jobs()}
        store.dispose()
    return _figures(manifest, seen, final, names, len(polls))


def _figures(
    manifest: dict[str, Any],
    seen: dict[str, list[tuple[float, float | None, float | None, float | None, float | None]]],
    final: Mapping[str, Any],
    names: Mapping[str, str],
    polls: int,
) -> dict[str, Any]:
    rows = []
    for job_id, name in names.items():
        state = (final[job_id].state or {}) if job_id in final else {}
        real = state.get("start_time_s")
        waits = seen[job_id]
        row: dict[str, Any] = {"job": f"{job_id} {name}", "real_start_s": real, "polls": len(waits)}
        if real is None or not waits:
            rows.append(row)
            continue
        first = waits[0]
        row["waited_s"] = real - first[0]
        row["first_planner_s"] = None if first[1] is None else first[1] - real
        given = [w for w in waits if w[4] is not None]  # Slurm's backfill runs every 5 s
        row["first_slurm_s"] = given[0][4] - real if given else None
        planner = [abs(w[1] - real) for w in waits if w[1] is not None]
        slurm = [abs(w[4] - real) for w in waits if w[4] is not None]
        row["mean_abs_planner_s"] = statistics.fmean(planner) if planner else None
        row["mean_abs_slurm_s"] = statistics.fmean(slurm) if slurm else None
        row["slurm_estimates"] = f"{len(slurm)}/{len(waits)}"
        banded = [w for w in waits if w[2] is not None and w[3] is not None]
        row["in_band"] = f"{sum(1 for w in banded if w[2] <= real <= w[3])}/{len(banded)}"
        # over the polls at least MIN_WAIT_S before the start: |p50 - real| / time left to it
        far = [w for w in waits if w[1] is not None and real - w[0] >= MIN_WAIT_S]
        row["rel"] = [abs(w[1] - real) / (real - w[0]) for w in far]
        row["covered"] = [
            w[2] is not None and w[3] is not None and w[2] <= real <= w[3] for w in far
        ]
        row["median_rel"] = statistics.median(row["rel"]) if row["rel"] else None
        rows.append(row)
    waited = [r for r in rows if r.get("waited_s", 0) > POLL_S]
    summary = {
        "jobs": len(rows),
        "jobs_that_waited": len(waited),
        "polls": polls,
        "median_abs_first_planner_s": _median(r.get("first_planner_s") for r in waited),
        "median_abs_first_slurm_s": _median(r.get("first_slurm_s") for r in waited),
        "median_mean_abs_planner_s": _median(r.get("mean_abs_planner_s") for r in waited),
        "median_mean_abs_slurm_s": _median(r.get("mean_abs_slurm_s") for r in waited),
        "median_rel": _median(x for r in waited for x in r["rel"]),
        "forecasts": sum(len(r["rel"]) for r in waited),
        "coverage": statistics.fmean([c for r in waited for c in r["covered"]] or [math.nan]),
    }
    return {"summary": summary, "jobs": rows, "manifest": manifest, "polls": seen}


def _number(value: object) -> float | None:
    """``value`` as a float, None when it is not a number (JSON's missing band ends)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _median(values: Any) -> float | None:
    found = [abs(v) for v in values if v is not None]
    return statistics.median(found) if found else None


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _s(value: float | None, sign: str = "+") -> str:
    """Seconds as text in a fitting unit (``sign``: "+" to show it, "" for magnitudes)."""
    if value is None:
        return "–"
    for unit, size in (("y", 365 * 86400.0), ("d", 86400.0), ("h", 3600.0)):
        if abs(value) >= 2 * size:
            return f"{value / size:{sign}.1f} {unit}"
    return f"{value:{sign}.0f} s"


def markdown(figures: dict[str, Any]) -> str:
    """The report as Markdown (results/review_replay.md)."""
    summary, manifest = figures["summary"], figures["manifest"]
    lines = [
        "# Queue forecast against real start times (issue 15)",
        "",
        f"Replayed with `python -m benchmarks.review_replay`: the recording in "
        f"`tests/data/slurm/replay` ({summary['jobs']} real tiny GPT jobs on the dev Slurm, "
        f"{manifest['slurm']}; {summary['polls']} polls every {manifest['poll_s']:g} s) through "
        "the service's ingest loop with its default settings, the recording's job-file directory "
        "allowed (`slurm.allowed_file_roots`) and the recorded cluster's backfill cycle "
        f"(`queue_forecast.backfill_interval_s` {BACKFILL_INTERVAL_S:g}, its `bf_interval`; the "
        "default is Slurm's 30). Errors are predicted minus real "
        "start; *first*: at the first poll that saw the job pending (Slurm: its first "
        "estimate, its backfill runs every 5 s); *mean*: mean absolute error over every poll "
        "while it waited; *in band*: polls whose p10-p90 held the real start. Slurm's estimate "
        "is its `StartTime`, which assumes the running jobs run to their time limits. "
        f"*error / wait*: median over the polls at least {MIN_WAIT_S:g} s before the real start "
        "of |planner p50 - real| / (real start - poll).",
        "",
        "| job | waited | polls | planner, first | Slurm, first | planner, mean abs | "
        "Slurm, mean abs | Slurm estimates | in band | error / wait |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in figures["jobs"]:
        if r.get("waited_s", 0.0) <= manifest["poll_s"]:
            lines.append(f"| {r['job']} | started within a poll | | | | | | | | |")
            continue
        lines.append(
            f"| {r['job']} | {r['waited_s']:.0f} s | {r['polls']} | {_s(r['first_planner_s'])} | "
            f"{_s(r['first_slurm_s'])} | {_s(r['mean_abs_planner_s'], '')} | "
            f"{_s(r['mean_abs_slurm_s'], '')} | {r['slurm_estimates']} | {r['in_band']} | "
            f"{_ratio(r['median_rel'])} |"
        )
    lines += [
        "",
        f"Over the {summary['jobs_that_waited']} jobs that waited: median absolute error at "
        f"first sight {_s(summary['median_abs_first_planner_s'], '')} (planner) vs "
        f"{_s(summary['median_abs_first_slurm_s'], '')} (Slurm); median of the per-job mean "
        f"absolute error {_s(summary['median_mean_abs_planner_s'], '')} vs "
        f"{_s(summary['median_mean_abs_slurm_s'], '')}. Over the {summary['forecasts']} polls "
        f"at least {MIN_WAIT_S:g} s before a start: median |error| / wait "
        f"{_ratio(summary['median_rel'])}, p10-p90 coverage {summary['coverage']:.0%}.",
    ]
    return "\n".join(lines) + "\n"


def ablation(data: Path) -> str:
    """The overall figures with each of the forecast's two scheduler mechanisms off (Markdown):
    runtimes drawn per job or per draw group, backfill at every event or in cycles."""
    lines = [
        "",
        "Each mechanism on and off (same recording, same seed; *per draw group*: jobs of one "
        "program on the same hardware take one whole-run band, the narrowest of theirs (a "
        "running job's: the time it ran plus its remaining band), and all of the group draw at "
        "one quantile):",
        "",
        "| runtime draws | backfill | median abs(error) / wait | p10-p90 coverage | "
        "median per-job mean abs error | median first error |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for groups in (False, True):
        for interval in (0.0, BACKFILL_INTERVAL_S):
            s = replay(data, backfill_interval_s=interval, draw_groups=groups)["summary"]
            lines.append(
                f"| {'per draw group' if groups else 'per job'} | "
                f"{f'every {interval:g} s' if interval else 'at every event'} | "
                f"{_ratio(s['median_rel'])} | {s['coverage']:.0%} | "
                f"{_s(s['median_mean_abs_planner_s'], '')} | "
                f"{_s(s['median_abs_first_planner_s'], '')} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=("replay", "record"), default="replay")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--write", action="store_true", help=f"write {RESULTS.name}")
    args = parser.parse_args(argv)
    if args.mode == "record":
        record(args.data)
        return
    logging.getLogger("planner").setLevel(logging.ERROR)  # recorded jobs of other runs
    figures = replay(args.data)
    text = markdown(figures) + ablation(args.data)
    print(text)
    if args.write:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
