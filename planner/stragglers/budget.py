"""Memory budget of a trace analysis (pure).

Measured on simulated 1F1B traces (``benchmarks/stragglers.py``, 64 to 8,192 workers): reading
a trace and analysing it (graph, every what-if, attribution) peaks at about 330-650 bytes of
Python heap per trace row, plus the replay batches (at most
``planner.stragglers.replicas.CHUNK_BYTES``, 256 MiB) and the interpreter with numpy and
pyarrow (about 250 MiB). The estimate below is ``BASE_BYTES + BYTES_PER_ROW * rows``, which
is above every measured peak RSS (8,192 workers, 1.49 M rows: about 0.9 GiB measured,
1.1 GiB estimated). With the default budget of 2 GiB a trace of up to about 3.1 M rows
(for example 16,384 workers x 16 micro-batches x 2 steps of 1F1B) is analysed; a larger one is
refused with an error that says how to fit it (fewer steps) instead of running out of memory.
"""

from __future__ import annotations

from planner.errors import SpecError

#: Default memory budget of one analysis, bytes (``planner stragglers --memory-budget-gib``).
MEMORY_BUDGET_BYTES = 2 * 1024**3
#: Interpreter, numpy, pyarrow and the replay batches, bytes.
BASE_BYTES = 256 * 1024**2
#: Peak bytes per trace row (reading plus analysis, rounded up from the measured 330-650).
BYTES_PER_ROW = 600

_GIB = 1024**3


def estimated_bytes(rows: int) -> int:
    """Estimated peak memory (bytes) of reading and analysing a trace of ``rows`` rows."""
    return BASE_BYTES + BYTES_PER_ROW * max(rows, 0)


def max_rows(budget_bytes: int = MEMORY_BUDGET_BYTES) -> int:
    """The largest trace (rows) whose estimated analysis fits ``budget_bytes``."""
    return max(0, (budget_bytes - BASE_BYTES) // BYTES_PER_ROW)


def check_rows(rows: int, budget_bytes: int = MEMORY_BUDGET_BYTES) -> None:
    """Raise ``SpecError`` when a trace of ``rows`` rows needs more than ``budget_bytes``."""
    if budget_bytes <= 0:
        raise SpecError("memory_budget", f"must be > 0 bytes, got {budget_bytes}")
    need = estimated_bytes(rows)
    if need > budget_bytes:
        raise SpecError(
            "trace",
            f"{rows:,} rows need about {need / _GIB:.1f} GiB to analyse, over the memory "
            f"budget of {budget_bytes / _GIB:.1f} GiB (at most {max_rows(budget_bytes):,} "
            "rows); analyse fewer steps (keep a sample of the trace's steps) or raise the "
            "budget (planner stragglers --memory-budget-gib)",
        )
