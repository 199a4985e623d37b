"""Operator sampling and sample files for ``planner calibrate sample|fit``
(``adapters.sampling``, ``adapters.nccl``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adapters.nccl import parse_nccl_tests
from adapters.sampling.files import SampleRun, read_sample_run
from adapters.sampling.run import run_sampling
from planner.calibration.collectives import CollectiveSample
from planner.calibration.samples import OpSample
from planner.cli_input import read_input_text
from planner.errors import CalibrationError, SpecError

__all__ = ["read_calibration_inputs", "sample_this_machine"]


def sample_this_machine(out: str, **options: Any) -> tuple[SampleRun, list[Path]]:
    """Time the model's operators (and collectives) on this machine with PyTorch and write the
    run under ``out`` (``adapters.sampling.run.run_sampling``); raises ``CalibrationError``."""
    return run_sampling(out, **options)


def read_calibration_inputs(
    samples: Sequence[str], nccl: Sequence[str] = ()
) -> tuple[list[OpSample], list[CollectiveSample], dict[str, object]]:
    """Operator and collective samples from sample runs (directories or CSV files) and
    nccl-tests output files, with the first run's metadata (its ``run.json`` object as read:
    device, versions, host, ...); raises ``CalibrationError``."""
    ops: list[OpSample] = []
    colls: list[CollectiveSample] = []
    metadata: dict[str, object] = {}
    for path in samples:
        run = read_sample_run(path)
        ops.extend(run.ops)
        colls.extend(run.collectives)
        metadata = metadata or dict(run.metadata)
    for path in nccl:
        try:
            text = read_input_text(path)
        except SpecError as exc:
            raise CalibrationError(f"cannot read {exc}") from None
        colls.extend(parse_nccl_tests(text, source=path).samples)
    return ops, colls, metadata
