"""Reading the straggler trackers' stored state back: the ``to_json`` documents of
``planner.stragglers.online.StragglerDetector`` and ``planner.stragglers.live.LiveStragglers``,
kept in the store between ingest cycles.

Each value is checked as it is read and comes back typed; a missing or mistyped one raises
``SpecError("<path>.<field>", "stored state is malformed: ...")``, naming the field, so a
state damaged in the store (or written by another version of the planner) can be found.
"""

from __future__ import annotations

from collections.abc import Mapping

from planner.errors import SpecError

__all__ = [
    "int_key",
    "integer",
    "integer_list",
    "mapping",
    "number",
    "number_list",
    "objects",
    "optional_number",
    "section",
    "text_list",
]


def _malformed(path: str, what: str) -> SpecError:
    return SpecError(path, f"stored state is malformed: {what}")


def mapping(value: object, path: str) -> Mapping[str, object]:
    """``value`` as a mapping with text keys (a JSON object)."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise _malformed(path, f"needs an object, got {type(value).__name__}")
    return value


def section(data: Mapping[str, object], key: str, path: str) -> Mapping[str, object]:
    """The object ``data[key]``."""
    return mapping(_get(data, key, path), f"{path}.{key}")


def _get(data: Mapping[str, object], key: str, path: str) -> object:
    if key not in data:
        raise _malformed(f"{path}.{key}", "missing")
    return data[key]


def _as_number(value: object, path: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise _malformed(path, f"needs a number, got {value!r}")
    return float(value)


def _as_integer(value: object, path: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise _malformed(path, f"needs an integer, got {value!r}")
    return value


def number(data: Mapping[str, object], key: str, path: str) -> float:
    """The number ``data[key]`` (an int or a float, not a bool)."""
    return _as_number(_get(data, key, path), f"{path}.{key}")


def optional_number(data: Mapping[str, object], key: str, path: str) -> float | None:
    """The number ``data[key]``, or None where it is null."""
    value = _get(data, key, path)
    return None if value is None else _as_number(value, f"{path}.{key}")


def integer(data: Mapping[str, object], key: str, path: str) -> int:
    """The integer ``data[key]``."""
    return _as_integer(_get(data, key, path), f"{path}.{key}")


def _items(data: Mapping[str, object], key: str, path: str) -> list[object]:
    value = _get(data, key, path)
    if not isinstance(value, list):
        raise _malformed(f"{path}.{key}", f"needs a list, got {type(value).__name__}")
    return value


def number_list(data: Mapping[str, object], key: str, path: str) -> list[float | None]:
    """The list of numbers ``data[key]``; null entries (a non-finite number) stay None."""
    return [
        None if v is None else _as_number(v, f"{path}.{key}[{i}]")
        for i, v in enumerate(_items(data, key, path))
    ]


def integer_list(data: Mapping[str, object], key: str, path: str) -> list[int]:
    """The list of integers ``data[key]``."""
    return [_as_integer(v, f"{path}.{key}[{i}]") for i, v in enumerate(_items(data, key, path))]


def text_list(data: Mapping[str, object], key: str, path: str) -> list[str]:
    """The list of strings ``data[key]``."""
    out: list[str] = []
    for i, v in enumerate(_items(data, key, path)):
        if not isinstance(v, str):
            raise _malformed(f"{path}.{key}[{i}]", f"needs text, got {v!r}")
        out.append(v)
    return out


def int_key(key: str, path: str) -> int:
    """An integer written as an object's key (a rank or an iteration)."""
    try:
        return int(key)
    except ValueError:
        raise _malformed(path, f"needs integer keys, got {key!r}") from None


def objects(data: Mapping[str, object], key: str, path: str) -> list[Mapping[str, object]]:
    """The list of objects ``data[key]``."""
    return [mapping(v, f"{path}.{key}[{i}]") for i, v in enumerate(_items(data, key, path))]
