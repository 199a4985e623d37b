"""Jobs launched the torchtitan way and the HF accelerate way, described from their launch alone.

On the dev Slurm (the ``slurm_stack`` fixture), a real ``planner serve`` watches two real jobs
that carry no ``planner:scenario=`` comment (``deploy/dev/launch_styles``: a torchtitan
``run_train.sh`` + TOML job config and an ``accelerate launch`` of a Trainer-style script on a
local model directory; both train on CPU, 2 processes each, behind fake H100 GRES). Each job is
submitted held, so the planner describes it while it is pending, then released. For each:

* ``described_by`` names the reader (``torchtitan``, ``hf_trainer``); the scenario's model shape,
  batch, parallelism and steps are the launch's, and where the provenance cites ``file:line``
  that line of the job's file holds the value;
* the GRES type ``h100`` maps to ``h100-sxm`` and a prediction exists (``iteration_time_s`` > 0);
* ``progress.train_iters`` is the launch's step count before the job logged anything;
* a pending job gets the ETA prior (the model's step time x the launch's steps), and a started
  job shows an ETA from the planner's first look at it;
* once the job logged progress, its ETA while it ran (kept in the job's ETA history) used the
  step times it observed, and those lie within what the job itself measured (its own printed
  time stamps), whatever the load of the machine;
* at the end the planner's progress is the job's last logged step, and every step time it
  stored is the one the job's own stamps give.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_end_to_end import (
    Service,
    finite_band,
    service_env,
    start_service,
    wait_until,
)
from tests.slurm_stack import SlurmStack, SubmittedJobs

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
STYLES = ROOT / "deploy" / "dev" / "launch_styles"
RANK_LOGS = "torchrun-logs"
"""Where torchrun keeps each rank's output (``PET_LOG_DIR``), under the test's directory."""
STAMP_TOLERANCE_S = 0.0015
"""Two readings of the same printed millisecond stamps agree to this (rounding only)."""


@dataclass(frozen=True)
class Cited:
    """The provenance cites ``file:line`` and that line of the job's file holds ``text``."""

    text: str


@dataclass(frozen=True)
class Said:
    """The provenance holds ``text`` (an override, a catalog entry, a derivation)."""

    text: str


Expected = dict[str, tuple[object, Cited | Said]]
"""Dotted scenario field -> (value, where it must come from)."""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TITAN_STEP = re.compile(
    r"\[titan\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) .*?\bstep:\s*(\d+)\s+loss:"
)
_TITAN_START = re.compile(
    r"\[titan\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) .*?Training starts at step (\d+)"
)


def titan_stamps(text: str) -> dict[int, float]:
    """Step -> the time the torchtitan stand-in printed on its step line (its logger's
    ``asctime``: local time, to the millisecond); its ``Training starts at step S`` line is the
    stamp of step S - 1 (where the first step's time is measured from)."""
    stamps: dict[int, float] = {}
    for line in _ANSI.sub("", text).splitlines():
        m = _TITAN_STEP.search(line)
        start = _TITAN_START.search(line) if m is None else None
        if m is not None:
            step = int(m[3])
        elif start is not None:
            m, step = start, int(start[3]) - 1
        else:
            continue
        when = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S").timestamp()
        stamps[step] = when + int(m[2]) / 1000.0
    return stamps


def json_stamps(text: str) -> dict[int, float]:
    """Step -> ``time_s`` of the accelerate job's JSON log lines (after the tqdm bar's text
    where stdout and stderr share the file)."""
    stamps: dict[int, float] = {}
    for line in text.replace("\r", "\n").splitlines():
        start = line.find('{"event": "step"')
        if start >= 0:
            event = json.loads(line[start:])
            stamps[int(event["step"])] = float(event["time_s"])
    return stamps


@dataclass(frozen=True)
class Style:
    """One launch style: its directory under deploy/dev/launch_styles, the reader that must
    recognise it, its job name, steps, what the planner must read and how to read the job's
    own step stamps from its log."""

    directory: str
    reader: str
    job_name: str
    train_iters: int
    expected: Expected
    stamps: Callable[[str], dict[int, float]]


