"""``planner eta replay LOG [--total-iterations N] [--scenario FILE] [--json]``: how far to trust
the ETA, on a finished job's own log.

The log is replayed as if the planner were watching the job live (``planner.forecast.replay``:
the service's rule, history and estimator, using at each logged point only what was known
then). With ``--json`` it prints one line per logged point::

    {"elapsed_s": 120.5, "iteration": 200, "progress": 0.1, "eta_s": {"p10": ..., "p50": ...,
     "p90": ...}}

(``elapsed_s``: wall seconds since the first logged point; ``eta_s``: predicted seconds remaining
from that point), then one line ``{"summary": {...}}`` with the job's real duration and the
errors (``planner.forecast.replay.summarize``). Without ``--json``: a table at every 10 % of
progress and the summary.

The total number of iterations comes from ``--total-iterations``, else from the log (``N/T``
progress lines, a Megatron-LM argument dump or a command line with ``--train-iters``); an
iteration is one optimizer step (for MLPerf logs one ``tracked_stats`` train-step event, for
Megatron-LM CI tables one step number). A log that states none is an error (exit 2), as is an
unreadable log or scenario. ``--scenario`` gives the performance model's prediction as the
prior, as the service does for a described job.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from planner.errors import PlannerError, SpecError

EXIT_INVALID = 2

eta_app = typer.Typer(
    no_args_is_help=True,
    help="ETA tools: replay a finished job's log to see how far to trust the planner's ETA.",
)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"planner: {message}", err=True)
    return typer.Exit(EXIT_INVALID)


def _prior(scenario: str) -> float:
    """The model's step time (s) for the scenario file; raises ``typer.Exit`` (2)."""
    from planner.scenario import format_for_path, predict_documents, read_documents

    try:
        text = Path(scenario).read_text(encoding="utf-8")
        documents = read_documents(text, format_for_path(scenario), source=scenario)
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(f"--scenario: cannot read {scenario}: {exc}") from None
    except SpecError as exc:
        raise _fail(f"--scenario: {exc}") from None
    if len(documents) != 1:
        raise _fail(f"--scenario: {scenario} holds {len(documents)} scenarios; give exactly one")
    result = predict_documents(documents)[0]
    if "error" in result:
        raise _fail(f"--scenario: {result['error']}")
    return float(result["iteration_time_s"])


def run_replay(
    log: str, *, total_iterations: int | None = None, scenario: str | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The JSON lines of ``planner eta replay`` for the log at ``log``: one per logged point and
    the summary. Raises ``typer.Exit`` (2) with the error on standard error."""
    from planner.forecast.arguments import schedule_from_arguments
    from planner.forecast.replay import replay, summarize
    from planner.service.main import read_job_log

    try:
        text = Path(log).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise _fail(f"LOG: cannot read {log} ({exc.strerror or exc}); check the path") from None
    try:
        records, stated, framework, last_time_s = read_job_log(text)
    except SpecError as exc:
        raise _fail(f"{log}: {exc}") from None
    schedule = schedule_from_arguments(text)
    total = total_iterations or stated or schedule.train_iters
    if total is None:
        raise _fail(
            f"{log}: the log states no total number of iterations (no N/T progress lines, no "
            "--train-iters or train_iters argument); give --total-iterations N (for an MLPerf "
            "log: the number of train steps it ran)"
        )
    prior = _prior(scenario) if scenario is not None else None
    try:
        run = replay(
            records,
            total_iterations=total,
            end_time_s=last_time_s,
            prior_step_time_s=prior,
            schedule=schedule,
        )
    except PlannerError as exc:
        raise _fail(f"{log}: {exc}") from None
    summary = {"log": Path(log).name, "framework": framework, **summarize(run)}
    return [p.to_json() for p in run.points], summary


def _table(lines: list[dict[str, Any]], summary: dict[str, Any]) -> list[str]:
    out = [f"{'progress':>8} {'elapsed_s':>11} {'p10_s':>11} {'p50_s':>11} {'p90_s':>11}"]
    next_mark = 0.0
    for line in lines:
        if line["progress"] + 1e-12 < next_mark:
            continue
        eta = line["eta_s"]
        out.append(
            f"{100 * line['progress']:7.1f}% {line['elapsed_s']:11.1f} {eta['p10']:11.1f} "
            f"{eta['p50']:11.1f} {eta['p90']:11.1f}"
        )
        next_mark = round(line["progress"], 6) + 0.1
    out.append(json.dumps(summary))
    return out


@eta_app.command("replay")
def eta_replay(
    log: Annotated[str, typer.Argument(help="A finished job's log (any format the planner reads)")],
    total_iterations: Annotated[
        int | None,
        typer.Option(
            "--total-iterations",
            min=1,
            help="Iterations the job ran (default: the total the log states)",
        ),
    ] = None,
    scenario: Annotated[
        str | None,
        typer.Option("--scenario", help="The job's scenario: the model's step time as prior"),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON line per logged point, then a summary")
    ] = False,
) -> None:
    """Replay a finished job's log as if live: the ETA at each logged point, and its errors."""
    lines, summary = run_replay(log, total_iterations=total_iterations, scenario=scenario)
    if as_json:
        for line in lines:
            typer.echo(json.dumps(line))
        typer.echo(json.dumps({"summary": summary}))
        return
    for text in _table(lines, summary):
        typer.echo(text)
