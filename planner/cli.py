"""The ``planner`` command (typer).

``planner predict FILE... [--json]``  predict scenarios (YAML, JSON, JSONL batches); exit 2 when
                                      any scenario was invalid, each getting an error line.
``planner explore FILE... [--json]``  search every valid layout: top-k, Pareto front, counts;
                                      exit 2 when a scenario was invalid or infeasible.
``planner recommend FILE... [--json]`` GPU count/type for a token budget and deadline; exit 2
                                      when invalid or the deadline cannot be met.
``planner serve``                     run the service (settings: ``PLANNER_*`` environment,
                                      optional YAML file in ``PLANNER_CONFIG_FILE``).
``planner calibrate sample|fit|show`` sample operators on this machine, fit
                                      per-operator models, show a calibration.
``planner calibrate observe RUNS``    learn corrections from measured runs (JSON lines) for
                                      ``planner predict --calibration``.
``planner describe LAUNCH``           what a batch script, command line or Kubernetes manifest
                                      trains, each value with its source, and the prediction
                                      (``planner.describe_cli``).
``planner eta replay LOG``            replay a finished job's log: the ETA at each point and
                                      its errors (``planner.eta_cli``).
``planner demo``                      local Slurm, a real PyTorch job, the planner watching it
                                      (``planner.demo_cli``).
``planner version``                   print the version.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from planner import __version__
from planner.demo_cli import demo
from planner.describe_cli import describe
from planner.errors import PlannerError, SpecError
from planner.eta_cli import eta_app
from planner.review_cli import review

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="LLM capacity planner: predict LLM training step time, memory, MFU and ETA.",
)

EXIT_INVALID = 2
app.command()(review)
app.add_typer(eta_app, name="eta")
app.command()(demo)
app.command()(describe)


def _documents(path: str) -> list[object]:
    """Raw documents of one input file (``-`` is standard input, read as YAML); a file that
    cannot be read or parsed gives one ``SpecError`` instance (``planner.cli_input``)."""
    from planner.cli_input import input_documents

    return input_documents(path)


def read_input_text(path: str) -> str:
    """The UTF-8 text of an input file, bounded; raises ``SpecError`` (``planner.cli_input``)."""
    from planner.cli_input import read_input_text as read

    return read(path)


def _human(result: dict[str, Any]) -> str:
    name = result.get("name") or "(unnamed)"
    if "error" in result:
        return f"{name}: INVALID {result['error']}"
    gib = result["memory_per_gpu_bytes"] / 2**30
    fits = "fits" if result["fits_in_memory"] else "DOES NOT FIT"
    line = (
        f"{name}: iteration {result['iteration_time_s']:.3f} s, "
        f"{result['tokens_per_s']:,.0f} tokens/s ({result['tokens_per_s_per_gpu']:,.1f}/GPU), "
        f"MFU {100 * result['mfu']:.1f}%, memory {gib:.1f} GiB/GPU ({fits})"
    )
    if result.get("time_to_train_s") is not None:
        line += f", time to train {result['time_to_train_s'] / 86400:.2f} days"
    breakdown = ", ".join(f"{k} {v:.3f}" for k, v in result.get("breakdown_s", {}).items())
    line = f"{line}\n  breakdown (s): {breakdown}"
    calibrated = result.get("calibration")
    if isinstance(calibrated, dict) and calibrated.get("method") == "observed_runs":
        line += (
            f"\n  calibrated from observed runs: iteration "
            f"{result['calibrated_iteration_time_s']:.3f} s (x{calibrated['factor']:.3f}, "
            f"log-sd {calibrated['log_sd']:.3f}, learnt at level {calibrated['level']} from "
            f"{calibrated['num_jobs']} runs)"
        )
    return line


@app.command()
def predict(
    files: Annotated[
        list[str], typer.Argument(help="Scenario files (.yaml, .json, .jsonl; - = stdin)")
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per scenario, one per line")
    ] = False,
    calibration: Annotated[
        str | None,
        typer.Option(
            "--calibration",
            help="A calibration file: operator models from `planner calibrate fit` (used "
            "instead of the analytic efficiency model, for scenarios on --device-key), or "
            "corrections learnt from observed runs by `planner calibrate observe` (adds the "
            "calibrated_* fields); the file's content tells which",
        ),
    ] = None,
    device_key: Annotated[
        str, typer.Option("--device-key", help="Catalog GPU key of the calibrated device")
    ] = "h100-sxm",
    cluster: Annotated[
        str,
        typer.Option("--cluster", help="Cluster the jobs run on (observed-runs calibration)"),
    ] = "",
) -> None:
    """Predict iteration time, throughput, MFU and memory of each scenario, in input order."""
    from planner.calibration.files import load_calibration_file
    from planner.scenario import predict_documents

    efficiency = None
    observed = None
    if calibration is not None:
        try:
            efficiency, observed = load_calibration_file(
                read_input_text(calibration), source=calibration, device_key=device_key
            )
        except PlannerError as exc:
            typer.echo(f"planner: --calibration: {exc}", err=True)
            raise typer.Exit(EXIT_INVALID) from None
        if observed is not None:
            for warning in observed.stale_warnings():
                typer.echo(f"planner: --calibration: {warning}", err=True)
    docs: list[object] = []
    for path in files:
        docs.extend(_documents(path))
    results = predict_documents(docs, efficiency=efficiency, calibration=observed, cluster=cluster)
    for result in results:
        typer.echo(json.dumps(result) if as_json else _human(result))
    if any("error" in r for r in results):
        raise typer.Exit(EXIT_INVALID)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (PLANNER_HOST)")] = None,
    port: Annotated[int | None, typer.Option(help="Port (PLANNER_PORT)")] = None,
    read_only: Annotated[
        bool,
        typer.Option(
            "--read-only",
            help="Refuse state-changing requests (403) and write nothing to the schedulers "
            "(PLANNER_READ_ONLY)",
        ),
    ] = False,
) -> None:
    """Run the planner service: ingest loops, HTTP API and /metrics."""
    from planner.service.log_format import configure_logging
    from planner.service.main import serve as run_service
    from planner.service.settings import load_settings

    overrides: dict[str, Any] = {}
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    if read_only:
        overrides["read_only"] = True
    try:
        settings = load_settings(**overrides)
    except SpecError as exc:
        typer.echo(f"planner: invalid setting: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None
    # one record per line, control characters escaped, query-string tokens redacted
    configure_logging(settings.log_level)
    # Per-cycle chatter of the libraries stays out of the log unless asked for with DEBUG.
    if settings.log_level.upper() != "DEBUG":
        for noisy in ("apscheduler", "alembic"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        run_service(settings)
    except PlannerError as exc:
        typer.echo(f"planner: cannot start: {exc}", err=True)
        raise typer.Exit(1) from None


def _straggler_summary(result: dict[str, Any]) -> str:
    lines = [result["explanation"]]
    lines.append(
        f"  actual {result['actual_step_time_s']:.3f} s/step, ideal "
        f"{result['ideal_step_time_s']:.3f} s/step, launch slowdown "
        f"{result['launch_slowdown']:.3f}x, replay error "
        f"{100 * result['reproduction_error_ratio']:.2g}%"
    )
    stages = ", ".join(f"{k}: {v:.3f}" for k, v in result["by_stage"].items())
    lines.append(f"  by stage: {stages}")
    top = sorted(result["by_worker"], key=lambda w: -w["slowdown"])[:5]
    workers = ", ".join(f"dp{w['dp_rank']}/pp{w['stage']}: {w['slowdown']:.3f}" for w in top)
    lines.append(f"  top workers: {workers}")
    return "\n".join(lines)


@app.command()
def stragglers(
    trace: Annotated[str, typer.Argument(help="Per-rank operation trace (.parquet or .csv)")],
    meta: Annotated[str, typer.Option("--meta", help="Job layout (meta YAML: dp_size, ...)")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON")] = False,
    skip_bad_rows: Annotated[
        bool, typer.Option("--skip-bad-rows", help="Drop malformed rows (counted) instead")
    ] = False,
    memory_budget_gib: Annotated[
        float,
        typer.Option(
            "--memory-budget-gib",
            help="Refuse traces whose analysis would need more memory (planner.stragglers.budget)",
        ),
    ] = 2.0,
) -> None:
    """What-if straggler analysis of a trace: slowdown, attribution and diagnosis."""
    from planner.stragglers import analyse
    from planner.stragglers.budget import check_rows, max_rows
    from planner.wiring import read_trace

    budget = int(memory_budget_gib * 1024**3)
    try:
        check_rows(0, budget)
        loaded = read_trace(trace, meta, skip_bad_rows=skip_bad_rows, max_rows=max_rows(budget))
        report = analyse(loaded, memory_budget_bytes=budget)
    except SpecError as exc:
        typer.echo(f"planner: invalid input: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None
    except MemoryError:
        typer.echo(
            f"planner: out of memory analysing {trace}; analyse fewer steps or lower "
            "--memory-budget-gib to what this machine has",
            err=True,
        )
        raise typer.Exit(EXIT_INVALID) from None
    result = report.to_dict()
    typer.echo(json.dumps(result) if as_json else _straggler_summary(result))


def _explore_summary(result: dict[str, Any]) -> str:
    name = result.get("name") or "(unnamed)"
    if "error" in result:
        return f"{name}: INVALID {result['error']}"
    counts = result["counts"]
    rejected = ", ".join(f"{k} {v:,}" for k, v in counts["rejected"].items() if v)
    lines = [
        f"{name}: {counts['enumerated']:,} candidates enumerated, {counts['evaluated']:,} "
        f"evaluated; rejected: {rejected or 'none'}",
        f"  top by {result['objective']} "
        "(tp pp cp ep etp dp vp split sp mbs recompute zero | iteration s, MFU, GiB/GPU):",
    ]
    for entry in result["top"]:
        p, pred = entry["parallelism"], entry["prediction"]
        split = "E" if p.get("account_for_embedding_in_pipeline_split") else ""
        split += "L" if p.get("account_for_loss_in_pipeline_split") else ""
        lines.append(
            f"  {entry.get('rank', ''):>3} {entry['num_gpus']:>6} GPUs  "
            f"{p['tensor_parallel']:>3} {p['pipeline_parallel']:>3} {p['context_parallel']:>3} "
            f"{p['expert_parallel']:>3} {p.get('expert_tensor_parallel', '-'):>3} "
            f"{p['data_parallel']:>5} {p['virtual_pipeline']:>3} {split or '-':>5} "
            f"{'y' if p['sequence_parallel'] else 'n'} {p['micro_batch_size']:>3} "
            f"{p['recompute']:>9} {p['zero_stage']}  | {pred['iteration_time_s']:.3f} s, "
            f"{100 * pred['mfu']:.1f}%, {pred['memory_per_gpu_bytes'] / 2**30:.1f}"
        )
    lines.append(f"  Pareto front: {len(result['pareto'])} layouts")
    return "\n".join(lines)


@app.command()
def explore(
    files: Annotated[
        list[str],
        typer.Argument(help="Explore documents: scenarios whose knobs are lists or left out"),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per scenario, one per line")
    ] = False,
    objective: Annotated[
        str, typer.Option(help="time | time-to-train | cost | tokens-per-gpu")
    ] = "time",
    top_k: Annotated[int, typer.Option("--top-k", help="Configurations to report")] = 10,
    workers: Annotated[int, typer.Option(help="Threads evaluating chunks (0 = one per CPU)")] = 0,
) -> None:
    """Search every valid parallelism layout of each scenario: top-k, Pareto front, counts."""
    import os

    from planner.scenario.plans import explore_documents
    from planner.search import OBJECTIVES, Objective

    if objective not in OBJECTIVES:
        typer.echo(f"planner: --objective must be one of {', '.join(OBJECTIVES)}", err=True)
        raise typer.Exit(EXIT_INVALID)
    docs: list[object] = []
    for path in files:
        docs.extend(_documents(path))
    threads = workers if workers > 0 else (os.cpu_count() or 1)
    invalid = False
    for result in explore_documents(
        docs, objective=Objective(objective), top_k=max(top_k, 1), workers=threads
    ):
        invalid = invalid or "error" in result
        typer.echo(json.dumps(result) if as_json else _explore_summary(result))
    if invalid:
        raise typer.Exit(EXIT_INVALID)


def _recommend_summary(result: dict[str, Any]) -> str:
    name = result.get("name") or "(unnamed)"
    if "scaling" not in result:
        return f"{name}: INVALID {result['error']}"
    days = 86400.0
    lines = [f"{name}: scaling curve (GPUs, tokens/s, efficiency, marginal, days to train)"]
    for row in result["scaling"]:
        if not row["feasible"]:
            lines.append(f"  {row['gpu']} x{row['num_gpus']}: no valid layout")
            continue
        marginal = row["marginal_efficiency"]
        lines.append(
            f"  {row['gpu']} x{row['num_gpus']}: {row['tokens_per_s']:,.0f} tokens/s, "
            f"{row['scaling_efficiency']:.2f}, "
            f"{'-' if marginal is None else f'{marginal:.2f}'}, "
            f"{row['time_to_train_s'] / days:.2f} days"
        )
    for label, key in (
        ("smallest meeting the deadline", "smallest_meeting_deadline"),
        ("recommended", "recommendation"),
    ):
        view = result.get(key)
        if view:
            lines.append(
                f"  {label}: {view['num_gpus']} x {view['gpu']}, "
                f"{view['time_to_train_s'] / days:.2f} days, layout {view['parallelism']}"
            )
    for knee in result["knee"]:
        lines.append(f"  knee: {knee['num_gpus']} x {knee['gpu']}")
    running = result.get("running")
    if running and running.get("best"):
        lines.append(
            f"  running job: best layout {running['speedup']:.2f}x faster; restart costs "
            f"{running['restart_cost']['total_s']:.0f} s, saves "
            f"{running['time_saved_s'] / days:.2f} days "
            f"({'worth it' if running['restart_pays'] else 'not worth it'})"
        )
    if "error" in result:
        lines.append(f"  {result['error']}")
    return "\n".join(lines)


@app.command()
def recommend(
    files: Annotated[list[str], typer.Argument(help="Recommend documents (YAML, JSON, JSONL)")],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per job")] = False,
    workers: Annotated[int, typer.Option(help="Threads evaluating chunks (0 = one per CPU)")] = 0,
) -> None:
    """Recommend GPU type and count for a token budget (and deadline): scaling curve, knee,
    smallest allocation meeting the deadline; for a running job, whether a restart pays."""
    import os

    from planner.scenario.plans import recommend_document

    docs: list[object] = []
    for path in files:
        docs.extend(_documents(path))
    threads = workers if workers > 0 else (os.cpu_count() or 1)
    invalid = False
    for doc in docs:
        if isinstance(doc, SpecError):  # the file could not be read or parsed
            result: dict[str, Any] = {"name": None, "error": str(doc)}
        else:
            result = recommend_document(doc, workers=threads)
        invalid = invalid or "error" in result
        typer.echo(json.dumps(result) if as_json else _recommend_summary(result))
    if invalid:
        raise typer.Exit(EXIT_INVALID)


calibrate_app = typer.Typer(
    no_args_is_help=True,
    help="Sample operators on this machine, fit per-operator models, show a calibration; "
    "learn corrections from observed runs.",
)
app.add_typer(calibrate_app, name="calibrate")


@calibrate_app.command("sample")
def calibrate_sample(  # noqa: PLR0917 (typer options)
    out: Annotated[str, typer.Option("--out", help="Directory for the CSV files and run.json")],
    device: Annotated[str, typer.Option(help="cpu | cuda")] = "cpu",
    threads: Annotated[int, typer.Option(help="torch.set_num_threads (0 = PyTorch's default)")] = 0,
    scale: Annotated[float, typer.Option(help="Multiplies every op's number of points")] = 1.0,
    seed: Annotated[int, typer.Option(help="Seed of the scrambled Sobol design")] = 0,
    dtype: Annotated[
        list[str] | None, typer.Option(help="dtype(s) to sample (default: the device's)")
    ] = None,
    collectives: Annotated[
        bool, typer.Option(help="Also time collectives over local torch.distributed ranks")
    ] = True,
    ranks: Annotated[int, typer.Option(help="Ranks of the collective run")] = 2,
) -> None:
    """Time the model's operators (and collectives) on this machine over a space-filling
    design of shapes; write op_samples.csv, collective_samples.csv and run.json to --out."""
    from planner.errors import CalibrationError
    from planner.service.main import sample_this_machine

    if device not in ("cpu", "cuda"):
        typer.echo("planner: --device must be cpu or cuda", err=True)
        raise typer.Exit(EXIT_INVALID)
    try:
        run, files = sample_this_machine(
            out,
            device=device,
            num_threads=threads or None,
            scale=scale,
            seed=seed,
            dtypes=tuple(dtype) if dtype else None,
            collectives=collectives,
            num_ranks=ranks,
        )
    except CalibrationError as exc:
        typer.echo(f"planner: sampling failed: {exc}", err=True)
        raise typer.Exit(1) from None
    meta = run.metadata
    typer.echo(
        f"sampled {meta['num_op_samples']} operator and {meta['num_collective_samples']} "
        f"collective timings on {meta['device_name']} in {meta['duration_s']:.1f} s "
        f"(collectives: {meta['collectives']})"
    )
    for path in files:
        typer.echo(f"  wrote {path}")


@calibrate_app.command("fit")
def calibrate_fit(
    samples: Annotated[
        list[str], typer.Option("--samples", help="Sample run directory or sample CSV file")
    ],
    out: Annotated[str, typer.Option("--out", help="Calibration JSON to write")],
    nccl: Annotated[
        list[str] | None,
        typer.Option("--nccl", help="nccl-tests output file (name it after the binary)"),
    ] = None,
    seed: Annotated[int, typer.Option(help="random_state of the regressors and splits")] = 0,
) -> None:
    """Fit per-operator regressors (chosen by CV, error quoted on held-out samples) and
    latency-bandwidth curves of the collectives; write the calibration as JSON."""
    from planner.calibration import fit_calibration
    from planner.calibration.report import summary_lines
    from planner.errors import CalibrationError
    from planner.service.main import read_calibration_inputs

    try:
        ops, colls, metadata = read_calibration_inputs(samples, nccl or [])
        calibration = fit_calibration(ops, colls, metadata=metadata, random_state=seed)
    except CalibrationError as exc:
        typer.echo(f"planner: invalid samples: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None
    try:
        Path(out).write_text(calibration.to_json(), encoding="utf-8")
    except OSError as exc:
        typer.echo(f"planner: cannot write {out}: {exc.strerror or exc}", err=True)
        raise typer.Exit(1) from None
    for line in summary_lines(calibration):
        typer.echo(line)
    typer.echo(f"wrote {out}")


@calibrate_app.command("observe")
def calibrate_observe(
    runs: Annotated[
        list[str],
        typer.Argument(help="Observed runs, JSON lines: {scenario, iteration_time_s, ...}"),
    ],
    out: Annotated[str | None, typer.Option("--out", help="Calibration JSON to write")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
) -> None:
    """Learn per cluster, GPU type, precision recipe and framework how far the model is off
    from measured runs: compute and network factors, a residual model and memory factors,
    with the held-out error of 5-fold cross-validation; write them as a calibration file for
    `planner predict --calibration`. Exit 2 when a run was invalid (the others are used)."""
    from planner.calibration.files import observe_files

    try:
        report = observe_files(runs, read_input_text)
    except PlannerError as exc:
        typer.echo(f"planner: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None
    for error in report.errors:
        typer.echo(f"planner: {error}", err=True)
    if out is not None:
        try:
            Path(out).write_text(report.calibration.dumps(), encoding="utf-8")
        except OSError as exc:
            typer.echo(f"planner: cannot write {out}: {exc.strerror or exc}", err=True)
            raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps(report.summary()))
    else:
        for line in report.lines():
            typer.echo(line)
        if out is not None:
            typer.echo(f"wrote {out}")
    if report.errors:
        raise typer.Exit(EXIT_INVALID)


@calibrate_app.command("show")
def calibrate_show(
    file: Annotated[str, typer.Argument(help="Calibration JSON written by calibrate fit")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
) -> None:
    """Per-operator model, sampled domain and held-out error; collective curves."""
    from planner.calibration import Calibration
    from planner.calibration.report import calibration_summary, summary_lines
    from planner.errors import CalibrationError

    try:
        text = read_input_text(file)
    except SpecError as exc:
        typer.echo(f"planner: cannot read {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None
    try:
        calibration = Calibration.from_json(text, source=file)
    except CalibrationError as exc:
        typer.echo(f"planner: invalid calibration: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None
    if as_json:
        typer.echo(json.dumps(calibration_summary(calibration)))
        return
    for line in summary_lines(calibration):
        typer.echo(line)


@app.command()
def version() -> None:
    """Print the planner's version."""
    typer.echo(__version__)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except PlannerError as exc:  # last line of defence: a message, never a traceback
        typer.echo(f"planner: {exc}", err=True)
        sys.exit(1)