TORCHTITAN = Style(
    directory="torchtitan",
    reader="torchtitan",
    job_name="titan-debug",
    train_iters=30,
    expected={
        "model.num_layers": (6, Said("catalog:torchtitan llama3/debugmodel")),
        "model.hidden_size": (256, Said("catalog:torchtitan llama3/debugmodel")),
        "model.num_attention_heads": (16, Said("catalog:torchtitan llama3/debugmodel")),
        "model.ffn_hidden_size": (768, Said("catalog:torchtitan llama3/debugmodel")),
        "model.vocab_size": (2048, Said("catalog:torchtitan llama3/debugmodel")),
        "model.seq_length": (64, Cited("seq_len = 64")),
        "parallelism.micro_batch_size": (2, Cited("local_batch_size = 2")),
        "parallelism.tensor_parallel": (1, Cited("tensor_parallel_degree = 1")),
        "parallelism.pipeline_parallel": (1, Cited("pipeline_parallel_degree = 1")),
        "parallelism.data_parallel": (2, Said("data_parallel_shard_degree -1")),
        "parallelism.global_batch_size": (4, Said("local_batch_size x data parallel")),
        "parallelism.zero_stage": (3, Said("FSDP2")),
        "parallelism.recompute": ("none", Cited('mode = "none"')),
        "hardware.num_gpus": (2, Cited("torchrun --nproc_per_node=${NGPU}")),
        "training.train_iters": (30, Cited("steps = 30")),
        "launch.model_name": ("llama3 debugmodel", Cited('name = "llama3"')),
    },
    stamps=titan_stamps,
)
ACCELERATE = Style(
    directory="accelerate",
    reader="hf_trainer",
    job_name="hf-accelerate",
    train_iters=30,
    expected={
        "model.num_layers": (2, Cited('"num_hidden_layers": 2')),
        "model.hidden_size": (128, Cited('"hidden_size": 128')),
        "model.num_attention_heads": (4, Cited('"num_attention_heads": 4')),
        "model.ffn_hidden_size": (384, Cited('"intermediate_size": 384')),
        "model.vocab_size": (1024, Cited('"vocab_size": 1024')),
        "model.seq_length": (128, Said("override: --block_size 128")),
        "parallelism.micro_batch_size": (4, Said("override: --per_device_train_batch_size 4")),
        "launch.gradient_accumulation": (2, Said("override: --gradient_accumulation_steps 2")),
        "parallelism.data_parallel": (2, Said("derived:")),
        "parallelism.global_batch_size": (16, Said("gradient accumulation x data parallel")),
        "parallelism.zero_stage": (0, Said("DDP")),
        "parallelism.precision": ("bf16", Cited("mixed_precision: bf16")),
        "hardware.num_gpus": (2, Said("--num_processes 2")),
        "training.train_iters": (30, Said("override: --max_steps 30")),
        "launch.model_name": ("./tiny-model", Said("--model_name_or_path ./tiny-model")),
    },
    stamps=json_stamps,
)


