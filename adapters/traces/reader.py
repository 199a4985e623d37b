"""Readers of trace files into ``planner.specs.trace`` values (pyarrow + numpy, no pandas).

Each reader takes a path and, optionally, the file's bytes already read (``data``: what
:class:`adapters.traces.TraceFiles` read under the job file rules). Without ``data`` the file
is read here with bounds (:func:`adapters.files.read_local_file`: regular files only, at most
:data:`MAX_TRACE_BYTES` / :data:`MAX_META_BYTES`). A parquet file may unpack to at most
:data:`MAX_TRACE_UNPACKED_BYTES` and any table hold at most :data:`MAX_TRACE_ROWS` rows.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa  # pyarrow ships no stubs
import pyarrow.compute as pc  # pyarrow ships no stubs
import pyarrow.csv as pa_csv  # pyarrow ships no stubs
import pyarrow.parquet as pq  # pyarrow ships no stubs

from adapters.files import read_local_file
from planner.errors import SourceError, SpecError
from planner.scenario.loading import load_yaml
from planner.specs.trace import OP_TYPES, OpTrace, StepTimeSeries, TraceLayout

MAX_TRACE_BYTES = 512 * 2**20
"""Largest trace file read, bytes (512 MiB)."""
MAX_TRACE_UNPACKED_BYTES = 4 * 2**30
"""Largest uncompressed size of a parquet trace, bytes (its metadata says; 4 GiB)."""
MAX_TRACE_ROWS = 50_000_000
"""Most rows of a trace table."""
MAX_META_BYTES = 2**20
"""Largest meta (layout) file read, bytes (1 MiB)."""
BYTES_PER_FILE_BYTE = 16
"""Peak memory per byte of a trace file read, parsed and analysed, bytes: 12-14 measured for
CSV traces of 35,000-140,000 rows (simulated 1F1B, ``resource.getrusage`` peak RSS), 2 for a
file of NUL bytes (read, then refused by the parser); parquet needs less per file byte and is
bounded by its rows."""
BYTES_PER_ROW = 1000
"""Peak memory per trace row read and analysed, bytes (700-940 measured, as above)."""


def trace_limits(memory_budget_bytes: int) -> tuple[int, int]:
    """``(largest file, most rows)`` of a trace whose reading and analysis fit
    ``memory_budget_bytes`` (:data:`BYTES_PER_FILE_BYTE`, :data:`BYTES_PER_ROW`)."""
    return memory_budget_bytes // BYTES_PER_FILE_BYTE, memory_budget_bytes // BYTES_PER_ROW


#: Columns an operation trace must have (the artifact's names).
REQUIRED_COLUMNS = ("dp_rank", "stage", "step", "optype", "start_ts", "duration", "seq_id")
#: Columns used when present (model chunk, micro-batch).
OPTIONAL_COLUMNS = ("mc", "mb_id")
_FLOAT_COLUMNS = ("start_ts", "duration")
_MAX_INDEX = 2**53  # ranks, stages, steps and sequence ids beyond it are not integers
_CODES = {op.value: i for i, op in enumerate(OP_TYPES)}
_META_KEYS = {
    "dp_size": "data_parallel",
    "pp_size": "pipeline_parallel",
    "tp_size": "tensor_parallel",
    "dsp_size": "context_parallel",
    "vpp_size": "virtual_stages",
    "world_size": "world_size",
}


def file_bytes(path: str | Path, max_bytes: int) -> bytes:
    """The bytes of a file the planner's own user named, bounded; ``SpecError(path, ...)``
    when it is missing, not a regular file or too large."""
    source = str(path)
    try:
        return read_local_file("trace", os.path.abspath(source), max_bytes)
    except SourceError as exc:
        reason = exc.message.removeprefix(f"{os.path.abspath(source)}: ")
        hint = "; check the path" if reason == "no such file" else ""
        raise SpecError(source, f"{reason}{hint}") from None


def _read_table(path: str | Path, data: bytes | None, max_rows: int | None = None) -> pa.Table:
    """The file as an Arrow table: ``.parquet``/``.pq`` as parquet (refused before it is
    decoded when its footer counts more than ``max_rows`` rows), anything else as CSV."""
    source = str(path)
    if data is None:
        data = file_bytes(path, MAX_TRACE_BYTES)
    try:
        if source.endswith((".parquet", ".pq")):
            parquet = pq.ParquetFile(pa.BufferReader(data))
            meta = parquet.metadata
            unpacked = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
            if meta.num_rows > MAX_TRACE_ROWS or unpacked > MAX_TRACE_UNPACKED_BYTES:
                raise SpecError(
                    source,
                    f"{meta.num_rows:,} rows, {unpacked:,} bytes unpacked: more than the "
                    f"{MAX_TRACE_ROWS:,}-row or {MAX_TRACE_UNPACKED_BYTES:,}-byte limit",
                )
            _refuse(source, meta.num_rows, max_rows)
            table = parquet.read()
            # a corrupt page can decode into dictionary indices past the dictionary's end;
            # full validation finds them here rather than as an IndexError deep in the reader
            table.validate(full=True)
        else:
            table = pa_csv.read_csv(pa.BufferReader(data))
        table.column_names  # noqa: B018 (raises UnicodeDecodeError for non-UTF-8 names)
    except (OSError, pa.ArrowException, ValueError, TypeError, IndexError) as exc:
        raise SpecError(source, f"cannot read as a table ({_short(exc)})") from None
    if table.num_rows > MAX_TRACE_ROWS:
        raise SpecError(source, f"more than the {MAX_TRACE_ROWS:,}-row limit of a trace")
    return table


def _short(exc: BaseException) -> str:
    text = str(exc).split("\n", 1)[0]
    return text[:300] if text else type(exc).__name__


def read_layout(path: str | Path, *, data: bytes | None = None) -> TraceLayout:
    """The job layout from an artifact meta file (YAML: ``dp_size``, ``pp_size``, ``tp_size``,
    ``dsp_size``, ``vpp_size``, ``world_size``, ``trial_name``), ``data`` its bytes when
    already read. Raises ``SpecError``."""
    source = str(path)
    if data is None:
        data = file_bytes(path, MAX_META_BYTES)
    try:
        docs = load_yaml(data.decode("utf-8"), source)
    except UnicodeDecodeError as exc:
        raise SpecError(source, f"cannot read the meta file (not UTF-8: {exc.reason})") from None
    doc = docs[0] if len(docs) == 1 else None
    if not isinstance(doc, dict):
        raise SpecError(source, "must be a YAML mapping with dp_size, pp_size, ...")
    missing = [k for k in ("dp_size", "pp_size") if k not in doc]
    if missing:
        raise SpecError(f"{source}:{missing[0]}", "missing; the meta file must give it")
    kwargs: dict[str, Any] = {_META_KEYS[k]: doc[k] for k in _META_KEYS if k in doc}
    try:
        return TraceLayout(name=str(doc.get("trial_name", "")), **kwargs)
    except SpecError as exc:
        raise SpecError(f"{source}:{exc.field}", exc.message) from None


def _column(table: pa.Table, name: str) -> pa.ChunkedArray:
    column = table.column(name)
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if pa.types.is_null(column.type):  # a CSV column with no value at all
        column = column.cast(pa.string())
    return column


def _op_codes(
    column: pa.ChunkedArray,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], list[str]]:
    """Op-type codes (``OP_TYPES`` indices, -1 unknown or null), the mask of unknown non-null
    names and up to three of them; strings are looked up once per distinct value per chunk."""
    codes: list[np.ndarray[Any, Any]] = []
    unknown: list[np.ndarray[Any, Any]] = []
    examples: set[str] = set()
    for chunk in column.chunks:
        encoded = chunk if pa.types.is_dictionary(chunk.type) else pc.dictionary_encode(chunk)
        names = [None if v is None else str(v) for v in encoded.dictionary.to_pylist()]
        lookup = np.array([_CODES.get(v, -1) if v else -1 for v in names] + [-1], np.int64)
        bad = np.array([bool(v) and v not in _CODES for v in names] + [False], dtype=bool)
        index = np.asarray(encoded.indices.fill_null(len(names)).to_numpy(), dtype=np.int64)
        codes.append(lookup[index])
        unknown.append(bad[index])
        examples.update(names[i] or "" for i in np.unique(index[bad[index]]))
    if not codes:
        return np.zeros(0, np.int64), np.zeros(0, bool), []
    return np.concatenate(codes), np.concatenate(unknown), sorted(examples)[:3]


def _check_size(path: str | Path, max_rows: int | None) -> None:
    """Refuse a parquet file of more than ``max_rows`` rows before reading it (its footer
    says how many); CSV files are checked after reading."""
    source = str(path)
    if max_rows is None or not source.endswith((".parquet", ".pq")):
        return
    try:
        rows = pq.ParquetFile(source).metadata.num_rows
    except FileNotFoundError:
        raise SpecError(source, "no such file; check the path") from None
    except (OSError, pa.ArrowException) as exc:
        raise SpecError(source, f"cannot read as a table ({exc})") from None
    _refuse(source, rows, max_rows)


def _refuse(source: str, rows: int, max_rows: int | None) -> None:
    if max_rows is not None and rows > max_rows:
        raise SpecError(
            source,
            f"{rows:,} rows, over the {max_rows:,} that fit the memory budget; analyse fewer "
            "steps (keep a sample of the trace's steps) or raise the budget",
        )


def read_op_trace(
    path: str | Path,
    layout: TraceLayout,
    *,
    skip_bad_rows: bool = False,
    max_rows: int | None = None,
    data: bytes | None = None,
) -> OpTrace:
    """Operation trace of ``path`` (parquet or CSV with ``REQUIRED_COLUMNS``; ``data`` its
    bytes when already read).

    ``max_rows`` refuses a larger trace with ``SpecError`` (before decoding a parquet file).

    Bad rows (a null in a required column, an unknown ``optype``, a negative or non-finite
    ``start_ts``/``duration``, a rank outside ``layout``) raise ``SpecError`` naming the column
    and the first bad row (0-based), or, with ``skip_bad_rows``, are dropped and counted in
    ``OpTrace.num_skipped_rows``. Missing columns always raise.
    """
    source = str(path)
    if data is None:
        _check_size(path, max_rows)
    table = _read_table(path, data, max_rows)
    _refuse(source, table.num_rows, max_rows)
    missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
    if missing:
        raise SpecError(
            f"{source}:{missing[0]}",
            f"missing column(s) {', '.join(missing)}; an op trace needs "
            f"{', '.join(REQUIRED_COLUMNS)}",
        )
    n = table.num_rows
    bad = np.zeros(n, dtype=bool)
    reasons: list[tuple[int, str, str]] = []  # (first row, column, why)

    def flag(mask: np.ndarray[Any, Any], column: str, why: str) -> None:
        rows = np.flatnonzero(mask & ~bad)
        if rows.size:
            reasons.append((int(rows[0]), column, f"{rows.size} rows {why}"))
        bad[mask] = True

    values_of: dict[str, np.ndarray[Any, Any]] = {}
    for name in (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS):
        if name not in table.column_names:
            continue
        column = table.column(name) if name == "optype" else _column(table, name)
        flag(np.asarray(pc.is_null(column, nan_is_null=True)), name, "empty (null/NaN)")
        if name == "optype":
            codes, unknown, examples = _op_codes(table.column(name))
            if unknown.any():
                flag(unknown, name, f"with unknown op type(s) {', '.join(examples)}")
            values_of[name] = codes
            continue
        try:
            dtype = np.float64 if name in _FLOAT_COLUMNS else np.int64
            values = np.asarray(column.cast(pa.float64()).fill_null(0).to_numpy())
        except (pa.ArrowException, ValueError) as exc:
            raise SpecError(f"{source}:{name}", f"not numeric ({exc})") from None
        if dtype is np.int64:
            fractional = np.isfinite(values) & (values != np.round(values))
            flag(fractional, name, "not integers")
            huge = ~np.isfinite(values) | (np.abs(values) > _MAX_INDEX)
            flag(huge & np.isfinite(values), name, f"beyond ±{_MAX_INDEX:.0e}")
            values = np.where(huge, 0, values).astype(np.int64)
        else:
            flag(~np.isfinite(values) | (values < 0), name, "negative or infinite")
        values_of[name] = values
    flag(
        (values_of["dp_rank"] < 0) | (values_of["dp_rank"] >= layout.data_parallel),
        "dp_rank",
        f"outside 0..{layout.data_parallel - 1} (layout dp_size)",
    )
    flag(
        (values_of["stage"] < 0) | (values_of["stage"] >= layout.pipeline_parallel),
        "stage",
        f"outside 0..{layout.pipeline_parallel - 1} (layout pp_size)",
    )
    flag(values_of["seq_id"] < 0, "seq_id", "negative")
    if bad.any() and not skip_bad_rows:
        row, column, why = min(reasons)
        more = f" ({bad.sum()} bad rows in all)" if bad.sum() > 1 else ""
        raise SpecError(
            f"{source}:{column}",
            f"row {row}: {why}{more}; fix the file or skip bad rows",
        )
    keep = ~bad
    if not keep.any():
        raise SpecError(source, f"no usable rows (of {n})")

    every_row = bool(keep.all())

    def get(name: str) -> np.ndarray[Any, Any]:
        if name not in values_of:
            return np.full(int(keep.sum()), -1)
        return values_of[name] if every_row else values_of[name][keep]

    return OpTrace(
        layout=layout,
        dp_rank=get("dp_rank"),
        stage=get("stage"),
        step=get("step"),
        optype=get("optype"),
        start_s=get("start_ts"),
        duration_s=get("duration"),
        seq_id=get("seq_id"),
        chunk=get("mc"),
        microbatch=get("mb_id"),
        num_skipped_rows=int(bad.sum()),
    )


def read_step_times(
    path: str | Path,
    *,
    time_column: str = "time_s",
    rank_column: str = "rank",
    data: bytes | None = None,
) -> StepTimeSeries:
    """Per-rank step (or compute) times from a long table with ``step``, ``rank`` and
    ``time_s`` columns (one row per rank and step, seconds). Missing (step, rank) pairs become
    NaN; rows with null, negative or non-finite values are dropped (a gap in the series).
    Raises ``SpecError`` on missing columns or duplicate (step, rank) rows."""
    source = str(path)
    table = _read_table(path, data)
    for name in ("step", rank_column, time_column):
        if name not in table.column_names:
            raise SpecError(f"{source}:{name}", "missing column; need step, rank and a time")
    try:
        steps = np.asarray(table.column("step").cast(pa.float64()).fill_null(np.nan).to_numpy())
        times = np.asarray(
            table.column(time_column).cast(pa.float64()).fill_null(np.nan).to_numpy()
        )
    except (pa.ArrowException, ValueError) as exc:
        raise SpecError(source, f"step and time must be numeric ({exc})") from None
    ranks = np.asarray(
        _column(table, rank_column).cast(pa.string()).fill_null("").to_numpy(zero_copy_only=False),
        dtype=str,
    )
    ok = np.isfinite(steps) & (np.abs(steps) <= _MAX_INDEX)
    ok &= np.isfinite(times) & (times >= 0) & (ranks != "")
    steps, times, ranks = steps[ok].astype(np.int64), times[ok], ranks[ok]
    step_values, step_index = np.unique(steps, return_inverse=True)
    rank_values, rank_index = np.unique(ranks, return_inverse=True)
    cells = step_index * rank_values.size + rank_index
    if np.unique(cells).size != cells.size:
        raise SpecError(f"{source}:{rank_column}", "duplicate (step, rank) rows")
    grid = np.full((step_values.size, rank_values.size), np.nan)
    grid[step_index, rank_index] = times
    return StepTimeSeries(steps=step_values, ranks=tuple(str(r) for r in rank_values), times_s=grid)
