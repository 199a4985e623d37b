"""Load: a real ``planner serve`` against a fake Slurm 22.05 at the scale of a
10,000-job / 2,000-node cluster, as production runs it.

    .venv/bin/python -m benchmarks.load                  # prints the figures
    .venv/bin/python -m benchmarks.load --write          # also writes results/load.md
    .venv/bin/python -m benchmarks.load --src /work/main --cycles 2   # another checkout

The fake Slurm (``benchmarks/fake_slurm.py``: records copied from real 22.05.8 output, printed
by real ``squeue``/``sinfo``/``sacct``/``scontrol`` executables) runs in its own process at a
lower CPU priority (nice 10), as slurmctld would on its own host: it fills the cluster, then
changes it every ``--interval`` seconds (1 % of the jobs change state, logs grow at each job's
pace). ``planner serve`` (``--src``'s checkout) runs
with a SQLite store, its Slurm commands in the fake's ``bin``, the default settings otherwise
(``service.processes: split``, the ingest loop in a child process; ``--processes single`` runs
both in one; ingest every 15 s, the queue forecast's worker process from 1,000 jobs on).
Measured:

- **ingest cycles**: the first (empty store) and ``--cycles`` steady ones with churn, each from
  the service's own log line (``ingest slurm/...: N jobs ... in T s (poll P s); W s of it
  waiting for API requests``); a checkout without that line reports the time to ``/readyz``
  only;
- **``GET /v1/jobs?limit=N``**: ``--requests`` pages (walking the cursor), one every 0.5 s
  while the cycles run: client latency p50/p99 and size, and the same split by whether a page
  overlapped a cycle (told once the cycle running at the last page has logged its end); the
  unpaged answer once;
- **``/metrics``**: bytes, series and per-job series, scrape time (5 scrapes);
- **queue forecast**: ``planner_queue_forecast_seconds`` at the end, waiting up to
  ``--forecast-wait`` seconds for a forecast to have finished (one of 10,000 jobs can outlast
  the measured cycles);
- **peak RSS** (``VmHWM``) of the service and of its child processes (a split service's ingest
  process, the queue forecast's worker);
- **launch styles**: per style of the fake's jobs (scenario file, Megatron-LM arguments,
  torchtitan, HF Trainer, NeMo 2.0, torchtune, Megatron-DeepSpeed, Axolotl, LLaMA-Factory,
  plain), how many the service described with the style's reader (``described_by`` in
  ``GET /v1/jobs``), of those whose launch it could read;
- with ``--hogs N``: N busy-loop processes run beside the service from before it starts to the
  end (the 1-minute load average is sampled while measuring).

    .venv/bin/python -m benchmarks.load --hogs 2 --write   # beside two CPU hogs: load_hogs2.md
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
#: The query of the one unpaged ``GET /v1/jobs`` (every job in one answer; the service is
#: started with ``limits.jobs_unpaged_max`` above the cluster's jobs).
UNPAGED: dict[str, Any] = {"limit": 0}
RESULTS = Path(__file__).parent / "results" / "load.md"
CYCLE_LINE = re.compile(
    r"^(\S+ \S+),(\d+) \S+ \S+ ingest slurm/\S+: (\d+) jobs, (\d+) nodes in ([\d.]+) s "
    r"\(poll ([\d.]+) s\)(?:; ([\d.]+) s of it waiting for API requests)?",
    re.MULTILINE,
)


# ---------------------------------------------------------------------------- the fake Slurm


def fake_slurm(root: str, options: dict[str, Any], conn: Any) -> None:
    """The fake Slurm's process: populate, report, then change the cluster every
    ``options["interval"]`` seconds until told to stop; reports what each change did."""
    from benchmarks.fake_slurm import FakeSlurm  # noqa: PLC0415 - in the child process

    os.nice(10)  # slurmctld runs on its own host: here it yields the CPU to the service
    fake = FakeSlurm(
        Path(root),
        jobs=options["jobs"],
        nodes=options["nodes"],
        gpus=options["gpus"],
        churn=options["churn"],
        seed=options["seed"],
    )
    started = time.perf_counter()
    fake.populate()
    conn.send({"populated_s": time.perf_counter() - started, "summary": fake.summary()})
    changes: list[dict[str, float]] = []
    while not conn.poll(options["interval"]):
        t = time.perf_counter()
        counts: dict[str, float] = dict(fake.advance())
        counts["seconds"] = time.perf_counter() - t
        changes.append(counts)
    conn.recv()
    conn.send(
        {
            "changes": changes,
            "summary": fake.summary(),
            "styles": fake.styles(),
        }
    )


# ---------------------------------------------------------------------------- CPU hogs


def start_hogs(count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` busy-loop processes (each takes a core while it can): the service then runs
    on a machine whose other work competes for the CPU."""
    return [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        for _ in range(count)
    ]