@pytest.fixture(scope="module")
def service(slurm_stack: SlurmStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A `planner serve` of its own on the dev Slurm (no hints: the jobs' limits stay theirs)."""
    env = service_env(
        slurm_stack,
        tmp_path_factory,
        "launch-styles-state",
        PLANNER_SLURM__COMMAND_TIMEOUT_S="5",
        PLANNER_INGEST_INTERVAL_S="1",  # several looks at each job while it trains
    )
    svc = start_service(env, tmp_path_factory.mktemp("launch-styles-log") / "serve.log")
    try:
        yield svc
    finally:
        svc.stop()
        if os.environ.get("CI"):
            print(f"\n--- planner serve log (tail) ---\n{svc.log_text()[-4000:]}")


def submit_held(style: Style, env: dict[str, str], out_dir: Path) -> str:
    """sbatch the style's job.sbatch from its directory, held, with no planner comment; the
    job's output goes to ``out_dir``. Returns the job id."""
    result = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--hold",
            f"--output={out_dir}/{style.job_name}-%j.out",
            f"--chdir={STYLES / style.directory}",
            "job.sbatch",
        ],
        env={**env, "PLANNER_PYTHON": sys.executable, "PET_LOG_DIR": str(out_dir / RANK_LOGS)},
        cwd=STYLES / style.directory,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().split(";")[0]


def job_output(log: Path, ranks: Path) -> str:
    """The job's log tail and each rank's own output tails where torchrun kept them
    (``PET_LOG_DIR``: the job's log holds rank 0's lines only), without colour codes."""
    parts = [f"--- {log.name} (tail) ---", *log.read_text(errors="replace").splitlines()[-40:]]
    for path in sorted(ranks.rglob("*.log")):
        lines = path.read_text(errors="replace").splitlines()[-20:]
        parts += [f"--- {path.relative_to(ranks)} (tail) ---", *lines]
    return _ANSI.sub("", "\n".join(parts))


def cited_line(style: Style, source: str) -> str | None:
    """The line of the job's file that ``source`` (``[dir/]name:line``) cites, or None when
    the source cites no file of the job's directory."""
    m = re.search(r"([\w./-]+):(\d+)\b", source)
    if m is None:
        return None
    name, number = Path(m[1]).name, int(m[2])
    files = [p for p in (STYLES / style.directory).rglob(name) if m[1].lstrip("./") in str(p)]
    if len(files) != 1:
        return None
    lines = files[0].read_text().splitlines()
    return lines[number - 1] if 0 < number <= len(lines) else None


def field_value(job: dict[str, Any], field: str) -> object:
    section, _, key = field.partition(".")
    if section == "launch":
        return job["launch_description"]["launch"].get(key)
    return job["scenario"].get(section, {}).get(key)


def check_description(style: Style, job: dict[str, Any]) -> None:
    """What the planner read of the launch (module docstring)."""
    assert job["described_by"] == style.reader, (job["described_by"], job["description"])
    described = job["launch_description"]
    provenance = described["provenance"]
    assert described["unknown"] == [], described
    for field, (value, source) in style.expected.items():
        assert field_value(job, field) == value, (field, field_value(job, field), described)
        said = provenance.get(field, "")
        if isinstance(source, Said):
            assert source.text in said, (field, said)
        else:
            line = cited_line(style, said)
            assert line is not None, (field, said)
            assert source.text in line, (field, said, line)
    assert job["scenario"]["hardware"]["gpu"] == "h100-sxm"
    assert job["gpu_type"] == "h100"
    assert job["num_gpus"] == 2
    assert job["prediction"]["iteration_time_s"] > 0
    assert job["progress"]["train_iters"] == style.train_iters


def check_prior(style: Style, job: dict[str, Any]) -> None:
    """The ETA of the pending job: the model's step time over the launch's steps (the
    calibrated one where the cluster's finished jobs calibrated it)."""
    eta = job["eta"]
    assert eta["method"] == "prior", eta
    assert eta["iteration"] is None, eta
    assert eta["num_observations"] == 0, eta
    assert eta["train_iters"] == style.train_iters
    prediction = job["prediction"]
    calibrated = (prediction.get("calibration") or {}).get("level") not in (None, "none")
    model_s = prediction["calibrated_iteration_time_s" if calibrated else "iteration_time_s"]
    step_s = model_s * eta["straggler_factor"]
    assert math.isclose(eta["prior_step_time_s"], step_s, rel_tol=1e-9), (eta, step_s)
    remaining = eta["remaining_s"]
    assert 0 < remaining["p10"] <= style.train_iters * step_s <= remaining["p90"], eta


def paces(stamps: dict[int, float], until: int) -> list[float]:
    """The job's own wall time per step between its successive logged steps up to ``until``."""
    steps = sorted(i for i in stamps if i <= until)
    return [(stamps[b] - stamps[a]) / (b - a) for a, b in itertools.pairwise(steps)]


@pytest.mark.timeout(900)  # a busy machine (a CPU hog beside it) runs the jobs slower
def test_torchtitan_and_accelerate_jobs_are_described_from_their_launch(
    service: Service,
    slurm_stack: SlurmStack,
    slurm_jobs: SubmittedJobs,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    wait_until("first ingest cycle", 60, lambda: service.get("/readyz").status_code == 200)
    tmp_path.chmod(0o777)
    styles = (TORCHTITAN, ACCELERATE)
    ids = {s.directory: slurm_jobs.add(submit_held(s, service.env, tmp_path)) for s in styles}

    # Pending (held): described from the launch, predicted, an ETA prior.
    for style in styles:
        job_id = ids[style.directory]

        def described(job_id: str = job_id) -> dict[str, Any] | None:
            job = service.job(job_id)
            return job if job["eta"] is not None else None

        pending = wait_until(f"{style.directory} job {job_id} described", 60, described)
        assert pending["status"] == "pending", pending["status"]
        assert pending["progress"]["iteration"] is None
        check_description(style, pending)
        check_prior(style, pending)

    slurm_stack.run("scontrol", "release", *ids.values())

    # Started: an ETA from the first look at the running job (the prior until progress).
    for style in styles:
        job_id = ids[style.directory]

        def running(job_id: str = job_id) -> dict[str, Any] | None:
            job = service.job(job_id)
            return job if job["status"] == "running" and job["eta"] is not None else None

        started = wait_until(f"{style.directory} job {job_id} running", 120, running)
        eta = started["eta"]
        assert eta["train_iters"] == style.train_iters, eta
        if not eta["num_observations"]:
            assert eta["method"] == "prior", eta

    # Ended: judged against what each job measured itself.
    figures: dict[str, Any] = {"load_average": round(os.getloadavg()[0], 2)}
    for style in styles:
        job_id = ids[style.directory]

        def ended(job_id: str = job_id) -> dict[str, Any] | None:
            job = service.job(job_id)
            return job if not job["active"] else None

        final = wait_until(f"{style.directory} job {job_id} to end", 300, ended)
        log = tmp_path / f"{style.job_name}-{job_id}.out"
        if final["status"] != "completed":
            print(job_output(log, tmp_path / RANK_LOGS))
        assert final["status"] == "completed", final["status"]
        stamps = style.stamps(log.read_text(errors="replace"))
        assert max(stamps) == style.train_iters, sorted(stamps)
        assert final["progress"]["iteration"] == style.train_iters
        assert final["progress"]["train_iters"] == style.train_iters
        assert final["described_by"] == style.reader

        # While the job ran, once it had logged progress, its ETA (as /v1/jobs/{id} showed it,
        # kept in the ETA history) used the step times it observed, and those lie within the
        # job's own paces up to that step, whatever the load.
        progressed = [
            e
            for e in final["eta_history"]
            if 0 < (e["iteration"] or 0) < style.train_iters and e["num_observations"] > 0
        ]
        assert progressed, final["eta_history"]
        for eta in progressed:
            iteration = eta["iteration"]
            assert eta["method"] not in ("prior", "done"), eta
            assert eta["train_iters"] == style.train_iters, eta
            assert math.isclose(eta["progress_ratio"], iteration / style.train_iters), eta
            assert finite_band(eta), eta
            assert iteration in stamps, (iteration, sorted(stamps))
            own = paces(stamps, iteration)
            assert min(own) * 0.99 <= eta["observed_step_time_s"] <= max(own) * 1.01, (eta, own)

        # Every stored step time is the job's own stamps' difference.
        matched = 0
        for sample in final["samples"]:
            end, n = sample["iteration"], sample["num_iterations"]
            if end in stamps and end - n in stamps:
                measured = (stamps[end] - stamps[end - n]) / n
                assert abs(sample["step_time_s"] - measured) <= STAMP_TOLERANCE_S, (
                    sample,
                    measured,
                )
                matched += 1
        assert matched >= len(stamps) // 2, (matched, final["samples"], stamps)

        own = paces(stamps, style.train_iters)
        first = progressed[0]
        figures[style.directory] = {
            "job_id": job_id,
            "job_elapsed_s": final["end_time_s"] - final["start_time_s"],
            "job_train_s": round(stamps[max(stamps)] - stamps[min(stamps)], 2),
            "job_pace_s": round(sum(own) / len(own), 4),
            "predicted_step_s": final["prediction"]["iteration_time_s"],
            "etas_with_progress": len(progressed),
            "first_eta_with_progress": {
                "iteration": first["iteration"],
                "method": first["method"],
                "observed_step_s": round(first["observed_step_time_s"], 4),
            },
            "samples_matched": matched,
        }
    with capsys.disabled():
        print(f"\nlaunch-style figures: {json.dumps(figures, sort_keys=True)}")
