"""Per-rank operation traces for ``planner stragglers`` (``adapters.traces``)."""

from __future__ import annotations

from adapters.traces import read_layout, read_op_trace
from planner.specs.trace import OpTrace

__all__ = ["read_trace"]


def read_trace(
    trace_path: str, meta_path: str, *, skip_bad_rows: bool = False, max_rows: int | None = None
) -> OpTrace:
    """A per-rank operation trace (parquet or CSV) with its layout file (meta YAML); raises
    ``SpecError`` naming the file and the problem (or a trace over ``max_rows`` rows)."""
    return read_op_trace(
        trace_path, read_layout(meta_path), skip_bad_rows=skip_bad_rows, max_rows=max_rows
    )