def stop_hogs(hogs: list[subprocess.Popen[bytes]]) -> None:
    for hog in hogs:
        hog.kill()
    for hog in hogs:
        hog.wait(timeout=30)


@dataclass
class LoadAverage:
    """Samples of the 1-minute load average while the benchmark measures."""

    samples: list[float] = field(default_factory=list)

    def sample(self) -> None:
        self.samples.append(os.getloadavg()[0])

    def figures(self) -> dict[str, float | None]:
        if not self.samples:
            return {"mean": None, "max": None}
        return {"mean": statistics.mean(self.samples), "max": max(self.samples)}


# ---------------------------------------------------------------------------- the service


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def peak_rss_mib(pid: int) -> float | None:
    """``VmHWM`` of a process, MiB (None once it is gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"VmHWM:\s+(\d+) kB", text)
    return None if match is None else int(match.group(1)) / 1024.0


def children(pid: int) -> list[int]:
    """The process ids of ``pid``'s descendants (a split service's ingest process and, below
    it, the queue forecast's worker), depth first."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            direct = [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
        for child in direct:
            out += [child, *children(child)]
    return out


@dataclass
class Service:
    """A ``planner serve`` process and its log."""

    proc: subprocess.Popen[bytes]
    url: str
    log: Path
    cycles: list[tuple[int, float, float, float, float]] = field(default_factory=list)
    started_s: float = field(default_factory=time.perf_counter)
    _offset: int = 0

    def read_cycles(self) -> list[tuple[int, float, float, float, float]]:
        """New (jobs, seconds, poll seconds, end epoch s, seconds waiting for API requests: 0
        where the checkout does not log them) of the cycles logged since the last call."""
        with self.log.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        new = [
            (
                int(m.group(3)),
                float(m.group(5)),
                float(m.group(6)),
                time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1e3,
                float(m.group(7) or 0.0),
            )
            for m in CYCLE_LINE.finditer(data[:end].decode(errors="replace"))
        ]
        self.cycles += new
        return new


def start_service(
    src: Path,
    root: Path,
    bin_dir: Path,
    shared: Path,
    interval: float,
    *,
    processes: str = "split",
) -> Service:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(src),
        "XDG_STATE_HOME": str(root / "state"),
        "PLANNER_HOST": "127.0.0.1",
        "PLANNER_PORT": str(port),
        "PLANNER_DATABASE_URL": f"sqlite:///{root / 'planner.db'}",
        "PLANNER_INGEST_INTERVAL_S": str(interval),
        "PLANNER_LOG_LEVEL": "INFO",
        "PLANNER_SLURM__ENABLED": "on",
        "PLANNER_SLURM__BIN_DIR": str(bin_dir),
        "PLANNER_SLURM__ALLOWED_FILE_ROOTS": json.dumps([str(shared)]),
        "PLANNER_KUBERNETES__ENABLED": "off",
        "PLANNER_LIMITS__JOBS_UNPAGED_MAX": "1000000",  # the unpaged answer is measured
        "PLANNER_SERVICE__PROCESSES": processes,  # split: the ingest loop in a child process
    }
    log = root / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "planner", "serve"],
            cwd=src,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return Service(proc=proc, url=f"http://127.0.0.1:{port}", log=log)


