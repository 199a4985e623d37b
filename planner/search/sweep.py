"""The sweep: every candidate of a ``DesignSpace``, checked and timed in vectorised chunks.

``sweep(space, objective=...)`` walks the space in chunks of ``chunk_size`` candidates
(bounded memory for 10^8-candidate spaces): each chunk is decoded from its index range,
invalid layouts are rejected with their reason (``REJECT_REASONS``), the memory model
(``planner.perf.memory.memory_arrays``) rejects those that do not fit in HBM, and the rest are
timed by the engine ``planner predict`` uses (``planner.perf.engine.evaluate`` over
``candidate_arrays``; one engine, identical numbers). What candidates share is computed once:
the layout rules of coarse classes (``SubSpace.decode_valid``), and per sub-space the operator
table, one layer's activations and the tensor-parallel times, by operator key
(``planner.search.shared``). A running top-k and Pareto front are
merged chunk by chunk (``planner.search.fronts``); chunks run on ``workers`` threads (numpy
releases the GIL). With a ``tolerance``, the top-k holds ``k`` distinct choices: near-equal
candidates (objective within the relative tolerance of a better one's, ``fronts.groups``) are
one choice, its best candidate ranked and the others listed as its equivalents. A caller's
budget (``planner.search.budget``: candidates, time, cancellation) is checked before the sweep
and between chunks.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from planner.errors import SpecError
from planner.perf import ops
from planner.perf.candidates import CandidateColumns, candidate_arrays
from planner.perf.efficiency import DefaultEfficiency, EfficiencyModel
from planner.perf.engine import evaluate
from planner.perf.memory import LayerActivations, MemoryArrays, memory_arrays
from planner.perf.operators import OperatorTimes
from planner.perf.tensor import TensorParallelTimes
from planner.search.budget import check_candidates, checkpoint
from planner.search.fronts import Kept, groups, pareto, top, top_groups
from planner.search.objectives import Objective, as_objective, objective_values
from planner.search.shared import (
    SharedByKey,
    shared_layer_activations,
    shared_operator_times,
    shared_tensor_times,
)
from planner.search.space import OUT_OF_MEMORY, REJECT_REASONS, DesignSpace, SubSpace

__all__ = ["DEFAULT_CHUNK_SIZE", "SweepOutcome", "sweep"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

DEFAULT_CHUNK_SIZE = 1 << 17
"""Candidates decoded per chunk: ~12 int64 columns of 1 MiB each, whatever the space size."""


@dataclass(slots=True)
class _Partial:
    """What one chunk (or a reduction of chunks) contributes."""

    rejected: IntArray
    evaluated: int
    top: Kept
    front: Kept
    min_oom_memory: float = math.inf
    num_below: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepOutcome:
    """Array-level result of a sweep: counts, the best candidates and the Pareto front.

    ``top`` and ``pareto`` hold ``CandidateColumns`` (and objective values in minimisation
    form) of at most ``top_k`` / all non-dominated candidates; ``rejected`` counts per
    ``REJECT_REASONS``; ``min_oom_memory_bytes`` is the smallest peak memory among the
    layouts rejected as out of memory (``inf`` when none was); ``num_below`` the evaluated
    candidates strictly better than ``sweep``'s ``count_below``.

    With a ``tolerance`` (relative, on the objective), ``top`` holds the best candidate of
    each of the ``top_k`` best groups of near-equal candidates and ``equivalents`` the other
    members of those groups, in ranking order, ``equivalent_of[i]`` the row of ``top`` whose
    group equivalent ``i`` joins (shape ``(num_equivalents,)``); without, they are empty.
    """

    enumerated: int
    evaluated: int
    rejected: dict[str, int]
    top: CandidateColumns
    top_objective: FloatArray
    pareto: CandidateColumns
    pareto_objective: FloatArray
    min_oom_memory_bytes: float
    hbm_bytes: float
    num_below: int = 0
    memory_headroom_bytes: float = 0.0
    tolerance: float | None = None
    equivalents: CandidateColumns = field(default_factory=lambda: Kept.empty().cols)
    equivalents_objective: FloatArray = field(default_factory=lambda: np.zeros(0))
    equivalent_of: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


@dataclass(frozen=True, slots=True)
class _Shared:
    """The tables one sub-space's chunks share (``planner.search.shared``)."""

    operators: SharedByKey[OperatorTimes]
    activations: SharedByKey[LayerActivations]
    tensor: SharedByKey[TensorParallelTimes]


