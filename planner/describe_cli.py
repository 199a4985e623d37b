"""``planner describe LAUNCH``: what the planner thinks a batch script, command line or
Kubernetes manifest trains (``planner.launch.describe.describe_launch``, the function the service
uses), each value with where it came from, the values assumed, the unknowns and the prediction.

The files the launch names are read only inside ``--workdir`` (default: the current directory,
as ``sbatch`` starts a job where it was submitted): a path that resolves outside it (``..``, an
absolute path elsewhere, a symbolic link out) is refused, and so is anything but a regular file;
each file is bounded (``planner.launch.types``: 1 MiB a file, 32 files, 4 MiB in all).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from planner.errors import PlannerError, SourceError, SpecError

if TYPE_CHECKING:  # the readers load only when the command runs (fast --help)
    from planner.launch.describe import LaunchDescription
    from planner.launch.types import Launch

__all__ = ["TreeFiles", "describe", "launch_from_text"]

EXIT_INVALID = 2
_LAUNCH_MAX_BYTES = 4 << 20
_MAX_FILE_BYTES = 1 << 20
"""Largest file a launch may name (planner.launch.types.DEFAULT_MAX_FILE_BYTES)."""


class TreeFiles:
    """Files under ``root`` (resolved): a path resolving outside it, a non-regular file or one
    over ``max_bytes`` raises ``SourceError`` naming the path and the rule."""

    def __init__(self, root: str, max_bytes: int = _MAX_FILE_BYTES) -> None:
        self.root = os.path.realpath(root)
        self.max_bytes = max_bytes

    def _checked(self, path: str) -> str:
        real = os.path.realpath(path)
        if real != self.root and not real.startswith(self.root.rstrip("/") + "/"):
            raise SourceError(path, f"outside the launch's directory {self.root}; not read")
        try:
            info = os.stat(real)
        except OSError:
            raise SourceError(path, "no such file") from None
        if not stat.S_ISREG(info.st_mode):
            raise SourceError(path, "not a regular file; not read")
        if info.st_size > self.max_bytes:
            raise SourceError(path, f"over {self.max_bytes:,} bytes; not read")
        return real

    def read_text(self, path: str) -> str:
        real = self._checked(path)
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            data = os.read(fd, self.max_bytes + 1)
        finally:
            os.close(fd)
        if len(data) > self.max_bytes:
            raise SourceError(path, f"over {self.max_bytes:,} bytes; not read")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise SourceError(path, "not UTF-8 text; not read") from None

    def exists(self, path: str) -> bool:
        try:
            self._checked(path)
        except SourceError:
            return False
        return True


def launch_from_text(text: str, *, source: str, work_dir: str, name: str = "") -> Launch:
    """A launch from a file's text: a Kubernetes manifest when its YAML documents are mappings
    with ``apiVersion`` and ``kind``, else a batch script."""
    from planner.launch.types import Launch

    stripped = text.lstrip()
    if "apiVersion" in text and "kind" in text and not stripped.startswith("#!"):
        from planner.scenario.loading import load_yaml

        try:
            documents = [d for d in load_yaml(text, source) if d is not None]
        except SpecError:
            documents = []
        objects = tuple(d for d in documents if isinstance(d, dict) and "kind" in d)
        if objects:
            return Launch(manifest=objects, work_dir=work_dir, name=name)
    return Launch(batch_script=text, work_dir=work_dir, name=name)


def _human(description: LaunchDescription) -> str:
    lines = [f"described by: {description.described_by} ({description.detail})"]
    if description.error:
        lines.append(f"error: {description.error}")
    assumed = set(description.assumed)
    for section in ("model", "hardware", "parallelism", "training"):
        values = description.scenario.get(section)
        if not isinstance(values, dict):
            continue
        for key in sorted(values):
            dotted = f"{section}.{key}"
            mark = " (assumed)" if dotted in assumed else ""
            source = description.provenance.get(dotted, "")
            lines.append(f"  {dotted} = {values[key]!r}  <- {source}{mark}")
    for key in sorted(description.launch):
        source = description.provenance.get(f"launch.{key}", "")
        lines.append(f"  launch.{key} = {description.launch[key]!r}  <- {source}")
    if description.unknown:
        lines.append(f"unknown: {', '.join(description.unknown)}")
    lines.extend(f"note: {note}" for note in description.notes)
    prediction = description.predicted
    if prediction is None or "error" in prediction:
        lines.append(
            f"prediction: none ({'not predicted' if prediction is None else prediction['error']})"
        )
    else:
        from planner.predict_cli import human_prediction as predicted

        lines.append("prediction: " + predicted(prediction))
    return "\n".join(lines)


def _launch_of(launch: str | None, command: str | None, root: str) -> Launch:
    """The launch ``planner describe`` was given: ``--command``, else the file (or ``-``).
    Raises ``SpecError`` when the file is not UTF-8 text, ``PlannerError`` when unreadable."""
    from planner.cli_input import read_input
    from planner.launch.types import Launch

    if command is not None:
        return Launch(command=command, work_dir=root)
    assert launch is not None
    raw = read_input(launch, _LAUNCH_MAX_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(launch, "not UTF-8 text; give a batch script or manifest") from None
    return launch_from_text(text, source=launch, work_dir=root)


def describe(  # noqa: PLR0917 (typer options)
    launch: Annotated[
        str | None,
        typer.Argument(help="Batch script or Kubernetes manifest (YAML); - = standard input"),
    ] = None,
    command: Annotated[
        str | None,
        typer.Option("--command", "-c", help="Describe this command line instead of a file"),
    ] = None,
    workdir: Annotated[
        str | None,
        typer.Option(
            "--workdir",
            help="The job's working directory: relative paths of the launch are read there, "
            "and no file outside it (default: the current directory)",
        ),
    ] = None,
    gpus: Annotated[
        int | None, typer.Option("--gpus", min=1, help="GPU count, over what the launch says")
    ] = None,
    gpu: Annotated[
        str | None, typer.Option("--gpu", help="GPU type (catalog key such as h100-sxm)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object")] = False,
) -> None:
    """What a batch script, command line or Kubernetes manifest trains: each value with its
    source, the defaults assumed, the unknowns, and the prediction. Exit 2 when no reader
    recognises the launch or a file it names cannot be read."""
    from planner.launch.describe import describe_launch

    root = str(Path(workdir or os.getcwd()).resolve())
    if not Path(root).is_dir():
        typer.echo(f"planner: --workdir: {root} is not a directory", err=True)
        raise typer.Exit(EXIT_INVALID)
    if (launch is None) == (command is None):
        typer.echo("planner: give a launch file (or -) or --command, not both", err=True)
        raise typer.Exit(EXIT_INVALID)
    try:
        spec = _launch_of(launch, command, root)
    except PlannerError as exc:
        typer.echo(f"planner: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None
    description = describe_launch(spec, TreeFiles(root), gpus=gpus, gpu=gpu)
    typer.echo(json.dumps(description.to_json()) if as_json else _human(description))
    if not description.recognised:
        typer.echo(
            "planner: no reader recognises this launch; recognised styles: torchtitan, NeMo "
            "2.0/1.0, Megatron-Bridge, Megatron-LM, Megatron-DeepSpeed, HF Trainer/TRL/"
            "accelerate, Axolotl, LLaMA-Factory, torchtune, LLM Foundry, PyTorch FSDP scripts "
            "(or attach a scenario: planner:scenario=PATH)",
            err=True,
        )
        raise typer.Exit(EXIT_INVALID)
    if description.error:
        raise typer.Exit(EXIT_INVALID)
