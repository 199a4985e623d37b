"""Per-rank operation traces of a training job, as frozen values (``adapters.traces`` builds them).

The schema is the one of the public traces of Lin et al., "Understanding Stragglers in Large Model
Training Using What-if Analysis" (OSDI '25, artifact ``ByteDance-Seed/StragglerAnalysis``): one row
per operation of one worker in one training step. A worker is a ``(dp_rank, stage)`` pair: the
traces record one rank per tensor-parallel group. Times are seconds; ``start_s`` is relative to an
origin shared by all workers within a step (the clocks are aligned), steps are sampled and need
not be contiguous.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from planner.errors import SpecError
from planner.specs._checks import require_int

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class OpType(StrEnum):
    """Operation types of a Megatron-style training step (the trace's ``optype`` column)."""

    FORWARD_COMPUTE = "forward-compute"
    BACKWARD_COMPUTE = "backward-compute"
    FORWARD_SEND = "forward-send"
    FORWARD_RECV = "forward-recv"
    BACKWARD_SEND = "backward-send"
    BACKWARD_RECV = "backward-recv"
    GRADS_REDUCE_SCATTER = "grads-reduce-scatter"
    PARAMS_ALL_GATHER = "params-all-gather"
    LAYERNORM_GRADS_ALL_REDUCE = "layernorm-grads-all-reduce"
    EMBEDDING_GRADS_ALL_REDUCE = "embedding-grads-all-reduce"
    OPTIMIZER_CLIP_MAIN_GRAD = "optimizer-clip-main-grad"
    OPTIMIZER = "optimizer"
    GC = "gc"

    @property
    def is_compute(self) -> bool:
        """True for operations that run locally on the worker (no peer to wait for)."""
        return self in _LOCAL

    @property
    def is_p2p(self) -> bool:
        """True for pipeline point-to-point sends and receives."""
        return self in _P2P


#: Op types in code order: ``OpTrace.optype`` holds indices into this tuple.
OP_TYPES: tuple[OpType, ...] = tuple(OpType)
_LOCAL = frozenset({OpType.FORWARD_COMPUTE, OpType.BACKWARD_COMPUTE, OpType.OPTIMIZER, OpType.GC})
_P2P = frozenset(
    {OpType.FORWARD_SEND, OpType.FORWARD_RECV, OpType.BACKWARD_SEND, OpType.BACKWARD_RECV}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceLayout:
    """Parallel layout of the traced job (the artifact's ``meta-*.yaml``).

    ``data_parallel`` replicas x ``pipeline_parallel`` stages x ``tensor_parallel`` x
    ``context_parallel`` (the artifact's ``dsp_size``, sequence split); ``virtual_stages`` model
    chunks per stage (interleaved 1F1B when > 1). ``world_size`` defaults to the product.
    """

    data_parallel: int
    pipeline_parallel: int
    tensor_parallel: int = 1
    context_parallel: int = 1
    virtual_stages: int = 1
    world_size: int = 0
    name: str = ""

    def __post_init__(self) -> None:
        for name in (
            "data_parallel",
            "pipeline_parallel",
            "tensor_parallel",
            "context_parallel",
            "virtual_stages",
        ):
            require_int(f"layout.{name}", getattr(self, name))
        require_int("layout.world_size", self.world_size, minimum=0)
        product = (
            self.data_parallel
            * self.pipeline_parallel
            * self.tensor_parallel
            * self.context_parallel
        )
        if self.world_size == 0:
            object.__setattr__(self, "world_size", product)
        elif self.world_size != product:
            raise SpecError(
                "layout.world_size",
                f"{self.world_size} != dp*pp*tp*dsp = {product}; fix the sizes in the meta file",
            )

    @property
    def num_workers(self) -> int:
        """Workers in the trace: one per (dp_rank, stage)."""
        return self.data_parallel * self.pipeline_parallel


def _frozen(values: npt.ArrayLike, dtype: type[np.generic]) -> npt.NDArray[np.generic]:
    array = np.array(values, dtype=dtype, copy=True)
    array.setflags(write=False)
    return array


@dataclass(frozen=True, slots=True, kw_only=True)
class OpTrace:
    """Operations of a job, one entry per (step, worker, operation); arrays of equal length N.

    ``dp_rank`` and ``stage`` (int, N) locate the worker, ``step`` (int, N) the training step,
    ``optype`` (int, N) indexes ``OP_TYPES``, ``start_s`` / ``duration_s`` (float, N) are seconds,
    ``seq_id`` (int, N) numbers the ops of one type on one worker within a step (0, 1, ...),
    ``chunk`` (int, N) the model chunk (virtual stage; -1 when not applicable), ``microbatch``
    (int, N) the micro-batch of compute ops (-1 otherwise). ``num_skipped_rows`` counts input rows
    the reader dropped (see ``adapters.traces``). Arrays are copied and made read-only.

    Raises ``SpecError`` on unequal lengths, ranks outside the layout, unknown op codes, or
    negative / non-finite times.
    """

    layout: TraceLayout
    dp_rank: IntArray
    stage: IntArray
    step: IntArray
    optype: IntArray
    start_s: FloatArray
    duration_s: FloatArray
    seq_id: IntArray
    chunk: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    microbatch: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    num_skipped_rows: int = 0

    def __post_init__(self) -> None:
        n = len(np.asarray(self.step))
        ints = ("dp_rank", "stage", "step", "optype", "seq_id", "chunk", "microbatch")
        for name in ints:
            values = np.asarray(getattr(self, name))
            if name in ("chunk", "microbatch") and values.size == 0:
                values = np.full(n, -1, dtype=np.int64)
            if values.shape != (n,):
                raise SpecError(f"trace.{name}", f"has {values.size} values, expected {n}")
            object.__setattr__(self, name, _frozen(values, np.int64))
        for name in ("start_s", "duration_s"):
            values = np.asarray(getattr(self, name))
            if values.shape != (n,):
                raise SpecError(f"trace.{name}", f"has {values.size} values, expected {n}")
            object.__setattr__(self, name, _frozen(values, np.float64))
        if n == 0:
            raise SpecError("trace", "has no operations")
        self._check_range("dp_rank", 0, self.layout.data_parallel - 1)
        self._check_range("stage", 0, self.layout.pipeline_parallel - 1)
        self._check_range("optype", 0, len(OP_TYPES) - 1)
        self._check_range("seq_id", 0, None)
        for name in ("start_s", "duration_s"):
            values = getattr(self, name)
            bad = np.flatnonzero(~np.isfinite(values) | (values < 0))
            if bad.size:
                raise SpecError(
                    f"trace.{name}",
                    f"{bad.size} negative or non-finite values (first at row {bad[0]}: "
                    f"{values[bad[0]]}); fix or drop those rows",
                )
        require_int("trace.num_skipped_rows", self.num_skipped_rows, minimum=0)

    def _check_range(self, name: str, low: int, high: int | None) -> None:
        values: IntArray = getattr(self, name)
        bad_mask = values < low if high is None else (values < low) | (values > high)
        bad = np.flatnonzero(bad_mask)
        if bad.size:
            allowed = f">= {low}" if high is None else f"in {low}..{high}"
            raise SpecError(
                f"trace.{name}",
                f"{bad.size} values outside {allowed} (first at row {bad[0]}: {values[bad[0]]}); "
                "check the trace against the layout in the meta file",
            )

    @property
    def num_ops(self) -> int:
        """Number of operations (N)."""
        return int(self.step.size)

    @property
    def worker(self) -> IntArray:
        """Worker index ``dp_rank * pipeline_parallel + stage`` (int, N)."""
        result: IntArray = self.dp_rank * self.layout.pipeline_parallel + self.stage
        return result

    @property
    def end_s(self) -> FloatArray:
        """End time of each operation, seconds (float, N)."""
        result: FloatArray = self.start_s + self.duration_s
        return result


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTimeSeries:
    """Per-rank time series of one job: ``times_s[i, r]`` is rank r's time in step ``steps[i]``.

    ``times_s`` (float, steps x ranks) holds step or compute times in seconds, NaN where a rank did
    not report; ``steps`` (int, steps) increases strictly; ``ranks`` names the columns (e.g.
    ``"dp0-pp1"`` or a hostname). Raises ``SpecError`` on shape mismatches, unsorted steps or
    negative times.
    """

    steps: IntArray
    ranks: tuple[str, ...]
    times_s: FloatArray

    def __post_init__(self) -> None:
        steps = _frozen(self.steps, np.int64)
        times = _frozen(self.times_s, np.float64)
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "times_s", times)
        if times.ndim != 2 or times.shape != (steps.size, len(self.ranks)):
            raise SpecError(
                "series.times_s",
                f"shape {times.shape} != (steps, ranks) = ({steps.size}, {len(self.ranks)})",
            )
        if steps.size > 1 and np.any(np.diff(steps) <= 0):
            raise SpecError("series.steps", "must increase strictly; sort and de-duplicate them")
        finite = times[np.isfinite(times)]
        if finite.size and finite.min() < 0:
            raise SpecError("series.times_s", f"negative time {finite.min()}")
        if np.any(np.isinf(times)):
            raise SpecError("series.times_s", "infinite time; use NaN for a missing value")