def _chunks(space: DesignSpace, chunk_size: int) -> Iterator[tuple[SubSpace, int, int]]:
    for sub in space.subspaces:
        for start in range(0, sub.size, chunk_size):
            yield sub, start, min(start + chunk_size, sub.size)


def _run_chunk(
    sub: SubSpace,
    start: int,
    stop: int,
    *,
    objective: Objective,
    top_k: int,
    eff: EfficiencyModel,
    shared: _Shared,
    count_below: float | None,
    tolerance: float | None,
) -> _Partial:
    cols, valid, rejected = sub.decode_valid(start, stop)
    oom_min = math.inf
    kept = Kept.empty()
    if valid.size:
        base = sub.base_arrays
        framework = str(sub.base.training.framework)
        arrays = candidate_arrays(base, cols, framework=framework)
        codes = sub.operator_codes(cols)
        memory = memory_arrays(arrays, eff, layer=shared.activations.values(cols, arrays, codes))
        mem = ops.array(memory.total)
        headroom = float(ops.item(base.memory_headroom_bytes, 0))
        fits = mem + headroom <= sub.base.hardware.gpu.hbm_bytes
        oom = np.flatnonzero(~fits)
        if oom.size:
            rejected[OUT_OF_MEMORY] += oom.size
            oom_min = float(mem[oom].min())
        ok = np.flatnonzero(fits)
        if ok.size:
            cols = cols.take(ok)
            arrays = arrays.take(ok)
            ok_codes = codes[ok]
            result = evaluate(
                arrays,
                eff,
                operators=shared.operators.values(cols, arrays, ok_codes),
                tensor=shared.tensor.values(cols, arrays, ok_codes),
                memory=_take_memory(memory, ok),
            )
            training = sub.base.training
            obj = objective_values(
                objective,
                iteration_time_s=ops.array(result.iteration_time_s),
                tokens_per_iteration=cols.global_batch_size.astype(np.float64)
                * float(sub.base.model.seq_length),
                num_gpus=cols.num_gpus.astype(np.float64),
                total_tokens=training.total_tokens,
                train_iters=None if training.train_iters is None else float(training.train_iters),
            )
            kept = Kept(
                cols=cols,
                objective=obj,
                memory=ops.array(result.memory.total),
                index=sub.offset + start + valid[ok],
            )
    below = 0 if count_below is None else int(np.count_nonzero(kept.objective < count_below))
    return _Partial(
        num_below=below,
        rejected=rejected,
        evaluated=kept.n,
        top=_best(kept, top_k, tolerance),
        front=pareto(kept),
        min_oom_memory=oom_min,
    )


def _take_memory(memory: MemoryArrays, index: IntArray) -> MemoryArrays:
    """The rows ``index`` of a batch's memory breakdown."""
    return MemoryArrays(
        weights=ops.array(memory.weights)[index],
        gradients=ops.array(memory.gradients)[index],
        optimizer=ops.array(memory.optimizer)[index],
        activations=ops.array(memory.activations)[index],
        overhead=ops.array(memory.overhead)[index],
        optimizer_step=ops.array(memory.optimizer_step)[index],
    )


def _best(kept: Kept, top_k: int, tolerance: float | None) -> Kept:
    """The ``top_k`` best candidates, or every candidate of the ``top_k`` best groups."""
    return top(kept, top_k) if tolerance is None else top_groups(kept, top_k, tolerance)


def _merge(a: _Partial, b: _Partial, top_k: int, tolerance: float | None) -> _Partial:
    return _Partial(
        rejected=a.rejected + b.rejected,
        evaluated=a.evaluated + b.evaluated,
        top=_best(a.top.concat(b.top), top_k, tolerance),
        front=pareto(a.front.concat(b.front)),
        min_oom_memory=min(a.min_oom_memory, b.min_oom_memory),
        num_below=a.num_below + b.num_below,
    )


