"""Parser of nccl-tests standard output (``all_reduce_perf``, ``all_gather_perf``,
``reduce_scatter_perf``, ``alltoall_perf``, ``sendrecv_perf``).

nccl-tests (github.com/NVIDIA/nccl-tests) prints a header of ``#`` comments (the
``# nThread 1 nGpus 8 minBytes ... maxBytes ...`` line, one
``#  Rank  r Group g Pid p on HOST device d [bus] NAME`` line per rank), then a table
(abridged here: the real one pads columns to align)::

    #                                    out-of-place                in-place
    #   size  count  type redop root   time algbw busbw #wrong   time algbw busbw #wrong
    #    (B) (elements)                (us) (GB/s) (GB/s)        (us) (GB/s) (GB/s)
           8      2 float   sum   -1  44.71  0.00  0.00      0  43.68  0.00  0.00      0

and a footer (``# Out of bounds values : 0 OK``, ``# Avg bus bandwidth    : 104.4``). Older
releases have no ``root`` column and an ``error`` column (a float) instead of ``#wrong``;
in-place values may be ``N/A`` (e.g. ``alltoall_perf``), and ``#wrong`` is ``N/A`` when
validation is off (``-c 0``). Columns are located by name from the header line, so either
layout parses.

Each data row gives one ``CollectiveSample`` per variant (out-of-place, in-place) with the
time converted from microseconds to seconds and the size in bytes (nccl-tests' convention,
see ``planner.calibration.collectives``). The group size is the number of ``Rank`` lines
(else ``nThread x nGpus``); the tier is ``scale_up`` when every rank runs on one host, else
``scale_out``. Rows whose ``#wrong`` is non-zero are dropped and counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from planner.calibration.collectives import Collective, CollectiveSample, Tier
from planner.errors import CalibrationError

__all__ = ["NcclTestsTable", "parse_nccl_tests"]

_RANK = re.compile(
    r"^#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s*(.*)$"
)
_THREADS = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)")
_BINARY = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|alltoall|sendrecv)_perf")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_UNSUPPORTED = re.compile(r"\b(broadcast|reduce|gather|scatter|hypercube)_perf")
_US = 1e-6
_GB = 1e9


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTestsTable:
    """One parsed nccl-tests run: its samples and header facts (SI units).

    ``avg_busbw_bytes_per_s`` is the footer's average (None when absent); ``num_wrong_rows``
    counts rows dropped for a non-zero ``#wrong``.
    """

    collective: Collective
    num_ranks: int
    tier: Tier
    hosts: tuple[str, ...]
    device_names: tuple[str, ...]
    dtype: str
    samples: tuple[CollectiveSample, ...]
    avg_busbw_bytes_per_s: float | None
    num_wrong_rows: int


def _collective(text: str, given: Collective | str | None, source: str) -> Collective:
    if given is not None:
        return Collective(given)
    for where in (text, source):
        match = _BINARY.search(where)
        if match:
            return Collective(match.group(1))
    if _UNSUPPORTED.search(text) or _UNSUPPORTED.search(source):
        raise CalibrationError(
            f"{source}: only all_reduce, all_gather, reduce_scatter, alltoall and sendrecv "
            "tables are modelled"
        )
    raise CalibrationError(
        f"{source}: cannot tell which nccl-tests binary produced this table; pass the "
        "collective (all_reduce, all_gather, reduce_scatter, alltoall, sendrecv) or name the "
        "file after the binary (e.g. all_reduce_perf.txt)"
    )


def _number(text: str, where: str, name: str) -> float | None:
    if text in ("N/A", "n/a", "-"):
        return None
    try:
        return float(text)
    except ValueError:
        raise CalibrationError(f"{where}: column {name!r} is {text!r}, not a number") from None


def parse_nccl_tests(
    text: str,
    *,
    collective: Collective | str | None = None,
    tier: Tier | str | None = None,
    source: str = "<nccl-tests>",
) -> NcclTestsTable:
    """Parse one nccl-tests output (module docstring).

    ``collective`` names the binary's collective when the text does not (it is looked for in
    the text, then in ``source``, e.g. a file name); ``tier`` overrides the host-based guess.
    Raises ``CalibrationError`` ``"<source>:<line>: ..."`` when no table header is found, a
    row has the wrong number of columns or a non-numeric value, or the collective is unknown.
    """
    coll = _collective(text, collective, source)
    lines = text.splitlines()
    ranks: dict[int, tuple[str, str]] = {}
    threads = gpus = 1
    header: list[str] | None = None
    avg: float | None = None
    rows: list[tuple[int, list[str]]] = []
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            rank = _RANK.match(line)
            if rank:
                ranks[int(rank.group(1))] = (rank.group(2), rank.group(4).strip())
                continue
            th = _THREADS.search(line)
            if th:
                threads, gpus = int(th.group(1)), int(th.group(2))
            tokens = line.lstrip("#").split()
            if tokens[:2] == ["size", "count"] and "busbw" in tokens:
                header = tokens
                continue
            found = _AVG.match(line)
            if found:
                avg = float(found.group(1)) * _GB
            continue
        if header is not None and line.split()[0].isdigit():
            rows.append((number, line.split()))
    if header is None:
        raise CalibrationError(
            f"{source}: no nccl-tests table header ('#  size  count  type ... busbw') found"
        )
    times = [i for i, t in enumerate(header) if t == "time"]
    if not times:
        raise CalibrationError(f"{source}: table header has no 'time' column")
    type_col = header.index("type") if "type" in header else None
    num_ranks = len(ranks) if ranks else threads * gpus
    hosts = tuple(sorted({h for h, _ in ranks.values()}))
    chosen_tier = (
        Tier(tier) if tier is not None else (Tier.SCALE_OUT if len(hosts) > 1 else Tier.SCALE_UP)
    )
    samples: list[CollectiveSample] = []
    wrong = 0
    dtype = "float"
    for number, tokens in rows:
        where = f"{source}:{number}"
        if len(tokens) != len(header):
            raise CalibrationError(
                f"{where}: {len(tokens)} columns, the table header has {len(header)}"
            )
        size = _number(tokens[0], where, "size")
        if size is None:
            raise CalibrationError(f"{where}: size is N/A")
        if type_col is not None:
            dtype = tokens[type_col]
        for variant, start in enumerate(times):
            in_place = variant == 1
            t_us = _number(tokens[start], where, "time")
            if t_us is None or t_us <= 0:
                continue
            check = header[start + 3] if start + 3 < len(header) else ""
            if check in ("#wrong", "error"):
                bad = _number(tokens[start + 3], where, check)
                if bad is not None and bad > 0:
                    wrong += 1
                    continue
            samples.append(
                CollectiveSample(
                    collective=coll,
                    num_ranks=max(num_ranks, 2),
                    tier=chosen_tier,
                    size_bytes=size,
                    time_s=t_us * _US,
                    in_place=in_place,
                    dtype=dtype,
                    source="nccl-tests",
                    backend="nccl",
                    hostname=",".join(hosts),
                )
            )
    if not samples:
        raise CalibrationError(f"{source}: the nccl-tests table has no usable rows")
    return NcclTestsTable(
        collective=coll,
        num_ranks=max(num_ranks, 2),
        tier=chosen_tier,
        hosts=hosts,
        device_names=tuple(sorted({d for _, d in ranks.values()})),
        dtype=dtype,
        samples=tuple(samples),
        avg_busbw_bytes_per_s=avg,
        num_wrong_rows=wrong,
    )
