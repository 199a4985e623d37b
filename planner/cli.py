"""The ``planner`` command (typer): the command table, ``planner serve`` and ``planner version``.

``planner predict FILE... [--json]``  predict scenarios (YAML, JSON, JSONL batches); exit 2 when
                                      any scenario was invalid, each getting an error line.
``planner explore FILE... [--json]``  search every valid layout: top-k, Pareto front, counts;
                                      exit 2 when a scenario was invalid or infeasible.
``planner recommend FILE... [--json]`` GPU count/type for a token budget and deadline; exit 2
                                      when invalid or the deadline cannot be met
                                      (``planner.predict_cli``).
``planner stragglers TRACE --meta M`` what-if straggler analysis of a per-rank trace
                                      (``planner.stragglers_cli``).
``planner review FLEET PLAN --out D`` a capacity-planning review (``planner.review_cli``).
``planner simulate JOB [--json]``     when a job submitted now would start and finish, from
                                      the running service's live queue (``--url``;
                                      ``planner.simulate_cli``).
``planner serve``                     run the service (settings: ``PLANNER_*`` environment,
                                      optional YAML file in ``PLANNER_CONFIG_FILE``).
``planner calibrate sample|fit|show`` sample operators on this machine, fit
                                      per-operator models, show a calibration.
``planner calibrate observe RUNS``    learn corrections from measured runs (JSON lines) for
                                      ``planner predict --calibration``
                                      (``planner.calibrate_cli``).
``planner describe LAUNCH``           what a batch script, command line or Kubernetes manifest
                                      trains, each value with its source, and the prediction
                                      (``planner.describe_cli``).
``planner eta replay LOG``            replay a finished job's log: the ETA at each point and
                                      its errors (``planner.eta_cli``).
``planner demo``                      local Slurm, a real PyTorch job, the planner watching it
                                      (``planner.demo_cli``).
``planner version``                   print the version.

The command modules import typer and ``planner.errors`` only; everything else loads inside the
command that uses it, so ``planner --help``, ``planner version`` and ``planner CMD --help`` load
neither numpy nor the web stack (``benchmarks/cli_startup.py``). The offline commands never
import FastAPI, SQLAlchemy or an adapter they do not use (import-linter contracts in
``pyproject.toml``); only ``serve`` reaches the service's composition root.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperGroup

from planner import __version__
from planner.calibrate_cli import calibrate_app
from planner.demo_cli import demo
from planner.describe_cli import describe
from planner.errors import PlannerError, SpecError
from planner.eta_cli import eta_app
from planner.predict_cli import explore, predict, recommend
from planner.review_cli import review
from planner.simulate_cli import simulate
from planner.stragglers_cli import stragglers

if TYPE_CHECKING:  # the click that typer vendors, already loaded by typer.core
    from typer._click import Context, HelpFormatter


class WholeSummaryGroup(TyperGroup):
    """A command group whose ``--help`` lists each command with its help text's whole first
    paragraph, wrapped, as typer's rich layout does; click's plain layout, which this command
    uses, would cut it at the first sentence or at the end of the line."""

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            text = command.short_help or command.help or ""
            paragraph = text.split("\f", 1)[0].strip().split("\n\n", 1)[0]
            rows.append((name, " ".join(paragraph.split())))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


app = typer.Typer(
    cls=WholeSummaryGroup,
    add_completion=False,
    no_args_is_help=True,
    # Plain help (click's layout): typer's rich layout loads rich, markdown-it and pygments,
    # doubling the time of `planner CMD --help` (benchmarks/results/cli_startup.md).
    rich_markup_mode=None,
    context_settings={"max_content_width": 100},
    help="LLM capacity planner: predict LLM training step time, memory, MFU and ETA.",
)

EXIT_INVALID = 2


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
    """Run the planner service: the HTTP API and /metrics, and the ingest loops in a process it
    supervises (all in one process with PLANNER_SERVICE__PROCESSES=single)."""
    from planner.service.main import configure_service_logging
    from planner.service.main import serve as run_service
    from planner.service.settings import load_settings

    overrides: dict[str, str | int | bool] = {}
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
    # one record per line, control characters escaped, query-string tokens redacted; the
    # libraries' per-cycle chatter only with DEBUG
    configure_service_logging(settings.log_level)
    try:
        run_service(settings)
    except PlannerError as exc:
        typer.echo(f"planner: cannot start: {exc}", err=True)
        raise typer.Exit(1) from None


def version() -> None:
    """Print the planner's version."""
    typer.echo(__version__)


# The order of `planner --help`: commands as registered, then the groups.
app.command()(review)
app.command()(demo)
app.command()(describe)
app.command()(predict)
app.command()(serve)
app.command()(stragglers)
app.command()(explore)
app.command()(recommend)
app.command()(simulate)
app.command()(version)
app.add_typer(eta_app, name="eta", cls=WholeSummaryGroup)
app.add_typer(calibrate_app, name="calibrate", cls=WholeSummaryGroup)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except PlannerError as exc:  # last line of defence: a message, never a traceback
        typer.echo(f"planner: {exc}", err=True)
        sys.exit(1)