def sweep(
    space: DesignSpace,
    *,
    objective: Objective | str = Objective.TIME,
    top_k: int = 10,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    workers: int = 1,
    efficiency: EfficiencyModel | None = None,
    count_below: float | None = None,
    tolerance: float | None = None,
) -> SweepOutcome:
    """Enumerate, prune and time every candidate of ``space``; arrays only (no documents).

    ``count_below``: also count the evaluated candidates whose objective (minimisation form)
    is strictly below this value (``SweepOutcome.num_below``; the rank of a given layout is
    ``num_below + 1`` with its own objective here). ``tolerance`` (a fraction, ``>= 0``; None:
    every candidate is its own choice): rank groups of near-equal candidates, ``top_k`` of
    them (``SweepOutcome``; grouping in ``planner.search.fronts``).

    Memory is bounded by ``workers · chunk_size`` candidates in flight. Deterministic: the
    same space gives the same outcome whatever ``workers`` and ``chunk_size`` are (ties are
    broken by memory, then enumeration order). Raises ``SpecError`` when the objective needs a
    token budget the scenario lacks (``time-to-train``).
    """
    objective = as_objective(objective)
    if top_k < 1:
        raise SpecError("top_k", f"must be at least 1, got {top_k}")
    if chunk_size < 1:
        raise SpecError("chunk_size", f"must be at least 1, got {chunk_size}")
    if tolerance is not None and not (math.isfinite(tolerance) and tolerance >= 0):
        raise SpecError("tolerance", f"must be a fraction >= 0 (0.005 = 0.5 %), got {tolerance}")
    if objective is Objective.TIME_TO_TRAIN:
        for sub in space.subspaces:
            tr = sub.base.training
            if tr.total_tokens is None and tr.train_iters is None:
                raise SpecError(
                    "training.total_tokens",
                    "the time-to-train objective needs a token budget (training.total_tokens) "
                    "or training.train_iters; add one or use --objective time",
                )
    eff = efficiency if efficiency is not None else DefaultEfficiency()
    total = _Partial(
        rejected=np.zeros(len(REJECT_REASONS), dtype=np.int64),
        evaluated=0,
        top=Kept.empty(),
        front=Kept.empty(),
    )

    # the per-layer tables of each sub-space (operators, layer activations, tensor-parallel
    # collectives), shared by its chunks (planner.search.shared)
    tables = {
        id(sub): _Shared(
            operators=shared_operator_times(sub, eff),
            activations=shared_layer_activations(sub, eff),
            tensor=shared_tensor_times(sub, eff),
        )
        for sub in space.subspaces
    }

    def run(job: tuple[SubSpace, int, int]) -> _Partial:
        sub, start, stop = job
        return _run_chunk(
            sub,
            start,
            stop,
            objective=objective,
            top_k=top_k,
            eff=eff,
            shared=tables[id(sub)],
            count_below=count_below,
            tolerance=tolerance,
        )

    check_candidates(space.size)  # a caller's budget (planner.search.budget), if any
    jobs = _chunks(space, chunk_size)
    if workers <= 1:
        for job in jobs:
            checkpoint()
            total = _merge(total, run(job), top_k, tolerance)
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            pending: list[Future[_Partial]] = []
            for job in jobs:  # at most 2·workers chunks in flight: memory stays bounded
                checkpoint()
                pending.append(pool.submit(run, job))
                if len(pending) >= 2 * workers:
                    total = _merge(total, pending.pop(0).result(), top_k, tolerance)
            for fut in pending:
                total = _merge(total, fut.result(), top_k, tolerance)
    hbm = min((s.base.hardware.gpu.hbm_bytes for s in space.subspaces), default=math.inf)
    headroom = max(
        (float(ops.item(s.base_arrays.memory_headroom_bytes, 0)) for s in space.subspaces),
        default=0.0,
    )
    best, equivalents, equivalent_of = _choices(total.top, top_k, tolerance)
    return SweepOutcome(
        enumerated=space.size,
        evaluated=total.evaluated,
        rejected={
            name: int(count) for name, count in zip(REJECT_REASONS, total.rejected, strict=True)
        },
        top=best.cols,
        top_objective=best.objective,
        pareto=total.front.cols,
        pareto_objective=total.front.objective,
        min_oom_memory_bytes=total.min_oom_memory,
        hbm_bytes=hbm,
        num_below=total.num_below,
        memory_headroom_bytes=headroom,
        tolerance=tolerance,
        equivalents=equivalents.cols,
        equivalents_objective=equivalents.objective,
        equivalent_of=equivalent_of,
    )


def _choices(kept: Kept, top_k: int, tolerance: float | None) -> tuple[Kept, Kept, IntArray]:
    """The ranked candidates (the best of each group), the other members of the ``top_k``
    groups and the ranked row each joins; ``kept`` in ranking order."""
    if tolerance is None:
        return kept, Kept.empty(), np.zeros(0, dtype=np.int64)
    group = groups(kept, tolerance)
    inside = group < top_k
    kept, group = kept.take(np.flatnonzero(inside)), group[inside]
    opens = np.ones(kept.n, dtype=np.bool_)
    opens[1:] = group[1:] != group[:-1]
    return kept.take(np.flatnonzero(opens)), kept.take(np.flatnonzero(~opens)), group[~opens]
