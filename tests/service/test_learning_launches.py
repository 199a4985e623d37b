"""The service learns from jobs described by their launch (no scenario file): an HF Trainer job
and a torchtitan job read by their launch readers, run to the end with their own log lines,
become observed runs with the launch's scenario (an HF Trainer job also from the Trainer's
console output alone); a launch read only in part is kept as a skipped run that names the field
it lacks."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from planner.scenario.parse import parse_scenario
from planner.service.learning import learnt_of, model_fields
from planner.specs.job import JobState, JobStatus

from .conftest import Clock, JobFactory, ScriptedSource
from .test_learning_service import SLOWER, learn, predict, run_with_log
from .test_service import app_for, cycle, job_view

STEPS = 100
"""Optimizer steps every job of these tests runs (``--max_steps`` / ``--training.steps``)."""
EVERY = 5
"""Steps between two progress lines of a job's log."""


def mini_llama(root: Path, name: str, *, layers: int, hidden: int) -> Path:
    """A directory holding a made-up Llama-style ``config.json`` (the files
    ``--model_name_or_path`` names), world-readable as the job's files must be."""
    directory = root / "models" / name
    directory.mkdir(parents=True)
    for folder in (directory.parent, directory):
        folder.chmod(0o755)
    config = directory / "config.json"
    config.write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_act": "silu",
                "hidden_size": hidden,
                "intermediate_size": 4 * hidden,
                "num_hidden_layers": layers,
                "num_attention_heads": 8,
                "num_key_value_heads": 8,
                "max_position_embeddings": 2048,
                "vocab_size": 4096,
                "torch_dtype": "bfloat16",
            }
        )
    )
    config.chmod(0o644)
    return directory


def hf_script(model: Path, *, micro: int, accelerate: Path | None = None) -> str:
    """A batch script running a Trainer SFT script on the job's 2 GPUs, under torchrun or
    ``accelerate launch`` with ``accelerate``'s config file."""
    launcher = (
        "torchrun --nnodes 1 --nproc_per_node 2"
        if accelerate is None
        else f"accelerate launch --config_file {accelerate}"
    )
    return (
        "#!/bin/bash\n#SBATCH -N 1\n#SBATCH --gpus-per-node 2\n"
        f"srun {launcher} sft.py \\\n"
        f"  --model_name_or_path {model} --per_device_train_batch_size {micro} \\\n"
        f"  --gradient_accumulation_steps 2 --max_steps {STEPS} --bf16 --logging_steps {EVERY} "
        "--output_dir outputs/sft\n"
    )


def accelerate_config(root: Path) -> Path:
    """An accelerate config: plain DDP over one node's 2 processes, bf16."""
    path = root / "accelerate-ddp.yaml"
    path.write_text(
        "distributed_type: MULTI_GPU\nmixed_precision: bf16\nnum_machines: 1\nnum_processes: 2\n"
    )
    path.chmod(0o644)
    return path


def hf_log(start_s: float, step_s: float) -> str:
    """An HF Trainer job's log: the Trainer's summary, its description-less tqdm bar (not read
    beside step lines: ``adapters.logs.trainer``) and the JSON step lines a logging callback
    prints every ``EVERY`` steps, ``step_s`` apart (epoch-second time stamps)."""
    lines = [
        "[INFO|trainer.py:2369] >> ***** Running training *****",
        "[INFO|trainer.py:2376] >>   Gradient Accumulation steps = 2",
        f"[INFO|trainer.py:2377] >>   Total optimization steps = {STEPS}",
    ]
    for step in range(EVERY, STEPS + 1, EVERY):
        pct = 100 * step // STEPS
        lines.append(f"{pct:3d}%|##        | {step}/{STEPS} [00:10<01:30, {1 / step_s:.2f}it/s]")
        record = {"event": "step", "step": step, "max_steps": STEPS, "loss": 2.0}
        lines.append(json.dumps({**record, "time_s": start_s + step * step_s}))
    return "\n".join(lines) + "\n"


