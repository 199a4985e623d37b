"""Collective timing samples and their latency-bandwidth (alpha-beta) fits (pure).

A ``CollectiveSample`` is one timed collective: which one, over how many ranks, on which tier
(``scale_up``: inside one node / NVLink domain; ``scale_out``: across nodes), the buffer size in
nccl-tests' convention (the total buffer: all-reduce in = out, all-gather the gathered output,
reduce-scatter the input, all-to-all each rank's send buffer, send/recv the message) and the
time. Samples come from nccl-tests output tables (``adapters.nccl``) or from the
``torch.distributed`` harness (``adapters.sampling``).

``fit_collectives`` fits, per (collective, group size, tier), the alpha-beta model

    time_s = alpha_s + bus_factor · size_bytes / bus_bandwidth_bytes_per_s

with nccl-tests' bus factors (``2(n-1)/n`` all-reduce, ``(n-1)/n`` all-gather, reduce-scatter
and all-to-all, ``1`` send/recv; nccl-tests ``doc/PERFORMANCE.md``), i.e. Hockney's model
(Hockney 1994) in bus-bandwidth form (Thakur et al. 2005). The fit is a non-negative least
squares on *relative* residuals (every size counts alike, from 8 B to GBs), and the quoted error
is held out: k-fold over the sizes, each fold predicted by a fit on the others.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import nnls

from planner.calibration.limits import (
    MAX_BUS_BYTES_PER_S,
    MAX_ELEMENTS,
    MAX_RANKS,
    check_at_most,
    check_time,
)
from planner.calibration.samples import CHECKPOINT_ROWS, MAX_SAMPLE_ROWS, row_limit_error
from planner.errors import CalibrationError
from planner.search.budget import checkpoint

__all__ = [
    "COLLECTIVE_SAMPLE_COLUMNS",
    "Collective",
    "CollectiveModel",
    "CollectiveSample",
    "Tier",
    "bus_factor",
    "fit_alpha_beta",
    "fit_collectives",
    "format_collective_samples_csv",
    "read_collective_samples_csv",
]

FloatArray = NDArray[np.float64]


class Collective(StrEnum):
    """Collectives measured by nccl-tests (binary ``<name>_perf``) and the gloo harness."""

    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "alltoall"
    SEND_RECV = "sendrecv"


class Tier(StrEnum):
    """Network tier a group spans."""

    SCALE_UP = "scale_up"
    SCALE_OUT = "scale_out"


def bus_factor(collective: Collective, num_ranks: int | float) -> float:
    """busbw / algbw of ``collective`` over ``num_ranks`` (nccl-tests ``doc/PERFORMANCE.md``)."""
    n = float(num_ranks)
    if collective is Collective.SEND_RECV or n <= 1:
        return 1.0
    if collective is Collective.ALL_REDUCE:
        return 2.0 * (n - 1.0) / n
    return (n - 1.0) / n


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveSample:
    """One timed collective (module docstring); ``time_s`` per call, ``size_bytes`` in the
    nccl-tests convention; ``source`` says where it comes from (``nccl-tests``,
    ``torch.distributed/gloo``), ``in_place`` the nccl-tests variant."""

    collective: Collective
    num_ranks: int
    tier: Tier
    size_bytes: float
    time_s: float
    in_place: bool = False
    dtype: str = "float32"
    source: str = ""
    backend: str = ""
    hostname: str = ""
    timestamp: str = ""

    def __post_init__(self) -> None:
        if self.num_ranks < 2:
            raise CalibrationError(f"num_ranks must be >= 2, got {self.num_ranks}")
        if not (math.isfinite(self.size_bytes) and self.size_bytes >= 0):
            raise CalibrationError(f"size_bytes must be >= 0, got {self.size_bytes!r}")
        if not (math.isfinite(self.time_s) and self.time_s > 0):
            raise CalibrationError(f"time_s must be > 0, got {self.time_s!r}")
        check_at_most("num_ranks", self.num_ranks, MAX_RANKS, "ranks")
        check_at_most("size_bytes", self.size_bytes, MAX_ELEMENTS, "elements")
        check_time("time_s", self.time_s)
        check_at_most(
            "busbw (size_bytes / time_s x bus factor)",
            self.busbw_bytes_per_s,
            MAX_BUS_BYTES_PER_S,
            "bus_rate",
        )

    @property
    def algbw_bytes_per_s(self) -> float:
        """Algorithm bandwidth, ``size / time``."""
        return self.size_bytes / self.time_s

    @property
    def busbw_bytes_per_s(self) -> float:
        """Bus bandwidth, ``algbw · bus_factor``."""
        return self.algbw_bytes_per_s * bus_factor(self.collective, self.num_ranks)


COLLECTIVE_SAMPLE_COLUMNS: tuple[str, ...] = (
    "collective",
    "num_ranks",
    "tier",
    "size_bytes",
    "time_s",
    "algbw_bytes_per_s",
    "busbw_bytes_per_s",
    "in_place",
    "dtype",
    "source",
    "backend",
    "hostname",
    "timestamp",
)
"""Columns of the collective sample CSV (the bandwidths are informational)."""


def format_collective_samples_csv(samples: Iterable[CollectiveSample]) -> str:
    """CSV text of ``samples`` (header ``COLLECTIVE_SAMPLE_COLUMNS``)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLLECTIVE_SAMPLE_COLUMNS)
    for s in samples:
        w.writerow(
            [
                str(s.collective),
                s.num_ranks,
                str(s.tier),
                repr(float(s.size_bytes)),
                repr(float(s.time_s)),
                repr(s.algbw_bytes_per_s),
                repr(s.busbw_bytes_per_s),
                int(s.in_place),
                s.dtype,
                s.source,
                s.backend,
                s.hostname,
                s.timestamp,
            ]
        )
    return buf.getvalue()


