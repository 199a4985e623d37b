"""Per-rank operation traces and step-time series from files (parquet or CSV, read with pyarrow).

``read_op_trace(path, layout)`` and ``read_layout(meta_path)`` read the schema of the OSDI '25
straggler traces (``ByteDance-Seed/StragglerAnalysis``); ``read_step_times(path)`` reads live
per-rank step or compute times. Library errors become ``SpecError`` naming the file, column and
row.
"""

from adapters.traces.files import TraceFiles
from adapters.traces.reader import (
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    read_layout,
    read_op_trace,
    read_step_times,
)

__all__ = [
    "OPTIONAL_COLUMNS",
    "REQUIRED_COLUMNS",
    "TraceFiles",
    "read_layout",
    "read_op_trace",
    "read_step_times",
]
