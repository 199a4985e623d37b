"""``planner predict``, ``planner explore`` and ``planner recommend``: the performance model on
scenario documents (YAML, JSON, JSONL; ``-`` is standard input), one result per scenario in
input order, as text or JSON lines; exit 2 when a scenario was invalid (each gets an error line,
the others are still answered), infeasible (explore) or could not meet its deadline (recommend).
The bodies of the commands; ``planner.cli`` registers them. The model loads when a command runs,
so ``planner --help`` stays fast (``benchmarks/cli_startup.py``).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Annotated

import typer

from planner.errors import PlannerError, SpecError

if TYPE_CHECKING:
    from planner.scenario.documents import DocumentError, PredictedJson
    from planner.scenario.request import RecommendationJson
    from planner.scenario.space import ExploreJson

__all__ = ["explore", "human_prediction", "predict", "recommend"]

EXIT_INVALID = 2


def _documents(path: str) -> list[object]:
    """Raw documents of one input file (``-`` is standard input, read as YAML); a file that
    cannot be read or parsed gives one ``SpecError`` instance (``planner.cli_input``)."""
    from planner.cli_input import input_documents

    return input_documents(path)


def human_prediction(result: PredictedJson | DocumentError) -> str:
    """The text line (and breakdown) of one ``planner predict --json`` object."""
    name = result.get("name") or "(unnamed)"
    if "error" in result:
        return f"{name}: INVALID {result['error']}"
    gib = _number(result["memory_per_gpu_bytes"]) / 2**30
    fits = "fits" if result["fits_in_memory"] else "DOES NOT FIT"
    line = (
        f"{name}: iteration {_number(result['iteration_time_s']):.3f} s, "
        f"{_number(result['tokens_per_s']):,.0f} tokens/s "
        f"({_number(result['tokens_per_s_per_gpu']):,.1f}/GPU), "
        f"MFU {100 * _number(result['mfu']):.1f}%, memory {gib:.1f} GiB/GPU ({fits})"
    )
    time_to_train_s = result.get("time_to_train_s")
    if time_to_train_s is not None:
        line += f", time to train {time_to_train_s / 86400:.2f} days"
    breakdown = ", ".join(f"{k} {_number(v):.3f}" for k, v in result["breakdown_s"].items())
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
    from planner.cli_input import read_input_text
    from planner.scenario.documents import predict_results

    efficiency = None
    observed = None
    if calibration is not None:
        try:
            text = read_input_text(calibration)
            # the calibration models (scikit-learn, SciPy: over a CPU-second to import) load
            # only for a calibration file, and only once it has been read within its bound
            from planner.calibration.files import load_calibration_file

            efficiency, observed = load_calibration_file(
                text, source=calibration, device_key=device_key
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
    results = predict_results(docs, efficiency=efficiency, calibration=observed, cluster=cluster)
    for result in results:
        typer.echo(json.dumps(result) if as_json else human_prediction(result))
    if any("error" in r for r in results):
        raise typer.Exit(EXIT_INVALID)


def _number(value: float | None) -> float:
    """A number of the JSON output for a summary line; NaN (printed ``nan``) for a JSON null."""
    return math.nan if value is None else value


def _explore_summary(result: ExploreJson | DocumentError) -> str:
    name = result.get("name") or "(unnamed)"
    if "counts" not in result:
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
            f"{100 * _number(pred['mfu']):.1f}%, "
            f"{_number(pred['memory_per_gpu_bytes']) / 2**30:.1f}"
        )
    lines.append(f"  Pareto front: {len(result['pareto'])} layouts")
    return "\n".join(lines)


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


def _recommend_summary(result: RecommendationJson | DocumentError) -> str:
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
            f"{_number(row.get('time_to_train_s')) / days:.2f} days"
        )
    for label, view in (
        ("smallest meeting the deadline", result["smallest_meeting_deadline"]),
        ("recommended", result["recommendation"]),
    ):
        if view:
            lines.append(
                f"  {label}: {view['num_gpus']} x {view['gpu']}, "
                f"{view['time_to_train_s'] / days:.2f} days, layout {view['parallelism']}"
            )
    for knee in result["knee"]:
        if knee is not None:
            lines.append(f"  knee: {knee['num_gpus']} x {knee['gpu']}")
    running = result.get("running")
    if running and "restart_cost" in running:
        lines.append(
            f"  running job: best layout {running['speedup']:.2f}x faster; restart costs "
            f"{running['restart_cost']['total_s']:.0f} s, saves "
            f"{_number(running.get('time_saved_s')) / days:.2f} days "
            f"({'worth it' if running['restart_pays'] else 'not worth it'})"
        )
    if "error" in result:
        lines.append(f"  {result['error']}")
    return "\n".join(lines)


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
            result: RecommendationJson | DocumentError = {"name": None, "error": str(doc)}
        else:
            result = recommend_document(doc, workers=threads)
        invalid = invalid or "error" in result
        typer.echo(json.dumps(result) if as_json else _recommend_summary(result))
    if invalid:
        raise typer.Exit(EXIT_INVALID)
