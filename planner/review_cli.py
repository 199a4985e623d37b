"""``planner review FLEET PLAN [--jobs SNAPSHOT.json] [--what-if FILE...] --out DIR``: a
capacity-planning review written as ``review.html`` (self-contained), ``review.json`` and
``review.md``. The body of the command; ``planner.cli`` registers it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated

import typer

from planner.errors import PlannerError, SourceError, SpecError

__all__ = ["review"]

EXIT_INVALID = 2


def _read(path: str) -> str:
    """The file's text, bounded (``planner.cli_input``); ``SpecError`` naming the file."""
    from planner.cli_input import read_input_text

    return read_input_text(path)


def _fail(message: str, code: int = EXIT_INVALID) -> typer.Exit:
    typer.echo(f"planner: {message}", err=True)
    return typer.Exit(code)


def review(  # noqa: PLR0917 (typer options)
    fleet: Annotated[str, typer.Argument(help="Fleet file: pools, capacity changes, scheduler")],
    plan: Annotated[str, typer.Argument(help="Plan file: upcoming jobs")],
    out: Annotated[
        str, typer.Option("--out", help="Directory for review.html, review.json, review.md")
    ],
    jobs: Annotated[
        str | None, typer.Option("--jobs", help="Today's running and queued jobs (JSON snapshot)")
    ] = None,
    what_if: Annotated[
        list[str] | None, typer.Option("--what-if", help="What-if scenario file (repeatable)")
    ] = None,
    samples: Annotated[int, typer.Option(help="Monte Carlo samples per scenario")] = 200,
    seed: Annotated[int, typer.Option(help="Seed of the random draws")] = 0,
    start: Annotated[
        str | None,
        typer.Option(
            help="Review start (ISO date/time, UTC); default: the later of the fleet's start "
            "and the snapshot's time, or now"
        ),
    ] = None,
    sizing: Annotated[
        bool, typer.Option("--sizing/--no-sizing", help="Search the smallest addition per GPU type")
    ] = True,
    sizing_samples: Annotated[
        int | None, typer.Option(help="Samples per sizing run (default min(samples, 100))")
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option("--ray-address", help="Run the samples and scenarios on this Ray cluster"),
    ] = None,
) -> None:
    """Capacity review: forecast every job's start and completion, deadline risk, pool
    occupancy per week, GPU-hours and cost per team, what-if scenarios side by side, and the
    smallest addition per GPU type meeting every deadline at p90."""
    import numpy as np

    from planner.capacity import read_snapshot, review_markdown, run_review
    from planner.capacity.documents import Located, load_document
    from planner.capacity.fields import read_timestamp_s
    from planner.capacity.html import review_html
    from planner.capacity.inputs import review_inputs

    if samples < 1:
        raise _fail("--samples must be >= 1")
    try:
        snapshot = read_snapshot(_read(jobs), jobs) if jobs else None
        inputs = review_inputs(
            load_document(_read(fleet), fleet),
            load_document(_read(plan), plan),
            [load_document(_read(path), path) for path in what_if or ()],
            snapshot,
            start_s=read_timestamp_s(Located("--start", "", 0, start)) if start else None,
            now_s=time.time(),
        )
    except SpecError as exc:
        raise _fail(f"invalid input: {exc}") from None
    executor = None
    if ray_address:
        from planner.wiring.ray import ray_executor

        try:
            executor = ray_executor(ray_address)
        except SourceError as exc:
            raise _fail(str(exc)) from None
    began = time.perf_counter()
    try:
        result = run_review(
            inputs.fleet, inputs.planned, inputs.snapshot, inputs.what_ifs,
            start_s=inputs.start_s, samples=samples,
            rng=np.random.default_rng(seed), seed=seed, executor=executor, sizing=sizing,
            sizing_samples=sizing_samples,
        )  # fmt: skip
    except PlannerError as exc:
        raise _fail(f"invalid what-if: {exc}") from None
    finally:
        if executor is not None:
            executor.close()
    elapsed = time.perf_counter() - began
    target = Path(out)
    try:
        target.mkdir(parents=True, exist_ok=True)
        files = {
            "review.json": json.dumps(result.to_dict(), indent=1, allow_nan=False),
            "review.md": review_markdown(result),
            "review.html": review_html(result),
        }
        for name, text in files.items():
            (target / name).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise _fail(f"cannot write to {out}: {exc.strerror or exc}", 1) from None
    for row in result.comparison():
        typer.echo(
            f"{row['scenario']}: {row['jobs_with_deadline']} deadline jobs, "
            f"{row['expected_deadline_misses']:.2f} expected misses, "
            f"{row['deadlines_missed_at_p90']} missed at p90, "
            f"utilisation {100 * row['utilisation']:.0f}%"
        )
        if not row["comparable"]:
            typer.echo(f"  {row['not_comparable']}")
    if result.not_capacity:
        typer.echo(
            f"{len(result.not_capacity)} deadline(s) capacity cannot save: "
            + "; ".join(f"{n.job}: {n.fix}" for n in result.not_capacity)
        )
    for answer in result.sizing:
        typer.echo(f"sizing {answer.gpu}: {answer.answer()}")
    where = f"Ray {ray_address}" if ray_address else f"local, {os.cpu_count()} CPUs"
    typer.echo(f"simulated in {elapsed:.1f} s ({where})")
    for name in files:
        typer.echo(f"wrote {target / name}")
