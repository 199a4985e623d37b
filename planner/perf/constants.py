"""The fit-able constants of the default performance model, kept as data in ONE file.

``efficiency_constants.json`` (next to this module) holds every constant the default efficiency
model (``planner.perf.efficiency.DefaultEfficiency``) uses, one entry each::

    {"format": "...", "provenance": "<where the current values come from>",
     "constants": [{"name": "...", "value": 0.86, "unit": "1", "meaning": "...",
                    "provenance": "..."}, ...]}

Values are SI (``unit`` says which; ``"1"`` means a ratio). ``default_constants()`` reads the
file (once per process); the accuracy harness fits a few values on its calibration subset and
writes them back with ``write_constants(path, values, provenance)``, which keeps every other
entry, units and meanings as they were and records the provenance on each changed constant and
at the top of the file. Reading a file is I/O, so only these two functions touch the disk.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TypedDict

from planner.errors import CalibrationError

__all__ = [
    "CONSTANTS_FILE",
    "ConstantsDocument",
    "default_constants",
    "load_constants",
    "read_constant_entries",
    "write_constants",
]

CONSTANTS_FILE = "efficiency_constants.json"
"""File name of the constants inside the ``planner.perf`` package."""


def _default_path() -> Path:
    return Path(str(resources.files(__package__).joinpath(CONSTANTS_FILE)))


class ConstantsDocument(TypedDict):
    """A constants file as ``read_constant_entries`` reads it: its ``format`` and
    ``provenance`` as the file has them (``""`` and None when absent), and its ``constants``,
    each the file's object as it is (``name``, ``value``, ``unit``, ``meaning``,
    ``provenance``, any other field kept), its ``value`` checked to be a finite number."""

    format: object
    provenance: object
    constants: list[dict[str, object]]


def _constant_value(entry: Mapping[str, object]) -> float | None:
    """The ``value`` of a constant's entry as a float, None when it is not a finite number."""
    value = entry["value"]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def read_constant_entries(path: str | Path | None = None) -> ConstantsDocument:
    """The whole constants document (``format``, ``provenance``, ``constants`` list).

    ``path`` defaults to the packaged ``efficiency_constants.json``. Raises
    ``CalibrationError`` when the file is missing or malformed.
    """
    where = Path(path) if path is not None else _default_path()
    try:
        doc = json.loads(where.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CalibrationError(f"{where}: cannot read efficiency constants: {exc}") from exc
    entries = doc.get("constants") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise CalibrationError(f"{where}: needs a 'constants' list of entries")
    checked: list[dict[str, object]] = []
    for entry in entries:
        if not isinstance(entry, dict) or not {"name", "value", "unit"} <= set(entry):
            raise CalibrationError(f"{where}: every constant needs name, value and unit")
        if _constant_value(entry) is None:
            raise CalibrationError(f"{where}: constant {entry['name']!r} must be a finite number")
        checked.append(entry)
    return {
        "format": doc.get("format", ""),
        "provenance": doc.get("provenance"),
        "constants": checked,
    }


def load_constants(path: str | Path | None = None) -> dict[str, float]:
    """``{name: value}`` of the constants in ``path`` (default: the packaged file)."""
    doc = read_constant_entries(path)
    return {
        str(e["name"]): value
        for e in doc["constants"]
        if (value := _constant_value(e)) is not None  # every one: checked when read
    }


@cache
def _packaged() -> Mapping[str, float]:
    return load_constants()


def default_constants() -> dict[str, float]:
    """A fresh ``{name: value}`` copy of the packaged constants (read once per process)."""
    return dict(_packaged())


def write_constants(
    path: str | Path,
    values: Mapping[str, float],
    provenance: str,
    *,
    file_provenance: bool = True,
) -> None:
    """Write fitted ``values`` into the constants file at ``path``.

    Only the named constants change; each gets ``provenance`` as its new provenance, and the
    file's top-level ``provenance`` becomes ``provenance`` too unless ``file_provenance`` is
    False (a fit of a few constants on a subset of the rows, which does not describe where the
    file's other values come from: the top-level entry is kept). Unknown names or non-finite
    values raise ``CalibrationError`` (nothing is written then). When ``path`` does not exist
    yet the packaged file is the template.
    """
    target = Path(path)
    doc = read_constant_entries(target if target.exists() else None)
    by_name = {str(e["name"]): e for e in doc["constants"]}
    unknown = sorted(set(values) - set(by_name))
    if unknown:
        raise CalibrationError(f"unknown efficiency constants {unknown}; known: {sorted(by_name)}")
    for name, value in values.items():
        number = float(value)
        if not math.isfinite(number):
            raise CalibrationError(f"constant {name!r}: fitted value {value!r} is not finite")
        by_name[name]["value"] = number
        by_name[name]["provenance"] = provenance
    if file_provenance or not isinstance(doc["provenance"], str):
        doc["provenance"] = provenance
    text = "{\n"
    text += f'  "format": {json.dumps(doc["format"])},\n'
    text += f'  "provenance": {json.dumps(doc["provenance"])},\n'
    text += '  "constants": [\n'
    text += ",\n".join(f"    {json.dumps(e, ensure_ascii=False)}" for e in doc["constants"])
    text += "\n  ]\n}\n"
    target.write_text(text, encoding="utf-8")
    if target.resolve() == _default_path().resolve():
        _packaged.cache_clear()
