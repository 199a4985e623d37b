"""``planner calibrate sample|fit|observe|show``: sample operators on this machine, fit
per-operator models, learn corrections from observed runs, show a calibration. The sampling and
sample files are wired in ``planner.wiring.calibration``; ``planner.cli`` adds this sub-app."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from planner.errors import PlannerError, SpecError

__all__ = ["calibrate_app"]

EXIT_INVALID = 2


def _read(path: str) -> str:
    """The file's text, bounded (``planner.cli_input``); ``SpecError`` naming the file."""
    from planner.cli_input import read_input_text

    return read_input_text(path)


calibrate_app = typer.Typer(
    no_args_is_help=True,
    help="Sample operators on this machine, fit per-operator models, show a calibration; "
    "learn corrections from observed runs.",
)


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
    from planner.wiring.calibration import sample_this_machine

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
    from planner.wiring.calibration import read_calibration_inputs

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
    `planner predict --calibration`. Exit 2 when a run was invalid (the others are used); a
    run far off what its key's other runs say (a job that hung) is left out and named, not
    an error."""
    from planner.calibration.files import observe_files

    try:
        report = observe_files(runs, _read)
    except PlannerError as exc:
        typer.echo(f"planner: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None
    for error in report.errors:
        typer.echo(f"planner: {error}", err=True)
    for line in report.far_off:
        typer.echo(f"planner: {line}", err=True)
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
    try:
        text = _read(file)
    except SpecError as exc:
        typer.echo(f"planner: cannot read {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None
    # the models (scikit-learn, SciPy) load once the file has been read within its bound
    from planner.calibration import Calibration
    from planner.calibration.report import calibration_summary, summary_lines
    from planner.errors import CalibrationError

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