def wait_ready(service: Service, client: httpx.Client, timeout_s: float) -> float:
    """Seconds until ``/readyz`` answers 200 (the first cycle succeeded)."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        if service.proc.poll() is not None:
            raise SystemExit(f"planner serve exited ({service.proc.returncode}); see {service.log}")
        try:
            if client.get(f"{service.url}/readyz", timeout=5).status_code == 200:
                return time.perf_counter() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"not ready after {timeout_s:.0f} s; see {service.log}")


# ---------------------------------------------------------------------------- measuring


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def timed(fn: Callable[[], httpx.Response]) -> tuple[float, httpx.Response]:
    t = time.perf_counter()
    response = fn()
    return time.perf_counter() - t, response


def page_latencies(
    service: Service,
    client: httpx.Client,
    *,
    requests: int,
    page: int,
    wait_s: float,
    load: LoadAverage,
) -> dict[str, Any]:
    """``requests`` pages of ``GET /v1/jobs?limit=page`` walking the cursor (from the start
    again at the end), one every ``wait_s``; latency and size. ``samples``: (epoch s sent,
    seconds) of each, for :func:`by_cycle` once the cycles they overlapped have been logged."""
    latencies, sizes, cursor, at = [], [], None, []
    for _ in range(requests):
        params: dict[str, Any] = {"limit": page, **({"cursor": cursor} if cursor else {})}
        at.append(time.time())
        took, response = timed(
            functools.partial(client.get, f"{service.url}/v1/jobs", params=params)
        )
        response.raise_for_status()
        latencies.append(took)
        sizes.append(len(response.content))
        cursor = response.json().get("next_cursor")
        service.read_cycles()
        load.sample()
        time.sleep(wait_s)
    return {
        "requests": requests,
        "page": page,
        "p50_ms": 1000 * quantile(latencies, 0.5),
        "p99_ms": 1000 * quantile(latencies, 0.99),
        "max_ms": 1000 * max(latencies),
        "bytes_median": statistics.median(sizes),
        "samples": list(zip(at, latencies, strict=True)),
    }


def by_cycle(
    samples: list[tuple[float, float]], cycles: list[tuple[int, float, float, float, float]]
) -> dict[str, Any]:
    """The pages ``samples`` (epoch s sent, seconds) split into those that overlapped an
    ingest cycle (its span from the cycle's log line: it ends when logged and lasted its
    seconds; the poll comes first) and those between cycles. Call it once the cycle running
    at the last page has been logged: a cycle not yet logged counts its pages as between."""
    spans = [(c[3] - c[1], c[3]) for c in cycles]
    polls = [(c[3] - c[1], c[3] - c[1] + c[2]) for c in cycles]  # a cycle polls first

    def overlapping(ranges: list[tuple[float, float]]) -> list[bool]:
        return [any(a <= t + lat and t <= b for a, b in ranges) for t, lat in samples]

    latencies = [lat for _, lat in samples]
    flags, in_poll = overlapping(spans), overlapping(polls)
    during = [lat for lat, flag in zip(latencies, flags, strict=True) if flag]
    between = [lat for lat, flag in zip(latencies, flags, strict=True) if not flag]
    polling = [lat for lat, flag in zip(latencies, in_poll, strict=True) if flag]
    return {
        "during_cycles": len(during),
        "during_p50_ms": 1000 * quantile(during, 0.5) if during else None,
        "during_p99_ms": 1000 * quantile(during, 0.99) if during else None,
        "between_p50_ms": 1000 * quantile(between, 0.5) if between else None,
        "between_p99_ms": 1000 * quantile(between, 0.99) if between else None,
        "during_polls": len(polling),
        "during_polls_max_ms": 1000 * max(polling) if polling else None,
        "during_cycles_over_100_ms": sum(lat > 0.1 for lat in during),
        "during_polls_over_100_ms": sum(lat > 0.1 for lat in polling),
    }


def metrics_figures(service: Service, client: httpx.Client, scrapes: int = 5) -> dict[str, Any]:
    times, text = [], ""
    for _ in range(scrapes):
        took, response = timed(lambda: client.get(f"{service.url}/metrics", timeout=120))
        response.raise_for_status()
        times.append(took)
        text = response.text
    series = [line for line in text.splitlines() if line and not line.startswith("#")]
    per_job = [line for line in series if line.startswith("planner_job_")]
    job_ids = {m.group(1) for line in per_job if (m := re.search(r'job_id="([^"]+)"', line))}
    forecast = [line for line in series if line.startswith("planner_queue_forecast_seconds")]
    return {
        "bytes": len(text.encode()),
        "series": len(series),
        "job_series": len(per_job),
        "jobs_with_series": len(job_ids),
        "scrape_median_s": statistics.median(times),
        "scrape_max_s": max(times),
        "forecast_s": float(forecast[0].rsplit(" ", 1)[1]) if forecast else None,
    }


def wait_for_forecast(
    service: Service, client: httpx.Client, *, after_s: float, timeout_s: float
) -> dict[str, float | None]:
    """Seconds the last queue forecast took in its worker process
    (``planner_queue_forecast_seconds`` of ``/metrics``: in a split service the API process
    reports what the ingest process last stored), waiting up to ``timeout_s`` for one: a
    forecast of 10,000 jobs can outlast the measured cycles, and its time is only known once
    the cycle after it collected it. ``{"seconds": ..., "waited_s": ...}``; seconds None:
    none had finished ``waited_s`` seconds after the service was ready (``after_s`` after its
    start, plus this wait)."""
    started = time.perf_counter()
    while True:
        response = client.get(f"{service.url}/metrics", timeout=120)
        response.raise_for_status()
        found = re.search(r"^planner_queue_forecast_seconds\{[^}]*\} (\S+)$", response.text, re.M)
        waited = time.perf_counter() - started
        if found is not None or waited >= timeout_s:
            return {
                "seconds": None if found is None else float(found.group(1)),
                "waited_s": waited,
                "after_ready_s": time.perf_counter() - service.started_s - after_s,
            }
        time.sleep(5.0)


def fetched_ids(cluster: Path) -> set[int]:
    """Slurm job ids whose batch script the fake's ``scontrol`` has printed so far."""
    path = cluster / "out" / "fetched.log"
    text = path.read_text() if path.exists() else ""
    return {int(word) for word in text.split() if word.isdigit()}


