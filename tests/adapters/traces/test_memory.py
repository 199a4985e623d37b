"""A trace's memory is bounded (``TraceFiles(memory_budget_bytes=...)``): a file too large for
the budget is refused before it is read, a parquet trace of too many rows before it is decoded.

Probe of the finding: a 500 MiB sparse trace raised the planner's peak memory to 1.28 GB."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from adapters.traces import TraceFiles
from adapters.traces.reader import trace_limits
from planner.errors import SpecError

REPO = Path(__file__).resolve().parents[3]
DATA = REPO / "tests" / "data" / "traces"
MIB = 2**20
GIB = 2**30
HEADER = b"dp_rank,stage,step,optype,start_ts,duration,seq_id\n"

#: What a refused trace may add to the peak memory of the process reading it, bytes.
REFUSED_PEAK_BYTES = 64 * MIB

_PROBE = """
import json, resource, sys
from adapters.traces import TraceFiles
from planner.errors import PlannerError
from planner.specs.job import JobState
trace, meta, root = sys.argv[1:4]
files = TraceFiles(memory_budget_bytes=2**30, budget_setting="limits.trace_memory_bytes")
job = JobState(scheduler="slurm", cluster="c", job_id="1", work_dir=root)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    files.read(trace, meta, job=job)
    error = None
except PlannerError as exc:
    error = str(exc)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"added_bytes": (after - before) * 1024, "error": error}))
"""


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A world-searchable directory (job files are read as others would see them)."""
    root = Path(tempfile.mkdtemp(prefix="planner-trace-memory-", dir="/tmp"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        for child in root.iterdir():
            child.unlink()
        root.rmdir()


def _sparse_trace(root: Path, size_bytes: int) -> tuple[Path, Path]:
    trace, meta = root / "trace.csv", root / "meta.yaml"
    with trace.open("wb") as out:
        out.write(HEADER)
        out.truncate(size_bytes)  # a hole: no disk used, reads as NUL bytes
    meta.write_text("dp_size: 2\npp_size: 2\n")
    trace.chmod(0o644)
    meta.chmod(0o644)
    return trace, meta


def test_a_500_mib_sparse_trace_is_refused_before_it_is_read(shared_dir: Path) -> None:
    trace, meta = _sparse_trace(shared_dir, 500 * MIB)
    probe = subprocess.run(
        [sys.executable, "-c", _PROBE, str(trace), str(meta), str(shared_dir)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
        timeout=60,
    )
    outcome = json.loads(probe.stdout)
    assert outcome["error"] == (
        f"{trace}: 524,288,000 bytes, over the 67,108,864 bytes whose reading and analysis fit "
        "limits.trace_memory_bytes (1,073,741,824 bytes); keep fewer steps in the trace (or a "
        "parquet file) or raise it"
    )
    assert outcome["added_bytes"] < REFUSED_PEAK_BYTES  # was about 1 GB


def test_a_parquet_trace_of_too_many_rows_is_refused_before_it_is_decoded(
    tmp_path: Path,
) -> None:
    budget = 64 * MIB
    _, max_rows = trace_limits(budget)
    rows = max_rows + 1
    table = pa.table(
        {
            "dp_rank": pa.array([0] * rows, pa.int8()),
            "stage": pa.array([0] * rows, pa.int8()),
            "step": pa.array([0] * rows, pa.int8()),
            "optype": pa.array(["forward-compute"] * rows).dictionary_encode(),
            "start_ts": pa.array([0.0] * rows),
            "duration": pa.array([1.0] * rows),
            "seq_id": pa.array([0] * rows, pa.int8()),
        }
    )
    trace = tmp_path / "trace.parquet"
    pq.write_table(table, trace)
    meta = tmp_path / "meta.yaml"
    meta.write_text("dp_size: 1\npp_size: 1\n")
    files = TraceFiles(memory_budget_bytes=budget)
    with pytest.raises(SpecError, match=f"{rows:,} rows, over the {max_rows:,} that fit"):
        files.read(str(trace), str(meta))


def test_a_trace_within_the_budget_is_read() -> None:
    files = TraceFiles(memory_budget_bytes=GIB)
    trace = files.read(
        str(DATA / "bytedance-straggler-trace-ST.parquet"),
        str(DATA / "bytedance-straggler-meta-ST.yaml"),
    )
    assert trace.num_ops == 6784
    assert trace_limits(GIB) == (64 * MIB, 1_073_741)
