"""A sampling run on disk: ``op_samples.csv``, ``collective_samples.csv`` (optional) and the
run's metadata in ``run.json`` (device, versions, host, design, durations).

``read_sample_run(path)`` also accepts a single CSV file (operator or collective samples, told
apart by their header) and raises ``CalibrationError`` naming the file, line and field of a
malformed row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner.calibration.collectives import (
    CollectiveSample,
    format_collective_samples_csv,
    read_collective_samples_csv,
)
from planner.calibration.samples import OpSample, format_op_samples_csv, read_op_samples_csv
from planner.errors import CalibrationError

__all__ = [
    "COLLECTIVE_SAMPLES_FILE",
    "OP_SAMPLES_FILE",
    "RUN_METADATA_FILE",
    "SampleRun",
    "read_sample_run",
    "write_sample_run",
]

OP_SAMPLES_FILE = "op_samples.csv"
COLLECTIVE_SAMPLES_FILE = "collective_samples.csv"
RUN_METADATA_FILE = "run.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class SampleRun:
    """The samples of one run and its metadata (``run.json``; empty when absent)."""

    ops: tuple[OpSample, ...] = ()
    collectives: tuple[CollectiveSample, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


def write_sample_run(directory: str | Path, run: SampleRun) -> list[Path]:
    """Write ``run`` under ``directory`` (created); returns the files written."""
    out = Path(directory)
    try:
        out.mkdir(parents=True, exist_ok=True)
        written: list[Path] = []
        if run.ops:
            path = out / OP_SAMPLES_FILE
            path.write_text(format_op_samples_csv(run.ops), encoding="utf-8")
            written.append(path)
        if run.collectives:
            path = out / COLLECTIVE_SAMPLES_FILE
            path.write_text(format_collective_samples_csv(run.collectives), encoding="utf-8")
            written.append(path)
        path = out / RUN_METADATA_FILE
        path.write_text(json.dumps(run.metadata, indent=2, sort_keys=True) + "\n", "utf-8")
        written.append(path)
    except OSError as exc:
        raise CalibrationError(f"cannot write samples to {out}: {exc.strerror or exc}") from None
    return written


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise CalibrationError(f"cannot read {path}: {reason}") from None


def read_sample_run(path: str | Path) -> SampleRun:
    """Read a run directory written by ``write_sample_run``, or one sample CSV file."""
    p = Path(path)
    if p.is_file():
        text = _read(p)
        header = text.split("\n", 1)[0]
        if "collective" in header.split(","):
            return SampleRun(collectives=tuple(read_collective_samples_csv(text, source=str(p))))
        return SampleRun(ops=tuple(read_op_samples_csv(text, source=str(p))))
    if not p.is_dir():
        raise CalibrationError(f"{p}: no such sample directory or CSV file")
    ops_path, coll_path, meta_path = (
        p / OP_SAMPLES_FILE,
        p / COLLECTIVE_SAMPLES_FILE,
        p / RUN_METADATA_FILE,
    )
    if not ops_path.exists() and not coll_path.exists():
        raise CalibrationError(
            f"{p}: holds neither {OP_SAMPLES_FILE} nor {COLLECTIVE_SAMPLES_FILE}; "
            "run `planner calibrate sample --out DIR` first"
        )
    ops = read_op_samples_csv(_read(ops_path), source=str(ops_path)) if ops_path.exists() else []
    colls = (
        read_collective_samples_csv(_read(coll_path), source=str(coll_path))
        if coll_path.exists()
        else []
    )
    metadata: dict[str, Any] = {}
    if meta_path.exists():
        try:
            loaded = json.loads(_read(meta_path))
        except json.JSONDecodeError as exc:
            raise CalibrationError(
                f"{meta_path}: not JSON ({exc.msg}, line {exc.lineno})"
            ) from None
        if not isinstance(loaded, dict):
            raise CalibrationError(f"{meta_path}: must hold a JSON object")
        metadata = loaded
    return SampleRun(ops=tuple(ops), collectives=tuple(colls), metadata=metadata)