def wait_for_cycle(service: Service, *, timeout_s: float) -> None:
    """Until the service logs one more ingest cycle (or ``timeout_s`` passed)."""
    seen = len(service.cycles)
    deadline = time.perf_counter() + timeout_s
    while len(service.read_cycles()) == 0 and time.perf_counter() < deadline:
        time.sleep(0.5)
    if len(service.cycles) == seen:
        print(f"no ingest cycle within {timeout_s:.0f} s")


def listed_jobs(service: Service, client: httpx.Client, page: int = 1000) -> dict[str, Any]:
    """Every listed job's ``described_by`` and whether it has a prediction, by job id (pages of
    ``GET /v1/jobs?limit=page``)."""
    jobs: dict[str, Any] = {}
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": page, **({"cursor": cursor} if cursor else {})}
        response = client.get(f"{service.url}/v1/jobs", params=params, timeout=300)
        response.raise_for_status()
        body = response.json()
        for job in body["jobs"]:
            jobs[job["job_id"]] = {
                "described_by": job["described_by"],
                "predicted": job["prediction"] is not None,
                "running": job["status"] == "running",
            }
        cursor = body.get("next_cursor")
        if not cursor:
            return jobs


def expected_reader(style: str) -> str:
    """The ``described_by`` a job of the fake's launch ``style`` should get."""
    from benchmarks.fake_launches import STYLES  # noqa: PLC0415 - the fake's own module

    readers: dict[str, str | None] = {
        "scenario_file": "scenario_file",
        "megatron": "megatron",
        **STYLES,
    }
    return readers.get(style) or "none"


