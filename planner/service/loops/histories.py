"""A job's progress history read once per cycle: the object that wrote the stored dict is
handed to the next reader of the same row instead of being read back from that dict.

A job that progressed has its history read (``ProgressHistory.from_json``, 15-30 µs for a running
job's history of ``benchmarks.ingest_cpu``) where its progress records are stored
(``planner.service.loops.progress.store_records``), written back as a dict, and read again
from that dict where its ETA is made (``planner.service.loops.eta.update_eta``) in the same
cycle. :func:`write_history` stores the dict and keeps the object beside it on the row;
:func:`read_history` returns that object only while the row's column still holds that very
dict (``is``: any other write of the column, or a row read afresh from the store, reads the
dict again), and takes it off the row: the object has one owner at a time, the code that read
it, and a change it makes reaches the next reader only through :func:`write_history`.
``ProgressHistory.from_json(history.to_json())`` equals ``history`` field for field (the
round trip of ``tests/forecast``), so a reader gets what reading the dict would give.
"""

from __future__ import annotations

from planner.forecast.history import ProgressHistory
from planner.service.models import JobRow

_WRITTEN = "_progress_history_written"
"""The row's attribute (no column) holding ``(dict stored, history that wrote it)``."""


def read_history(row: JobRow) -> ProgressHistory:
    """The job's progress history, the caller's to change: the object that wrote the row's
    ``progress_history`` when the column still holds what it wrote (taken off the row), else
    the column read (an empty history for None)."""
    written = row.__dict__.pop(_WRITTEN, None)
    if written is not None:
        doc, history = written
        if doc is row.progress_history and isinstance(history, ProgressHistory):
            return history
    return ProgressHistory.from_json(row.progress_history)


def write_history(row: JobRow, history: ProgressHistory) -> None:
    """Store ``history`` in the row's ``progress_history`` and keep it for the next
    :func:`read_history` of the row; the caller hands it over (it changes it no more)."""
    doc = history.to_json()
    row.progress_history = doc
    row.__dict__[_WRITTEN] = (doc, history)
