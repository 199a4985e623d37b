"""Real traces (tests/data/traces, Apache-2.0, ByteDance-Seed/StragglerAnalysis @ 8efcd7f3)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from adapters.traces import read_layout, read_op_trace
from planner.specs.trace import OpTrace

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"


def trace_path(name: str) -> Path:
    return DATA / f"bytedance-straggler-trace-{name}.parquet"


def meta_path(name: str) -> Path:
    return DATA / f"bytedance-straggler-meta-{name}.yaml"


@cache
def load(name: str) -> OpTrace:
    return read_op_trace(trace_path(name), read_layout(meta_path(name)))
