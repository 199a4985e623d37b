"""Operator timing samples: the row type and its CSV form (pure: text in, text out).

One ``OpSample`` is one timed operator call shape: the op and pass, the dtype, its shape
dimensions (``planner.calibration.ops.OP_DIMS``), the median and spread of ``num_repeats``
timed calls after ``num_warmup`` untimed ones, and where it was measured (device, software
versions, host, UTC timestamp). The sampling harness (``adapters.sampling``) writes these rows;
``read_op_samples_csv`` reads them back and raises ``CalibrationError`` naming the line and the
field of a malformed row.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from planner.calibration.limits import (
    MAX_BYTES_PER_S,
    MAX_ELEMENTS,
    MAX_FLOP_PER_S,
    MAX_GEMM_DIM,
    check_at_most,
    check_time,
)
from planner.calibration.ops import (
    ALL_DIMS,
    DTYPE_BYTES,
    OP_DIMS,
    OP_PASSES,
    OpKey,
    OpKind,
    Pass,
    op_bytes,
    op_flops,
)
from planner.errors import CalibrationError
from planner.search.budget import checkpoint

__all__ = [
    "OP_SAMPLE_COLUMNS",
    "OpSample",
    "format_op_samples_csv",
    "read_op_samples_csv",
    "row_limit_error",
]

OP_SAMPLE_COLUMNS: tuple[str, ...] = (
    "op",
    "pass",
    "dtype",
    *ALL_DIMS,
    "flop",
    "bytes",
    "time_median_s",
    "time_p25_s",
    "time_p75_s",
    "time_min_s",
    "num_repeats",
    "num_warmup",
    "device",
    "device_name",
    "torch_version",
    "cuda_version",
    "num_threads",
    "hostname",
    "timestamp",
)
"""Columns of the operator sample CSV, in order (``flop`` and ``bytes`` are informational:
they are recomputed from the shape on reading)."""

_REQUIRED = ("op", "pass", "dtype", "time_median_s")
MAX_SAMPLE_CSV_CHARS = 64 * 2**20
"""Longest operator sample CSV read, characters (64 MiB, about 300,000 rows)."""
MAX_SAMPLE_ROWS = 1_000_000
"""Most sample rows one CSV may hold (a caller may ask for fewer)."""
CHECKPOINT_ROWS = 1000
"""Rows read between two looks at the caller's budget (``planner.search.budget``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OpSample:
    """One sampled operator shape (SI units; see the module docstring).

    ``dims`` maps each of ``OP_DIMS[op]`` to its size (elements); ``time_*_s`` are seconds
    per call; ``device`` is ``"cpu"`` or ``"cuda"``, ``device_name`` the processor's name.
    """

    op: OpKind
    pass_: Pass
    dtype: str
    dims: Mapping[str, float]
    time_median_s: float
    time_p25_s: float = math.nan
    time_p75_s: float = math.nan
    time_min_s: float = math.nan
    num_repeats: int = 1
    num_warmup: int = 0
    device: str = ""
    device_name: str = ""
    torch_version: str = ""
    cuda_version: str = ""
    num_threads: int = 0
    hostname: str = ""
    timestamp: str = ""
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.pass_ not in OP_PASSES[self.op]:
            raise CalibrationError(
                f"{self.op} has no {self.pass_} pass; use one of {', '.join(OP_PASSES[self.op])}"
            )
        if self.dtype not in DTYPE_BYTES:
            raise CalibrationError(
                f"dtype {self.dtype!r} unknown; use one of {', '.join(DTYPE_BYTES)}"
            )
        for name in OP_DIMS[self.op]:
            value = self.dims.get(name)
            if value is None or not math.isfinite(value) or value < 1:
                raise CalibrationError(f"{self.op} needs {name} >= 1, got {value!r}")
            if self.op is OpKind.GEMM:
                check_at_most(name, value, MAX_GEMM_DIM, "gemm_dim")
            check_at_most(name, value, MAX_ELEMENTS, "elements")
        if not (math.isfinite(self.time_median_s) and self.time_median_s > 0):
            raise CalibrationError(f"time_median_s must be > 0, got {self.time_median_s!r}")
        for name in ("time_median_s", "time_p25_s", "time_p75_s", "time_min_s"):
            check_time(name, getattr(self, name))
        shape = ", ".join(OP_DIMS[self.op])
        check_at_most(f"bytes (from {shape})", self.bytes, MAX_ELEMENTS, "elements")
        check_at_most(
            f"flop / time_median_s (from {shape})",
            self.flop / self.time_median_s,
            MAX_FLOP_PER_S,
            "flop_rate",
        )
        check_at_most(
            f"bytes / time_median_s (from {shape})",
            self.bytes / self.time_median_s,
            MAX_BYTES_PER_S,
            "byte_rate",
        )

    @property
    def key(self) -> OpKey:
        """The modelled operator this sample belongs to."""
        return OpKey(self.op, self.pass_)

    @property
    def dtype_bytes(self) -> float:
        """Bytes per element of ``dtype``."""
        return DTYPE_BYTES[self.dtype]

    @property
    def flop(self) -> float:
        """FLOPs of the call (``planner.calibration.ops.op_flops``)."""
        dims = {k: np.asarray(v) for k, v in self.dims.items()}
        return float(op_flops(self.op, self.pass_, dims))

    @property
    def bytes(self) -> float:
        """Bytes the call must move (``planner.calibration.ops.op_bytes``)."""
        dims = {k: np.asarray(v) for k, v in self.dims.items()}
        return float(op_bytes(self.op, self.pass_, dims, self.dtype_bytes))


