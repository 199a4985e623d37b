"""``planner stragglers TRACE --meta META``: what-if straggler analysis of a per-rank operation
trace (``planner.stragglers``), the trace read through ``planner.wiring.traces``. The body of the
command; ``planner.cli`` registers it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from planner.errors import SpecError

if TYPE_CHECKING:
    from planner.stragglers.whatif import StragglerReportJson

__all__ = ["stragglers"]

EXIT_INVALID = 2


def _straggler_summary(result: StragglerReportJson) -> str:
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
    from planner.wiring.traces import read_trace

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
