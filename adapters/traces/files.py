"""Trace files that jobs name in their comment (``planner:trace=PATH planner:trace-meta=PATH``).

``TraceFiles`` implements :class:`planner.ports.TraceSource`: a cheap fingerprint (size and
modification time, to re-analyse only when a trace grew) and the read itself.
"""

from __future__ import annotations

import os

from adapters.traces.reader import read_layout, read_op_trace
from planner.errors import SpecError
from planner.specs.trace import OpTrace


class TraceFiles:
    """Reads per-rank operation traces from the local (shared) file system."""

    def fingerprint(self, trace_path: str, meta_path: str) -> str | None:
        """``size:mtime`` of both files, None when either is missing."""
        parts = []
        for path in (trace_path, meta_path):
            try:
                st = os.stat(path)
            except OSError:
                return None
            parts.append(f"{st.st_size}:{st.st_mtime_ns}")
        return "|".join(parts)

    def read(self, trace_path: str, meta_path: str) -> OpTrace:
        """The trace (rows with bad values skipped and counted); raises ``SpecError``."""
        if not os.path.isabs(trace_path) or not os.path.isabs(meta_path):
            raise SpecError("planner:trace", "trace and meta paths must be absolute")
        return read_op_trace(trace_path, read_layout(meta_path), skip_bad_rows=True)