def hf_console_log(step_s: float, *, startup_s: float = 7.0) -> str:
    """An HF Trainer job's log holding only the Trainer's console output: its summary, then its
    training tqdm bar as a file holds it (a refresh after each optimizer step, carriage returns
    between them, ``elapsed`` truncated to the second as tqdm prints it, ``startup_s`` before
    the first step) and the ``{'loss': ...}`` dicts the Trainer writes every ``EVERY`` steps."""
    head = [
        "[INFO|trainer.py:2369] >> ***** Running training *****",
        "[INFO|trainer.py:2376] >>   Gradient Accumulation steps = 2",
        f"[INFO|trainer.py:2377] >>   Total optimization steps = {STEPS}",
    ]
    parts = ["\n".join(head) + "\n", f"\r  0%|          | 0/{STEPS} [00:00<?, ?it/s]"]
    for step in range(1, STEPS + 1):
        minutes, seconds = divmod(int(startup_s + step * step_s), 60)
        bar = "#" * (step * 10 // STEPS)
        parts.append(
            f"\r{step * 100 // STEPS:3d}%|{bar:<10}| {step}/{STEPS} "
            f"[{minutes:02d}:{seconds:02d}<00:10, {step_s:.2f}s/it]"
        )
        if step % EVERY == 0:
            parts.append(f"\n{{'loss': 2.0, 'learning_rate': 2e-05, 'epoch': {step / STEPS}}}\n")
    return "".join(parts) + "\n"


def titan_config(root: Path, flavor: str) -> Path:
    """A torchtitan job config (TOML) training llama3 ``flavor`` on the job's GPUs."""
    path = root / f"titan-{flavor}.toml"
    path.write_text(
        "[model]\n"
        'name = "llama3"\n'
        f'flavor = "{flavor}"\n\n'
        "[training]\n"
        "local_batch_size = 4\n"
        "seq_len = 2048\n"
        f"steps = {STEPS}\n\n"
        "[parallelism]\n"
        "data_parallel_shard_degree = -1\n"
    )
    path.chmod(0o644)
    return path


def titan_script(config: Path) -> str:
    return (
        "#!/bin/bash\n#SBATCH -N 1\n"
        "srun torchrun --nnodes 1 --nproc_per_node 2 -m torchtitan.train "
        f"--job.config_file {config}\n"
    )


def titan_log(start_s: float, step_s: float) -> str:
    """A torchtitan job's log: its logger's prefixed lines (local time with milliseconds, the
    zone the service reads them in), the start line, one step line every ``EVERY`` steps."""

    def stamp(t: float) -> str:
        printed = datetime.fromtimestamp(t).isoformat(sep=" ", timespec="milliseconds")
        return f"[titan] {printed.replace('.', ',')} - root - INFO - "

    lines = [stamp(start_s) + f"Training starts at step 1, total steps {STEPS}"]
    for step in range(EVERY, STEPS + 1, EVERY):
        lines.append(
            stamp(start_s + step * step_s)
            + f"step: {step:2d}  loss:  7.5000  memory: 12.00GiB(15.19%)  tps: 9,000  "
            "tflops: 100.00  mfu: 10.11%"
        )
    return "\n".join(lines) + "\n"


def launched_job(
    root: Path, make_job: JobFactory, clock: Clock, job_id: str, script: str
) -> tuple[JobState, Path]:
    """A job launched by ``script`` (no scenario file), and the log it writes."""
    log = root / f"job-{job_id}.out"
    job = make_job(
        job_id=job_id,
        batch_script=script,
        work_dir=str(root),
        stdout_path=str(log),
        start_time_s=clock.now,
        status=JobStatus.RUNNING,
    )
    return job, log


def model_step_s(client: TestClient, source: ScriptedSource, job: JobState) -> float:
    """The model's step time (s) for ``job`` as the service describes it while pending."""
    source.set_jobs(dataclasses.replace(job, status=JobStatus.PENDING, start_time_s=None))
    cycle(client)
    view = job_view(client, job.job_id)
    assert view["prediction"] is not None, view["launch_description"]
    return float(view["prediction"]["iteration_time_s"])


def stored_run(client: TestClient, job_id: str) -> Any:
    store = client.app.state.planner.store  # type: ignore[attr-defined]
    runs = [r for r in store.observed_runs("slurm", "test", limit=100) if r.job_id == job_id]
    runs += [
        r
        for r in store.observed_runs("slurm", "test", limit=100, skipped=True)
        if r.job_id == job_id
    ]
    assert len(runs) == 1, runs
    return runs[0]


def test_hf_trainer_jobs_teach_the_cluster_its_pace(
    cluster_root: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    """HF Trainer jobs (a torchrun or accelerate batch script naming a local model directory)
    run ``SLOWER`` times slower than the model. After the first one's fit, a queued job of the
    same kind keeps the online calibration's correction (one run gives no held-out error) and
    the API's prediction is the fit's, within a few per cent of that pace; after two more, the
    listed fit holds the three
    runs, its held-out error is a small part of the model's, and it corrects the queued job's
    model step to within a few per cent of the pace."""
    root = cluster_root
    accelerate = accelerate_config(cluster_root)
    shapes = [("a", 4, 512, 4, None), ("b", 6, 512, 2, accelerate), ("c", 4, 768, 4, None)]
    with app_for(db_url, source, clock, allowed_file_roots=[str(root)]) as client:
        model = mini_llama(root, "d", layers=5, hidden=640)
        new, _ = launched_job(root, make_job, clock, "9", hf_script(model, micro=2))
        queued = dataclasses.replace(new, status=JobStatus.PENDING, start_time_s=None)
        for job_id, (name, layers, hidden, micro, launcher) in enumerate(shapes, start=1):
            model = mini_llama(root, name, layers=layers, hidden=hidden)
            script = hf_script(model, micro=micro, accelerate=launcher)
            job, log = launched_job(root, make_job, clock, str(job_id), script)
            step_s = SLOWER * model_step_s(client, source, job)
            run_with_log(client, source, clock, job, log, hf_log(clock.now, step_s))
            view = job_view(client, str(job_id))
            assert view["described_by"] == "hf_trainer"
            gpus_from = view["launch_description"]["provenance"]["hardware.num_gpus"]
            assert gpus_from.startswith("launch: torchrun" if launcher is None else launcher.name)
            assert view["eta"]["observed_step_time_s"] == pytest.approx(step_s, rel=0.02)
            run = stored_run(client, str(job_id))
            assert run.skip_reason is None
            assert run.scenario == view["scenario"]  # the launch's own description
            assert run.iteration_time_s == pytest.approx(step_s, rel=0.02)
            assert run.num_iterations == STEPS
            clock.now += 60
            if job_id > 1:
                continue
            source.set_jobs(queued)
            cycle(client)  # queued before the fit: the online calibration's prediction
            before = job_view(client, "9")["prediction"]
            assert before["calibration"]["method"] != "observed_runs"
            assert learn(client) == {"slurm/test": "ok"}
            clock.now += 30
            cycle(client)
            # one run gives the fit no held-out error to show it does better than the online
            # correction, which learnt the pace from the run's steps: the queued job keeps it
            after = job_view(client, "9")["prediction"]
            assert after["calibration"]["method"] == "step"
            pace_s = SLOWER * after["iteration_time_s"]
            assert after["calibrated_iteration_time_s"] == pytest.approx(pace_s, rel=0.02)
            # the API's predictions of the launch's scenario, which the online calibration
            # does not correct, take the fit: one run moves its key most of the way from the
            # model's step to the pace (the prior's shrinkage keeps it short of it)
            scenario = job_view(client, "9")["scenario"]
            from_api = predict(client, scenario)
            assert from_api["calibration"]["method"] == "observed_runs"
            assert from_api["calibration"]["num_jobs"] == 1
            assert from_api["calibrated_iteration_time_s"] == pytest.approx(pace_s, rel=0.05)

        assert learn(client) == {"slurm/test": "ok"}
        (listing,) = client.get("/v1/calibrations").json()["learnt"]
        assert (listing["scheduler"], listing["cluster"]) == ("slurm", "test")
        assert listing["num_runs"] == len(shapes)
        assert listing["skipped"] == []
        (key,) = listing["keys"]
        assert (key["gpu"], key["num_runs"]) == ("h100-sxm", len(shapes))
        assert listing["held_out_error_ratio"] < 0.05 < 0.6 < listing["model_error_ratio"]
        store = client.app.state.planner.store  # type: ignore[attr-defined]
        learnt = learnt_of(store.calibration("observed/slurm/test"))
        assert learnt is not None
        prediction = job_view(client, "9")["prediction"]
        corrected = learnt.calibration.apply(
            model_fields(prediction), parse_scenario(scenario), cluster="test"
        )
        assert corrected["calibrated_iteration_time_s"] == pytest.approx(
            SLOWER * prediction["iteration_time_s"], rel=0.05
        )


def test_a_torchtitan_job_is_kept_with_its_launch_scenario_and_step_time(
    cluster_root: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    """A torchtitan job (TOML config naming a flavor of the catalog) whose log prints time
    stamps and no step time: its step time is the wall clock between its step lines."""
    root = cluster_root
    job, log = launched_job(
        root, make_job, clock, "1", titan_script(titan_config(root, "debugmodel"))
    )
    with app_for(db_url, source, clock, allowed_file_roots=[str(root)]) as client:
        step_s = SLOWER * model_step_s(client, source, job)
        run_with_log(client, source, clock, job, log, titan_log(clock.now, step_s))
        view = job_view(client, "1")
        assert view["described_by"] == "torchtitan"
        run = stored_run(client, "1")
        assert run.skip_reason is None
        assert run.scenario == view["scenario"]
        assert run.scenario["model"]["num_layers"] == 6  # debugmodel's, from the catalog
        assert run.iteration_time_s == pytest.approx(step_s, rel=0.02)
        assert run.gpu == "h100-sxm"
        assert learn(client) == {"slurm/test": "ok"}
        (listing,) = client.get("/v1/calibrations").json()["learnt"]
        assert listing["num_runs"] == 1


@pytest.mark.parametrize(
    ("flavor", "gpu_type", "field"),
    [("9000B", "h100", "model.num_layers"), ("debugmodel", "zz9000", "hardware.gpu")],
)
def test_a_launch_read_in_part_is_a_skipped_run_naming_the_field(
    flavor: str,
    gpu_type: str,
    field: str,
    cluster_root: Path,
    db_url: str,
    source: ScriptedSource,
    clock: Clock,
    make_job: JobFactory,
) -> None:
    """A torchtitan job naming a flavor the catalog does not know, or allocated a GPU type it
    does not know, is described without that field: it runs and ends like any job, and is kept
    as a skipped run naming the field; the fit of the cluster's other runs goes on."""
    root = cluster_root
    good, good_log = launched_job(
        root, make_job, clock, "1", titan_script(titan_config(root, "debugmodel"))
    )
    partial, partial_log = launched_job(
        root, make_job, clock, "2", titan_script(titan_config(root, flavor))
    )
    with app_for(db_url, source, clock, allowed_file_roots=[str(root)]) as client:
        step_s = SLOWER * model_step_s(client, source, good)
        run_with_log(client, source, clock, good, good_log, titan_log(clock.now, step_s))
        clock.now += 60
        partial = dataclasses.replace(partial, start_time_s=clock.now, gpu_type=gpu_type)
        run_with_log(client, source, clock, partial, partial_log, titan_log(clock.now, step_s))
        view = job_view(client, "2")
        assert view["described_by"] == "torchtitan"
        assert view["prediction"] is None
        assert field in view["launch_description"]["unknown"]
        assert view["eta"]["observed_step_time_s"] == pytest.approx(step_s, rel=0.02)

        run = stored_run(client, "2")
        assert run.skip_reason is not None
        assert run.skip_reason.startswith(f"{field}:"), run.skip_reason
        assert learn(client) == {"slurm/test": "ok"}
        (listing,) = client.get("/v1/calibrations").json()["learnt"]
        assert listing["num_runs"] == 1
        assert listing["applied"]
        (skipped,) = listing["skipped"]
        assert skipped == {"job_id": "2", "reason": run.skip_reason}


def test_an_hf_trainer_job_with_only_its_console_output_is_learnt_from(
    cluster_root: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    """An HF Trainer job whose log holds only what the Trainer prints (its summary and its
    training bar, no step lines of its own) ends as a usable observed run: its step time is
    the one the bar's elapsed field gives, its iterations the bar's count."""
    root = cluster_root
    model = mini_llama(root, "console", layers=24, hidden=3072)
    job, log = launched_job(root, make_job, clock, "1", hf_script(model, micro=4))
    with app_for(db_url, source, clock, allowed_file_roots=[str(root)]) as client:
        step_s = SLOWER * model_step_s(client, source, job)
        assert step_s * STEPS > 10 * 10  # the bar spans ten of its shortest timed spans
        run_with_log(client, source, clock, job, log, hf_console_log(step_s))
        view = job_view(client, "1")
        assert view["described_by"] == "hf_trainer"
        assert view["eta"]["observed_step_time_s"] == pytest.approx(step_s, rel=0.02)
        run = stored_run(client, "1")
        assert run.skip_reason is None
        assert run.scenario == view["scenario"]
        assert run.iteration_time_s == pytest.approx(step_s, rel=0.02)
        assert run.num_iterations == STEPS
        assert learn(client) == {"slurm/test": "ok"}
        (listing,) = client.get("/v1/calibrations").json()["learnt"]
        assert listing["num_runs"] == 1