def launch_details(
    service: Service, client: httpx.Client, listed: dict[str, Any], per_reader: int = 5
) -> dict[str, list[int]]:
    """Per reader, of up to ``per_reader`` jobs it described (running jobs first): how many
    carry a ``launch_description`` in ``GET /v1/jobs/{id}``: ``{reader: [asked, with one]}``."""
    picked: dict[str, list[str]] = {}
    running_first = sorted(listed.items(), key=lambda kv: not kv[1]["running"])
    for job_id, seen in running_first:
        reader = seen["described_by"]
        if reader in ("none", "scenario_file"):
            continue
        if len(picked.setdefault(reader, [])) < per_reader:
            picked[reader].append(job_id)
    out: dict[str, list[int]] = {}
    for reader, ids in sorted(picked.items()):
        with_facts = 0
        for job_id in ids:
            response = client.get(f"{service.url}/v1/jobs/{job_id}", timeout=60)
            response.raise_for_status()
            with_facts += response.json().get("launch_description") is not None
        out[reader] = [len(ids), with_facts]
    return out


def style_shares(
    listed: dict[str, Any], styles: dict[str, Any], fetched: set[int]
) -> dict[str, dict[str, int]]:
    """Per launch style of the fake's jobs: jobs listed, jobs whose launch the service could
    read (a scenario file always; a batch script once ``scontrol`` printed it: the Slurm
    source fetches 50 per cycle), of those described by the expected reader, and with a
    prediction."""
    out: dict[str, dict[str, int]] = {}
    for job_id, seen in listed.items():
        entry = styles.get(job_id)
        if entry is None:
            continue
        style, slurm_job_id = entry
        row = out.setdefault(style, dict.fromkeys(("listed", "read", "described", "predicted"), 0))
        row["listed"] += 1
        if style != "scenario_file" and slurm_job_id not in fetched:
            continue
        row["read"] += 1
        row["described"] += seen["described_by"] == expected_reader(style)
        row["predicted"] += seen["predicted"]
    return out


# ---------------------------------------------------------------------------- the run


def run(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()
    hogs = start_hogs(args.hogs)
    try:
        return _run(args, hogs=len(hogs), load_before=load_before)
    finally:
        stop_hogs(hogs)


def _run(args: argparse.Namespace, *, hogs: int, load_before: tuple[float, ...]) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="planner-load-", dir="/tmp"))
    root.chmod(0o755)  # the fake users read their files as others: every directory searchable
    cluster = root / "cluster"
    options = {
        "jobs": args.jobs,
        "nodes": args.nodes,
        "gpus": args.gpus,
        "churn": args.churn,
        "seed": args.seed,
        "interval": args.interval,
    }
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    slurm = context.Process(target=fake_slurm, args=(str(cluster), options, child))
    slurm.start()
    populated = parent.recv()
    print(f"fake Slurm populated in {populated['populated_s']:.1f} s: {populated['summary']}")
    service = start_service(
        Path(args.src),
        root,
        cluster / "bin",
        cluster / "shared",
        args.interval,
        processes=args.processes,
    )
    result: dict[str, Any] = {
        "cluster": populated["summary"],
        "src": args.src,
        "processes": args.processes,
        "hogs": hogs,
        "load_before": list(load_before),
    }
    load = LoadAverage()
    listed: dict[str, Any] | None = None
    fetched: set[int] = set()
    try:
        with httpx.Client(timeout=60) as client:
            result["ready_s"] = wait_ready(service, client, args.ready_timeout)
            time.sleep(1.0)
            first = service.read_cycles()
            result["first_cycle"] = first[0] if first else None
            print(f"ready after {result['ready_s']:.1f} s; first cycle {result['first_cycle']}")
            result["pages"] = page_latencies(
                service, client, requests=args.requests, page=args.page, wait_s=0.5, load=load
            )
            print(f"pages: { ({k: v for k, v in result['pages'].items() if k != 'samples'}) }")
            # the cycle running at the last page (if one was) is logged at its end: only then
            # can the pages be told apart by cycle
            wait_for_cycle(service, timeout_s=args.interval * 4 + 60)
            deadline = time.perf_counter() + args.cycles * args.interval * 4 + 120
            while len(service.cycles) < 1 + args.cycles and time.perf_counter() < deadline:
                time.sleep(1.0)
                service.read_cycles()
                load.sample()
            result["load"] = load.figures()
            result["pages"].update(by_cycle(result["pages"].pop("samples"), service.cycles))
            result["metrics"] = metrics_figures(service, client)
            print(f"metrics: {result['metrics']}")
            took, every = timed(
                lambda: client.get(f"{service.url}/v1/jobs", params=UNPAGED, timeout=300)
            )
            every.raise_for_status()
            result["unpaged"] = {"seconds": took, "bytes": len(every.content)}
            # the scripts fetched so far are stored once the cycle now running has ended
            fetched = fetched_ids(cluster)
            wait_for_cycle(service, timeout_s=args.interval * 4 + 60)
            listed = listed_jobs(service, client)
            result["launch_details"] = launch_details(service, client, listed)
            service.read_cycles()
            result["forecast_s"] = wait_for_forecast(
                service, client, after_s=result["ready_s"], timeout_s=args.forecast_wait
            )
            service.read_cycles()
            result["cycles"] = service.cycles
            result["rss_mib"] = peak_rss_mib(service.proc.pid)
            result["worker_rss_mib"] = [peak_rss_mib(c) for c in children(service.proc.pid)]
    finally:
        service.proc.send_signal(signal.SIGTERM)
        try:
            service.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            service.proc.kill()
        parent.send("stop")
        done = parent.recv()
        slurm.join(timeout=30)
        result["changes"] = done["changes"]
        if listed is not None:
            result["styles"] = style_shares(listed, done["styles"], fetched)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"kept {root}")
    return result