def _fmt(value: float) -> str:
    if isinstance(value, float) and math.isnan(value):
        return ""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def format_op_samples_csv(samples: Iterable[OpSample]) -> str:
    """The CSV text of ``samples`` (header ``OP_SAMPLE_COLUMNS``, one row per sample)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(OP_SAMPLE_COLUMNS)
    for s in samples:
        row: dict[str, str] = {
            "op": str(s.op),
            "pass": str(s.pass_),
            "dtype": s.dtype,
            "flop": _fmt(s.flop),
            "bytes": _fmt(s.bytes),
            "time_median_s": repr(s.time_median_s),
            "time_p25_s": _fmt(s.time_p25_s),
            "time_p75_s": _fmt(s.time_p75_s),
            "time_min_s": _fmt(s.time_min_s),
            "num_repeats": str(s.num_repeats),
            "num_warmup": str(s.num_warmup),
            "device": s.device,
            "device_name": s.device_name,
            "torch_version": s.torch_version,
            "cuda_version": s.cuda_version,
            "num_threads": str(s.num_threads),
            "hostname": s.hostname,
            "timestamp": s.timestamp,
        }
        for name in ALL_DIMS:
            row[name] = _fmt(float(s.dims[name])) if name in s.dims else ""
        writer.writerow([row[c] for c in OP_SAMPLE_COLUMNS])
    return buf.getvalue()


def _float(where: str, name: str, text: str | None, *, default: float | None = None) -> float:
    if text is None or text.strip() == "":
        if default is not None:
            return default
        raise CalibrationError(f"{where}: column {name!r} is empty; it needs a number")
    try:
        return float(text)
    except ValueError:
        raise CalibrationError(f"{where}: column {name!r} is {text[:40]!r}, not a number") from None


def _count(where: str, name: str, text: str | None, *, default: int) -> int:
    """A count column (repeats, warm-up calls, threads): a finite number, truncated."""
    value = _float(where, name, text, default=default)
    if not math.isfinite(value) or abs(value) > 2**53:
        raise CalibrationError(f"{where}: column {name!r} is {value!r}, not a count")
    return int(value)


def read_op_samples_csv(
    text: str,
    *,
    source: str = "<samples>",
    max_rows: int = MAX_SAMPLE_ROWS,
    max_rows_setting: str | None = None,
) -> list[OpSample]:
    """Parse operator samples from CSV ``text`` (header row first, any column order; columns
    beyond ``OP_SAMPLE_COLUMNS`` are kept in ``extra``).

    Raises ``CalibrationError`` ``"<source>:<line>: ..."`` for a missing header column, an
    unknown op, pass or dtype, a missing or non-positive dimension or time, a value beyond its
    physical limit (``planner.calibration.limits``), a malformed CSV line, and for text over
    ``MAX_SAMPLE_CSV_CHARS`` or more than ``max_rows`` rows (the message names
    ``max_rows_setting`` when given). Under a caller's budget (``planner.search.budget``) it
    stops between rows when the budget says so.
    """
    if len(text) > MAX_SAMPLE_CSV_CHARS:
        raise CalibrationError(
            f"{source}: {len(text):,} characters, more than the {MAX_SAMPLE_CSV_CHARS:,}-character "
            "limit of a sample CSV; split the run"
        )
    reader = csv.DictReader(io.StringIO(text))
    try:
        return _read_rows(reader, source, max_rows, max_rows_setting)
    except csv.Error as exc:
        raise CalibrationError(f"{source}:{reader.line_num}: malformed CSV ({exc})") from None


def row_limit_error(where: str, max_rows: int, setting: str | None) -> CalibrationError:
    """The error of a sample CSV over ``max_rows`` rows (naming ``setting`` when given)."""
    fix = f" ({setting}); send fewer rows or raise {setting}" if setting else "; split the run"
    return CalibrationError(f"{where}: more than the {max_rows:,}-row limit{fix}")


def _read_rows(
    reader: csv.DictReader[str], source: str, max_rows: int, setting: str | None
) -> list[OpSample]:
    header = reader.fieldnames or []
    missing = [c for c in _REQUIRED if c not in header]
    if missing:
        raise CalibrationError(
            f"{source}:1: missing column(s) {', '.join(missing)}; an operator sample CSV needs "
            f"at least {', '.join(_REQUIRED)} and the shape columns of each op"
        )
    out: list[OpSample] = []
    known = set(OP_SAMPLE_COLUMNS)
    for row in reader:
        where = f"{source}:{reader.line_num}"
        if len(out) >= max_rows:
            raise row_limit_error(where, max_rows, setting)
        if len(out) % CHECKPOINT_ROWS == 0:
            checkpoint()
        try:
            op = OpKind(row["op"])
        except ValueError:
            raise CalibrationError(
                f"{where}: unknown op {row['op']!r}; use one of {', '.join(OpKind)}"
            ) from None
        try:
            pass_ = Pass(row["pass"])
        except ValueError:
            raise CalibrationError(
                f"{where}: unknown pass {row['pass']!r}; use one of {', '.join(Pass)}"
            ) from None
        dims = {name: _float(where, name, row.get(name)) for name in OP_DIMS[op]}
        try:
            out.append(
                OpSample(
                    op=op,
                    pass_=pass_,
                    dtype=row["dtype"],
                    dims=dims,
                    time_median_s=_float(where, "time_median_s", row.get("time_median_s")),
                    time_p25_s=_float(where, "time_p25_s", row.get("time_p25_s"), default=math.nan),
                    time_p75_s=_float(where, "time_p75_s", row.get("time_p75_s"), default=math.nan),
                    time_min_s=_float(where, "time_min_s", row.get("time_min_s"), default=math.nan),
                    num_repeats=_count(where, "num_repeats", row.get("num_repeats"), default=1),
                    num_warmup=_count(where, "num_warmup", row.get("num_warmup"), default=0),
                    device=row.get("device") or "",
                    device_name=row.get("device_name") or "",
                    torch_version=row.get("torch_version") or "",
                    cuda_version=row.get("cuda_version") or "",
                    num_threads=_count(where, "num_threads", row.get("num_threads"), default=0),
                    hostname=row.get("hostname") or "",
                    timestamp=row.get("timestamp") or "",
                    extra={
                        k: str(v or "") for k, v in row.items() if k not in known and k is not None
                    },
                )
            )
        except CalibrationError as exc:
            raise CalibrationError(f"{where}: {exc}") from None
    if not out:
        raise CalibrationError(f"{source}: no sample rows after the header")
    return out