def read_collective_samples_csv(
    text: str,
    *,
    source: str = "<samples>",
    max_rows: int = MAX_SAMPLE_ROWS,
    max_rows_setting: str | None = None,
) -> list[CollectiveSample]:
    """Parse collective samples from CSV ``text``; ``CalibrationError`` ``"<source>:<line>:
    ..."`` for a missing column, an unknown collective or tier, a bad number, a value beyond
    its physical limit (``planner.calibration.limits``) or more than ``max_rows`` rows (naming
    ``max_rows_setting`` when given). Under a caller's budget it stops between rows when the
    budget says so."""
    reader = csv.DictReader(io.StringIO(text))
    need = ("collective", "num_ranks", "tier", "size_bytes", "time_s")
    missing = [c for c in need if c not in (reader.fieldnames or [])]
    if missing:
        raise CalibrationError(f"{source}:1: missing column(s) {', '.join(missing)}")
    out: list[CollectiveSample] = []
    for row in reader:
        where = f"{source}:{reader.line_num}"
        if len(out) >= max_rows:
            raise row_limit_error(where, max_rows, max_rows_setting)
        if len(out) % CHECKPOINT_ROWS == 0:
            checkpoint()
        try:
            out.append(
                CollectiveSample(
                    collective=Collective(row["collective"]),
                    num_ranks=int(row["num_ranks"]),
                    tier=Tier(row["tier"]),
                    size_bytes=float(row["size_bytes"]),
                    time_s=float(row["time_s"]),
                    in_place=(row.get("in_place") or "0").strip() in ("1", "true", "True"),
                    dtype=row.get("dtype") or "float32",
                    source=row.get("source") or "",
                    backend=row.get("backend") or "",
                    hostname=row.get("hostname") or "",
                    timestamp=row.get("timestamp") or "",
                )
            )
        except (ValueError, CalibrationError) as exc:
            raise CalibrationError(f"{where}: {exc}") from None
    if not out:
        raise CalibrationError(f"{source}: no sample rows after the header")
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveModel:
    """A fitted alpha-beta curve of one (collective, group size, tier) (module docstring).

    ``held_out_mape`` / ``held_out_max_ape`` are the mean / largest absolute relative error of
    the k-fold held-out predictions (NaN with fewer than 4 sizes); ``min_size_bytes`` and
    ``max_size_bytes`` bound the sampled domain.
    """

    collective: Collective
    num_ranks: int
    tier: Tier
    alpha_s: float
    bus_bandwidth_bytes_per_s: float
    num_samples: int
    min_size_bytes: float
    max_size_bytes: float
    held_out_mape: float
    held_out_max_ape: float
    sources: tuple[str, ...] = ()

    def time_s(self, size_bytes: FloatArray | float) -> FloatArray:
        """Predicted seconds for buffers of ``size_bytes`` (nccl-tests convention)."""
        size = np.asarray(size_bytes, dtype=np.float64)
        factor = bus_factor(self.collective, self.num_ranks)
        out: FloatArray = self.alpha_s + factor * size / self.bus_bandwidth_bytes_per_s
        return out

    def to_dict(self) -> dict[str, object]:
        """Plain-JSON form (``from_dict`` inverts it)."""
        return {
            "collective": str(self.collective),
            "num_ranks": self.num_ranks,
            "tier": str(self.tier),
            "alpha_s": self.alpha_s,
            "bus_bandwidth_bytes_per_s": self.bus_bandwidth_bytes_per_s,
            "num_samples": self.num_samples,
            "min_size_bytes": self.min_size_bytes,
            "max_size_bytes": self.max_size_bytes,
            "held_out_mape": None if math.isnan(self.held_out_mape) else self.held_out_mape,
            "held_out_max_ape": None
            if math.isnan(self.held_out_max_ape)
            else self.held_out_max_ape,
            "sources": list(self.sources),
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> CollectiveModel:
        """Inverse of ``to_dict``; ``CalibrationError`` for a malformed entry."""
        try:

            def num(name: str) -> float:
                value = data.get(name)
                if value is None:
                    return math.nan
                if not isinstance(value, int | float | str):
                    raise TypeError(f"{name} must be a number, got {type(value).__name__}")
                return float(value)

            sources = data.get("sources") or []
            if not isinstance(sources, list | tuple):
                raise TypeError(f"sources must be a list, got {type(sources).__name__}")
            return cls(
                collective=Collective(str(data["collective"])),
                num_ranks=int(num("num_ranks")),
                tier=Tier(str(data["tier"])),
                alpha_s=num("alpha_s"),
                bus_bandwidth_bytes_per_s=num("bus_bandwidth_bytes_per_s"),
                num_samples=int(num("num_samples")),
                min_size_bytes=num("min_size_bytes"),
                max_size_bytes=num("max_size_bytes"),
                held_out_mape=num("held_out_mape"),
                held_out_max_ape=num("held_out_max_ape"),
                sources=tuple(str(s) for s in sources),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CalibrationError(f"malformed collective model {data!r}: {exc}") from None


def _solve(x: FloatArray, t: FloatArray) -> tuple[float, float]:
    """``(alpha_s, inverse bus bandwidth)`` >= 0 minimising relative residuals."""
    a = np.column_stack([1.0 / t, x / t])
    coef, _ = nnls(a, np.ones_like(t))
    return float(coef[0]), float(coef[1])


def fit_alpha_beta(
    collective: Collective,
    num_ranks: int,
    size_bytes: Sequence[float] | FloatArray,
    time_s: Sequence[float] | FloatArray,
    *,
    num_folds: int = 5,
) -> tuple[float, float, float, float]:
    """``(alpha_s, bus_bandwidth_bytes_per_s, held_out_mape, held_out_max_ape)`` of one curve.

    Needs at least two distinct sizes (``CalibrationError`` otherwise); the held-out errors
    are NaN with fewer than 4 samples. A curve with no measurable size dependence gets an
    infinite bandwidth.
    """
    size = np.asarray(size_bytes, dtype=np.float64)
    t = np.asarray(time_s, dtype=np.float64)
    if size.size < 2 or np.unique(size).size < 2:
        raise CalibrationError(
            f"{collective} over {num_ranks} ranks: need samples at two or more sizes to fit "
            "latency and bandwidth"
        )
    x = bus_factor(collective, num_ranks) * size
    alpha, inv = _solve(x, t)
    mape = max_ape = math.nan
    if size.size >= 4:
        folds = min(num_folds, size.size)
        order = np.argsort(size, kind="stable")
        errors = np.empty(size.size)
        for f in range(folds):
            test = order[f::folds]
            train = np.setdiff1d(order, test)
            if np.unique(size[train]).size < 2:
                continue
            a_f, inv_f = _solve(x[train], t[train])
            errors[test] = np.abs(a_f + inv_f * x[test] - t[test]) / t[test]
        mape, max_ape = float(np.mean(errors)), float(np.max(errors))
    bw = math.inf if inv <= 0 else 1.0 / inv
    return alpha, bw, mape, max_ape


def fit_collectives(samples: Iterable[CollectiveSample]) -> list[CollectiveModel]:
    """One ``CollectiveModel`` per (collective, group size, tier) of ``samples`` (sorted);
    groups with a single size are skipped (they cannot separate latency from bandwidth)."""
    groups: dict[tuple[Collective, int, Tier], list[CollectiveSample]] = {}
    for s in samples:
        groups.setdefault((s.collective, s.num_ranks, s.tier), []).append(s)
    out: list[CollectiveModel] = []
    for (coll, n, tier), rows in sorted(groups.items()):
        sizes = np.array([r.size_bytes for r in rows])
        if np.unique(sizes).size < 2:
            continue
        times = np.array([r.time_s for r in rows])
        alpha, bw, mape, max_ape = fit_alpha_beta(coll, n, sizes, times)
        out.append(
            CollectiveModel(
                collective=coll,
                num_ranks=n,
                tier=tier,
                alpha_s=alpha,
                bus_bandwidth_bytes_per_s=bw,
                num_samples=len(rows),
                min_size_bytes=float(sizes.min()),
                max_size_bytes=float(sizes.max()),
                held_out_mape=mape,
                held_out_max_ape=max_ape,
                sources=tuple(sorted({r.source for r in rows if r.source})),
            )
        )
    return out