def machine(load_before: list[float]) -> str:
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = Path("/proc/meminfo").read_text().split()[1]
    return (
        f"{os.cpu_count()} cores ({cpu}), {int(mem) / 1024**2:.0f} GiB, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}; "
        f"load average (1 min) before the run {load_before[0]:.2f}"
    )


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """The headline figures of a run."""
    cycles = result.get("cycles") or []
    steady = [c[1] for c in cycles[1:]]
    changes = result.get("changes") or []
    mean = {k: statistics.mean(c[k] for c in changes) for k in changes[0]} if changes else {}
    return {
        "first_cycle_s": cycles[0][1] if cycles else None,
        "steady_cycles": len(steady),
        "steady_median_s": statistics.median(steady) if steady else None,
        "steady_max_s": max(steady) if steady else None,
        "steady_p95_s": quantile(steady, 0.95) if steady else None,
        "steady_poll_median_s": statistics.median(c[2] for c in cycles[1:]) if steady else None,
        "steady_paused_median_s": (
            statistics.median(c[4] if len(c) > 4 else 0.0 for c in cycles[1:]) if steady else None
        ),
        "churn_per_change": mean,
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def markdown(result: dict[str, Any], command: str) -> str:
    s = summary(result)
    c, p, m = result["cluster"], result["pages"], result["metrics"]
    churn = s["churn_per_change"]
    steady = [f"{c[1]:.2f}" for c in result["cycles"][1:]]
    workers = ", ".join(f"{r:.0f}" for r in result["worker_rss_mib"] if r) or "-"
    rows = [
        ("first ingest cycle (empty store)", f"{s['first_cycle_s']:.2f} s", "< 20 s"),
        (
            f"steady ingest cycles, median / p95 / max of {s['steady_cycles']}",
            f"{s['steady_median_s']:.2f} s / {s['steady_p95_s']:.2f} s / {s['steady_max_s']:.2f} s",
            "p95 < 5 s",
        ),
        ("of which the Slurm poll (median)", f"{s['steady_poll_median_s']:.2f} s", "-"),
        ("queue forecast (worker process, the last one)", _forecast(result), "off the cycle"),
        (
            f"`GET /v1/jobs?limit={p['page']}`: p50 / p99 / max of {p['requests']}",
            f"{p['p50_ms']:.0f} / {p['p99_ms']:.0f} / {p['max_ms']:.0f} ms",
            "p99 < 150 ms",
        ),
        (
            f"the same, between cycles ({p['requests'] - p['during_cycles']}) / during a cycle "
            f"({p['during_cycles']}): p50, p99",
            f"{_ms(p['between_p50_ms'])}, {_ms(p['between_p99_ms'])} / "
            f"{_ms(p['during_p50_ms'])}, {_ms(p['during_p99_ms'])} ms",
            "-",
        ),
        ("its size (median)", f"{p['bytes_median'] / 1e3:.0f} kB", "-"),
        (
            "`GET /v1/jobs?limit=0` (unpaged)",
            f"{result['unpaged']['seconds']:.2f} s, {result['unpaged']['bytes'] / 1e6:.1f} MB",
            "-",
        ),
        ("`/metrics`", f"{m['bytes'] / 1e6:.2f} MB, {m['series']:,} series", "bounded"),
        (
            "of which per-job series / jobs with series",
            f"{m['job_series']:,} / {m['jobs_with_series']:,}",
            "-",
        ),
        (
            "`/metrics` scrape, median / max of 5",
            f"{m['scrape_median_s']:.2f} / {m['scrape_max_s']:.2f} s",
            "-",
        ),
        (
            "CPU hogs beside it / 1-min load average while measuring, mean / max",
            f"{result['hogs']} / {_load(result['load'])}",
            "-",
        ),
        (
            "peak RSS: service / its child processes (ingest, forecast worker)",
            f"{result['rss_mib'] or 0:.0f} MiB / {workers} MiB",
            "-",
        ),
    ]
    if s["steady_paused_median_s"]:  # checkouts whose ingest loop paused for API requests
        rows.insert(
            3,
            (
                "of which waiting for API requests (median)",
                f"{s['steady_paused_median_s']:.2f} s",
                "-",
            ),
        )
    table = "\n".join(f"| {a} | {b} | {t} |" for a, b, t in rows)
    styles = style_table(result.get("styles") or {}, result.get("launch_details") or {})
    return f"""# Load: {c["jobs"]:,} jobs, {c["nodes"]:,} nodes

`{command}` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {machine(result["load_before"])};
`service.processes: {result.get("processes", "single")}`.
The machine is shared with other sessions: wall times vary with their load.

**The cluster** (`benchmarks/fake_slurm.py`, its own process): {c["nodes"]} nodes,
{c["gpus_installed"]:,} GPUs installed; {c["jobs"]:,} active job records ({c["running"]:,}
running, {c["pending"]:,} pending of which {c["pending_arrays"]} arrays still pending as one
record), holding or asking for {c["gpus_queued"]:,} GPUs; {c["users"]} users;
{c["with_scenario"]:,} jobs name a scenario file, the others launch in the styles below (batch
scripts and config files in the jobs' working directories, `benchmarks/fake_launches.py`);
{c["logging"]:,} running jobs print Megatron-LM progress; `squeue --json` prints
{c["squeue_bytes"] / 1e6:.0f} MB. Each change
(every 15 s) ended {churn.get("ended", 0):.0f}, started {churn.get("started", 0):.0f},
submitted {churn.get("submitted", 0):.0f} and rescheduled {churn.get("rescheduled", 0):.0f}
jobs, and {churn.get("progressed", 0):.0f} running jobs printed progress (mean over
{len(result["changes"])} changes; {churn.get("seconds", 0):.2f} s of the fake's own CPU each).

| what | measured | target |
| --- | ---: | --- |
{table}

Steady cycles (s): {", ".join(steady)}. Ready (first cycle stored) {result["ready_s"]:.1f} s
after start. The page requests ran while the cycles did (one every 0.5 s).

**Launch styles**, at the end of the run (`described_by` of every job in `GET /v1/jobs`). A
batch script is read once `scontrol write batch_script` printed it: the Slurm source fetches
50 a cycle, so "launch read" counts the jobs whose script it had fetched (a scenario file is
read at once). "as expected": described by the style's reader (`none` for the plain style).

{styles}
"""


def _forecast(result: dict[str, Any]) -> str:
    forecast = result.get("forecast_s")
    if not isinstance(forecast, dict):  # a run recorded before the wait for it
        took = result["metrics"].get("forecast_s")
        return "-" if took is None else f"{took:.1f} s"
    if forecast["seconds"] is None:
        return f"none finished {forecast['after_ready_s']:.0f} s after ready"
    return f"{forecast['seconds']:.1f} s"


def _load(load: dict[str, Any]) -> str:
    if load.get("mean") is None:
        return "-"
    return f"{load['mean']:.2f} / {load['max']:.2f}"


def style_table(styles: dict[str, dict[str, int]], details: dict[str, list[int]]) -> str:
    """The launch styles' table: per style, jobs listed, launch read, described as expected
    and predicted; then the sampled job details."""
    lines = [
        "| style (reader) | jobs listed | launch read | described as expected | predicted |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    total = dict.fromkeys(("listed", "read", "described", "predicted"), 0)
    for style, row in sorted(styles.items(), key=lambda kv: -kv[1]["listed"]):
        for key in total:
            total[key] += row[key]
        share = f"{100 * row['described'] / row['read']:.1f} %" if row["read"] else "-"
        lines.append(
            f"| {style} ({expected_reader(style)}) | {row['listed']:,} | {row['read']:,} | "
            f"{row['described']:,} ({share}) | {row['predicted']:,} |"
        )
    share = f"{100 * total['described'] / total['read']:.1f} %" if total["read"] else "-"
    lines.append(
        f"| **all** | {total['listed']:,} | {total['read']:,} | {total['described']:,} ({share}) "
        f"| {total['predicted']:,} |"
    )
    sampled = ", ".join(f"{reader} {c[1]}/{c[0]}" for reader, c in sorted(details.items()))
    return "\n".join(lines) + (
        f"\n\n`GET /v1/jobs/{{id}}` of up to 5 jobs per reader, with a `launch_description`: "
        f"{sampled or '-'}."
    )


def results_path(hogs: int) -> Path:
    """Where ``--write`` puts the table: ``load.md``, or ``load_hogs{N}.md`` beside N hogs."""
    return RESULTS if hogs == 0 else RESULTS.with_name(f"load_hogs{hogs}.md")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", default=str(REPO), help="checkout whose planner serve runs")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=2_000)
    parser.add_argument(
        "--gpus", type=int, default=None, help="GPUs the jobs hold or ask for (default 10 a job)"
    )
    parser.add_argument("--churn", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--interval", type=float, default=15.0)
    parser.add_argument("--cycles", type=int, default=12, help="steady cycles to measure")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--page", type=int, default=100)
    parser.add_argument("--ready-timeout", type=float, default=3600.0)
    parser.add_argument(
        "--hogs", type=int, default=0, help="busy-loop processes running beside the service"
    )
    parser.add_argument(
        "--forecast-wait",
        type=float,
        default=180.0,
        help="seconds to wait at the end for a queue forecast to have finished",
    )
    parser.add_argument("--keep", action="store_true", help="keep the cluster and store")
    parser.add_argument(
        "--processes",
        choices=("single", "split"),
        default="split",
        help="service.processes of the service: split runs its ingest loop in a child process",
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help=f"write {RESULTS.name} (with --hogs N: {results_path(2).name} for N = 2)",
    )
    parser.add_argument("--json", help="also write the raw figures to this file")
    args = parser.parse_args(argv)
    if args.gpus is None:
        args.gpus = 10 * args.jobs
    result = run(args)
    print(json.dumps(summary(result), indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))
    if args.write:
        command = "python -m benchmarks.load " + " ".join(argv or sys.argv[1:])
        path = results_path(args.hogs)
        path.write_text(markdown(result, command.strip()))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
