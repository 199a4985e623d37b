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
progress lines, a Megatron-LM argument dump or a command line with ``--train-iters``; an MLPerf
result log's cap, then the samples it trained and its ``run_stop``: ``adapters.logs.mlperf``);
an iteration is one optimizer step (for MLPerf logs their samples, tokens or epochs over the
global batch, for Megatron-LM CI tables one step number). A log that states none is an error
(exit 2), as is an unreadable log or scenario, or a log of more than ``MAX_LOG_BYTES`` (256 MiB:
the whole log is held in memory to be replayed; cut a longer one to the run it should replay).
``--scenario`` gives the performance model's
prediction as the prior, as the service does for a described job.

A long replay (``PROGRESS_MIN_RECORDS`` records or more: a few seconds) prints its progress to
standard error, never to standard output, so ``--json`` output stays one JSON document per
line: ``planner: replaying LOG: 40 % (8,138 of 20,344 records, 11 s)`` at each 10 % of the
records, and at least every ``PROGRESS_EVERY_S`` seconds between.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final

import typer

from planner.errors import PlannerError, SpecError

if TYPE_CHECKING:  # the replay (and numpy) is imported when a command runs
    from planner.forecast.replay import ReplayPointJson, ReplaySummaryJson

    class EtaReplaySummaryJson(ReplaySummaryJson):
        """The summary line of ``planner eta replay``: the log's file name and format, then
        :func:`planner.forecast.replay.summarize`'s figures."""

        log: str
        framework: str


EXIT_INVALID = 2
MAX_LOG_BYTES: Final = 256 * 1024 * 1024
"""Largest log ``planner eta replay`` reads, bytes (it is held in memory as text; the longest
pretraining logs the replay was built on are tens of MiB)."""
PROGRESS_MIN_RECORDS: Final = 2_000
"""Replays of fewer records (under about 3 s) print no progress."""
PROGRESS_EVERY_S: Final = 10.0

eta_app = typer.Typer(
    no_args_is_help=True,
    help="ETA tools: replay a finished job's log to see how far to trust the planner's ETA.",
)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"planner: {message}", err=True)
    return typer.Exit(EXIT_INVALID)


def _prior(scenario: str) -> float:
    """The model's step time (s) for the scenario file; raises ``typer.Exit`` (2)."""
    from planner.cli_input import read_input_text
    from planner.scenario import format_for_path, read_documents
    from planner.scenario.documents import predict_results

    try:
        text = read_input_text(scenario)
        documents = read_documents(text, format_for_path(scenario), source=scenario)
    except SpecError as exc:
        raise _fail(f"--scenario: {exc}") from None
    if len(documents) != 1:
        raise _fail(f"--scenario: {scenario} holds {len(documents)} scenarios; give exactly one")
    result = predict_results(documents)[0]
    if "error" in result:
        raise _fail(f"--scenario: {result['error']}")
    step_s = result["iteration_time_s"]
    if step_s is None:  # a non-finite model step time
        raise _fail(f"--scenario: {scenario}: the model gives no finite step time")
    return step_s


class ReplayProgress:
    """The progress lines of a long replay (module doc), through ``echo`` (standard error);
    ``clock``: monotonic seconds. Call it with (records replayed, records to replay)."""

    def __init__(
        self,
        name: str,
        echo: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.echo = echo
        self.clock = clock
        self.started = clock()
        self.last_s = self.started
        self.next_tenth = 1

    def __call__(self, done: int, total: int) -> None:
        if total < PROGRESS_MIN_RECORDS:
            return
        now = self.clock()
        tenth = 10 * done // total
        if tenth < self.next_tenth and now - self.last_s < PROGRESS_EVERY_S:
            return
        self.next_tenth = tenth + 1
        self.last_s = now
        self.echo(
            f"planner: replaying {self.name}: {100 * done // total} % "
            f"({done:,} of {total:,} records, {now - self.started:.0f} s)"
        )


def run_replay(
    log: str,
    *,
    total_iterations: int | None = None,
    scenario: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    max_bytes: int = MAX_LOG_BYTES,
) -> tuple[list[ReplayPointJson], EtaReplaySummaryJson]:
    """The JSON lines of ``planner eta replay`` for the log at ``log`` (``-``: standard input),
    at most ``max_bytes`` long: one per logged point and the summary; ``progress`` is called
    with (records replayed, records to replay) as the replay goes. Raises ``typer.Exit`` (2)
    with the error on standard error (a longer log included: nothing of it is replayed)."""
    from planner.cli_input import read_input
    from planner.forecast.arguments import schedule_from_arguments
    from planner.forecast.replay import replay, summarize
    from planner.wiring.logs import read_job_log

    try:
        data = read_input(log, max_bytes)
    except SpecError as exc:
        if "more than" not in str(exc):
            raise _fail(f"LOG: {exc}") from None
        raise _fail(
            f"LOG: {log} is longer than {max_bytes:,} bytes, the limit of a log the replay "
            "reads (MAX_LOG_BYTES; it is held in memory): cut it to the run to replay, e.g. "
            "with tail -c or sed"
        ) from None
    text = data.decode("utf-8", errors="replace")
    try:
        records, stated, framework, last_time_s = read_job_log(text)
    except SpecError as exc:
        raise _fail(f"{log}: {exc}") from None
    schedule = schedule_from_arguments(text)
    total = total_iterations or stated or schedule.train_iters
    if total is None:
        raise _fail(
            f"{log}: the log states no total number of iterations (no N/T progress lines, no "
            "--train-iters or train_iters argument, no MLPerf cap or run_stop); give "
            "--total-iterations N (for an MLPerf log: the optimizer steps it ran)"
        )
    prior = _prior(scenario) if scenario is not None else None
    try:
        run = replay(
            records,
            total_iterations=total,
            end_time_s=last_time_s,
            prior_step_time_s=prior,
            schedule=schedule,
            on_record=progress,
        )
    except PlannerError as exc:
        raise _fail(f"{log}: {exc}") from None
    summary: EtaReplaySummaryJson = {
        "log": Path(log).name,
        "framework": framework,
        **summarize(run),
    }
    return [p.to_json() for p in run.points], summary


def _table(lines: list[ReplayPointJson], summary: EtaReplaySummaryJson) -> list[str]:
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
    progress = ReplayProgress(Path(log).name, lambda text: typer.echo(text, err=True))
    lines, summary = run_replay(
        log, total_iterations=total_iterations, scenario=scenario, progress=progress
    )
    if as_json:
        for line in lines:
            typer.echo(json.dumps(line))
        typer.echo(json.dumps({"summary": summary}))
        return
    for text in _table(lines, summary):
        typer.echo(text)
