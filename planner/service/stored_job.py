"""A stored job's last snapshot read back as the ``JobState`` it was stored from
(``planner.service.loops.jobs.job_state_dict`` writes it): what the capacity review's live
queue is made of, and what an active job that dropped out of its scheduler's reports is
finished from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any, get_type_hints

from planner.forecast.stored import integer, items, optional_integer, optional_real
from planner.service.models import JobRow
from planner.specs.job import JobState, JobStatus


def _text(value: object) -> str:
    """A stored string; raises ``TypeError`` for another value."""
    if isinstance(value, str):
        return value
    raise TypeError(f"not a string: {value!r}")


def _optional_text(value: object) -> str | None:
    """A stored string or None; raises ``TypeError`` for another value."""
    return None if value is None else _text(value)


def _flag(value: object) -> bool:
    """A stored bool; raises ``TypeError`` for another value."""
    if isinstance(value, bool):
        return value
    raise TypeError(f"not a bool: {value!r}")


def _names(value: object) -> tuple[str, ...]:
    """A stored list of node names (None: none); raises ``TypeError`` for another value."""
    names = tuple(items(value or ()))
    if not all(isinstance(name, str) for name in names):
        raise TypeError(f"not a list of names: {value!r}")
    return tuple(str(name) for name in names)


def _status(value: object) -> JobStatus:
    """A stored ``JobStatus`` value; raises ``TypeError`` or ``ValueError`` for another."""
    return JobStatus(_text(value))


#: How a stored snapshot's value is read, by the type of its ``JobState`` field.
_READERS: dict[object, Callable[[object], Any]] = {
    str: _text,
    str | None: _optional_text,
    int: integer,
    int | None: optional_integer,
    float | None: optional_real,
    bool: _flag,
    tuple[str, ...]: _names,
    JobStatus: _status,
}


def _reader(name: str, hint: object) -> Callable[[object], Any]:
    """The reader of a ``JobState`` field's stored value, by its type; raises ``TypeError``
    for a type none reads (a field added to ``JobState`` with a new type needs one)."""
    try:
        return _READERS[hint]
    except KeyError:
        raise TypeError(f"JobState.{name}: no reader of a stored {hint}; add one") from None


#: Each field of ``JobState``: its name, its reader and whether the snapshot must hold it
#: (the fields without a default).
_STATE_FIELDS = [
    (f.name, _reader(f.name, hint), f.default is MISSING)
    for f in fields(JobState)
    for hint in [get_type_hints(JobState)[f.name]]
]


def stored_job_state(row: JobRow) -> JobState | None:
    """The job's stored snapshot (``planner.service.loops.jobs.job_state_dict``) as a
    ``JobState``: each of its fields read by its type, a field the snapshot leaves out taking
    its default (the status: the row's); None when a field without a default is missing or a
    value is of another type (a snapshot stored by another version)."""
    doc = row.state or {}
    if any(required and name not in doc for name, _, required in _STATE_FIELDS):
        return None
    try:
        given = {name: read(doc[name]) for name, read, _ in _STATE_FIELDS if name in doc}
        given.setdefault("status", _status(row.status))
        return JobState(**given)
    except (TypeError, ValueError):
        return None
