"""Design-space exploration: every valid layout of a job, timed in vectorized chunks.

``explore(space, objective=...)`` walks the ``DesignSpace`` in chunks of ``chunk_size``
candidates (bounded memory for 10^8-candidate spaces): each chunk is decoded from its index
range, invalid layouts are rejected with their reason (``REJECT_REASONS``), the memory model
(``planner.perf.memory.memory_arrays``) rejects those that do not fit in HBM, and the rest are
timed by the engine ``planner predict`` uses (``planner.perf.engine.evaluate`` over
``candidate_arrays``; one engine, identical numbers). A running top-k and Pareto front are
merged chunk by chunk; chunks run on ``workers`` threads (numpy releases the GIL).

The reported entries are then predicted again through the scenario path
(``predict_documents``, exactly ``planner predict``), so their ``prediction`` objects are the
``planner predict --json`` output for that layout.

Objectives (all minimised internally; ``OBJECTIVES``):

* ``time``: iteration time, s;
* ``time-to-train``: ``training.total_tokens / tokens_per_s`` (or ``train_iters · iteration``), s;
* ``cost``: GPU time to train, ``num_gpus · time_to_train_s`` (GPU-seconds; reported in
  GPU-hours), or GPU-seconds per token when the scenario gives no token budget;
* ``tokens-per-gpu``: tokens/s per GPU (maximised).

The Pareto front is over (objective, peak memory per GPU, GPU count): the layouts no other
layout beats on all three (with one GPU count: the fastest layout for each memory budget).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.errors import InfeasibleError, SpecError
from planner.perf import ops
from planner.perf.candidates import CandidateColumns, candidate_arrays
from planner.perf.efficiency import DefaultEfficiency, EfficiencyModel
from planner.perf.engine import evaluate
from planner.perf.memory import memory_arrays
from planner.scenario import predict_documents
from planner.search.space import (
    OUT_OF_MEMORY,
    REJECT_REASONS,
    SCALAR_FIELDS,
    DesignSpace,
    SubSpace,
    parse_space,
)
from planner.specs.parallelism import Recompute

__all__ = [
    "OBJECTIVES",
    "ExploreResult",
    "Objective",
    "SweepOutcome",
    "explore",
    "explore_document",
    "explore_documents",
    "objective_values",
    "sweep",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

DEFAULT_CHUNK_SIZE = 1 << 17
"""Candidates decoded per chunk: ~12 int64 columns of 1 MiB each, whatever the space size."""
PLACEMENT_NOTE = (
    "Megatron-Core rank order: tensor parallel fastest (inside the NVLink domain first), then "
    "context, data (experts inside data), pipeline slowest; follows from the degrees"
)


class Objective(StrEnum):
    """What the top-k ranks by (see the module docstring)."""

    TIME = "time"
    TIME_TO_TRAIN = "time-to-train"
    COST = "cost"
    TOKENS_PER_GPU = "tokens-per-gpu"


OBJECTIVES = tuple(o.value for o in Objective)

_KEY_FIELDS = tuple(f.name for f in fields(CandidateColumns))
"""The candidate columns (``CandidateColumns`` fields) kept, merged and paged by the sweep."""


def objective_values(
    objective: Objective,
    *,
    iteration_time_s: FloatArray,
    tokens_per_iteration: FloatArray,
    num_gpus: FloatArray,
    total_tokens: float | None,
    train_iters: float | None,
) -> FloatArray:
    """The objective of each candidate in minimisation form (``tokens-per-gpu`` negated).

    Time to train follows ``predict_batch``: ``total_tokens / tokens_per_s`` when a token
    budget is given, else ``train_iters · iteration_time_s``; NaN when neither is.
    """
    tokens_per_s = tokens_per_iteration / iteration_time_s
    if objective is Objective.TIME:
        return iteration_time_s
    if objective is Objective.TOKENS_PER_GPU:
        out: FloatArray = -(tokens_per_s / num_gpus)
        return out
    if total_tokens is not None:
        ttt = total_tokens / tokens_per_s
    elif train_iters is not None:
        ttt = train_iters * iteration_time_s
    else:
        ttt = np.full_like(iteration_time_s, np.nan)
    if objective is Objective.TIME_TO_TRAIN:
        return ttt
    if total_tokens is None and train_iters is None:
        per_token: FloatArray = num_gpus / tokens_per_s  # GPU-seconds per token
        return per_token
    cost: FloatArray = num_gpus * ttt
    return cost


@dataclass(slots=True)
class _Kept:
    """Candidates kept by a reduction: their layout, objective, memory and global index."""

    cols: CandidateColumns
    objective: FloatArray
    memory: FloatArray
    index: IntArray

    @classmethod
    def empty(cls) -> _Kept:
        z = np.zeros(0, dtype=np.int64)
        empty: dict[str, Any] = {
            name: (z.astype(np.bool_) if name == "sequence_parallel" else z) for name in _KEY_FIELDS
        }
        cols = CandidateColumns(**empty)
        return cls(cols=cols, objective=np.zeros(0), memory=np.zeros(0), index=z)

    @property
    def n(self) -> int:
        return int(self.index.shape[0])

    def take(self, sel: IntArray) -> _Kept:
        return _Kept(
            cols=self.cols.take(sel),
            objective=self.objective[sel],
            memory=self.memory[sel],
            index=self.index[sel],
        )

    def concat(self, other: _Kept) -> _Kept:
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        cols = CandidateColumns(
            **{
                name: np.concatenate((getattr(self.cols, name), getattr(other.cols, name)))
                for name in _KEY_FIELDS
            }
        )
        return _Kept(
            cols=cols,
            objective=np.concatenate((self.objective, other.objective)),
            memory=np.concatenate((self.memory, other.memory)),
            index=np.concatenate((self.index, other.index)),
        )

    def order(self) -> IntArray:
        """Indices sorted by objective, then memory, then enumeration index."""
        out: IntArray = np.lexsort((self.index, self.memory, self.objective))
        return out


def _top(kept: _Kept, k: int) -> _Kept:
    if kept.n > 4 * k:  # cheap pre-selection before the exact ordering
        part = np.argpartition(kept.objective, k)[: k + 1]
        threshold = kept.objective[part].max()
        kept = kept.take(np.flatnonzero(kept.objective <= threshold))
    return kept.take(kept.order()[:k])


def _pareto(kept: _Kept) -> _Kept:
    """Non-dominated candidates over (objective, memory, num_gpus), sorted by objective."""
    if kept.n == 0:
        return kept
    fronts: list[_Kept] = []
    for gpus in np.unique(kept.cols.num_gpus):
        group = kept.take(np.flatnonzero(kept.cols.num_gpus == gpus))
        group = group.take(group.order())
        best_mem = np.minimum.accumulate(group.memory)
        prev = np.concatenate(([np.inf], best_mem[:-1]))
        fronts.append(group.take(np.flatnonzero(group.memory < prev)))
    merged = fronts[0]
    for f in fronts[1:]:
        merged = merged.concat(f)
    if len(fronts) > 1:  # exact 3-criteria filter on the (small) union of 2-criteria fronts
        o, mem, g = merged.objective, merged.memory, merged.cols.num_gpus
        le = (o[:, None] >= o[None, :]) & (mem[:, None] >= mem[None, :]) & (g[:, None] >= g)
        lt = (o[:, None] > o[None, :]) | (mem[:, None] > mem[None, :]) | (g[:, None] > g)
        dominated = (le & lt).any(axis=1)
        merged = merged.take(np.flatnonzero(~dominated))
    return merged.take(merged.order())


@dataclass(slots=True)
class _Partial:
    """What one chunk (or a reduction of chunks) contributes."""

    rejected: IntArray
    evaluated: int
    top: _Kept
    front: _Kept
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
    count_below: float | None,
) -> _Partial:
    cols, reason = sub.decode(start, stop)
    valid = np.flatnonzero(reason < 0)
    oom_min = math.inf
    kept = _Kept.empty()
    if valid.size:
        cols = cols.take(valid)
        base = sub.base_arrays
        arrays = candidate_arrays(base, cols)
        mem = ops.array(memory_arrays(arrays, eff).total)
        fits = mem <= arrays.hbm_bytes
        oom = np.flatnonzero(~fits)
        if oom.size:
            reason[valid[oom]] = OUT_OF_MEMORY
            oom_min = float(mem[oom].min())
        ok = np.flatnonzero(fits)
        if ok.size:
            cols = cols.take(ok)
            arrays = candidate_arrays(base, cols)
            result = evaluate(arrays, eff)
            training = sub.base.training
            obj = objective_values(
                objective,
                iteration_time_s=ops.array(result.iteration_time_s),
                tokens_per_iteration=ops.array(arrays.B * arrays.S),
                num_gpus=ops.array(arrays.N),
                total_tokens=training.total_tokens,
                train_iters=None if training.train_iters is None else float(training.train_iters),
            )
            kept = _Kept(
                cols=cols,
                objective=obj,
                memory=ops.array(result.memory.total),
                index=sub.offset + start + valid[ok],
            )
    rejected = np.bincount(reason[reason >= 0], minlength=len(REJECT_REASONS))
    below = 0 if count_below is None else int(np.count_nonzero(kept.objective < count_below))
    return _Partial(
        num_below=below,
        rejected=rejected,
        evaluated=kept.n,
        top=_top(kept, top_k),
        front=_pareto(kept),
        min_oom_memory=oom_min,
    )


def _merge(a: _Partial, b: _Partial, top_k: int) -> _Partial:
    return _Partial(
        rejected=a.rejected + b.rejected,
        evaluated=a.evaluated + b.evaluated,
        top=_top(a.top.concat(b.top), top_k),
        front=_pareto(a.front.concat(b.front)),
        min_oom_memory=min(a.min_oom_memory, b.min_oom_memory),
        num_below=a.num_below + b.num_below,
    )


def _objective(value: Objective | str) -> Objective:
    try:
        return Objective(value)
    except ValueError:
        raise SpecError(
            "objective", f"unknown objective {value!r}; use one of {', '.join(OBJECTIVES)}"
        ) from None


def sweep(
    space: DesignSpace,
    *,
    objective: Objective | str = Objective.TIME,
    top_k: int = 10,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    workers: int = 1,
    efficiency: EfficiencyModel | None = None,
    count_below: float | None = None,
) -> SweepOutcome:
    """Enumerate, prune and time every candidate of ``space``; arrays only (no documents).

    ``count_below``: also count the evaluated candidates whose objective (minimisation form)
    is strictly below this value (``SweepOutcome.num_below``; the rank of a given layout is
    ``num_below + 1`` with its own objective here).

    Memory is bounded by ``workers · chunk_size`` candidates in flight. Deterministic: the
    same space gives the same outcome whatever ``workers`` and ``chunk_size`` are (ties are
    broken by memory, then enumeration order). Raises ``SpecError`` when the objective needs a
    token budget the scenario lacks (``time-to-train``).
    """
    objective = _objective(objective)
    if top_k < 1:
        raise SpecError("top_k", f"must be at least 1, got {top_k}")
    if chunk_size < 1:
        raise SpecError("chunk_size", f"must be at least 1, got {chunk_size}")
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
        top=_Kept.empty(),
        front=_Kept.empty(),
    )

    def run(job: tuple[SubSpace, int, int]) -> _Partial:
        sub, start, stop = job
        return _run_chunk(
            sub, start, stop, objective=objective, top_k=top_k, eff=eff, count_below=count_below
        )

    jobs = _chunks(space, chunk_size)
    if workers <= 1:
        for job in jobs:
            total = _merge(total, run(job), top_k)
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            pending: list[Any] = []
            for job in jobs:  # at most 2·workers chunks in flight: memory stays bounded
                pending.append(pool.submit(run, job))
                if len(pending) >= 2 * workers:
                    total = _merge(total, pending.pop(0).result(), top_k)
            for fut in pending:
                total = _merge(total, fut.result(), top_k)
    hbm = min((ops.item(s.base_arrays.hbm_bytes, 0) for s in space.subspaces), default=math.inf)
    return SweepOutcome(
        enumerated=space.size,
        evaluated=total.evaluated,
        rejected={
            name: int(count) for name, count in zip(REJECT_REASONS, total.rejected, strict=True)
        },
        top=total.top.cols,
        top_objective=total.top.objective,
        pareto=total.front.cols,
        pareto_objective=total.front.objective,
        min_oom_memory_bytes=total.min_oom_memory,
        hbm_bytes=hbm,
        num_below=total.num_below,
    )


def layout_of(
    cols: CandidateColumns, i: int, base_parallelism: Mapping[str, Any]
) -> dict[str, Any]:
    """The scenario ``parallelism`` section of candidate ``i`` (every field explicit)."""
    out: dict[str, Any] = {
        "tensor_parallel": int(cols.tensor_parallel[i]),
        "pipeline_parallel": int(cols.pipeline_parallel[i]),
        "context_parallel": int(cols.context_parallel[i]),
        "expert_parallel": int(cols.expert_parallel[i]),
        "data_parallel": int(cols.data_parallel[i]),
        "virtual_pipeline": int(cols.virtual_pipeline[i]),
        "sequence_parallel": bool(cols.sequence_parallel[i]),
        "micro_batch_size": int(cols.micro_batch_size[i]),
        "global_batch_size": int(cols.global_batch_size[i]),
        "recompute": Recompute.from_code(int(cols.recompute[i])).value,
        "zero_stage": int(cols.zero_stage[i]),
    }
    for key in SCALAR_FIELDS:
        if base_parallelism.get(key) is not None:
            out[key] = base_parallelism[key]
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ExploreResult:
    """The explore contract: ``top`` and ``pareto`` entries (``{"num_gpus", "parallelism",
    "prediction"}``, the prediction being ``planner predict --json`` of that layout), counts,
    and the objective. ``to_dict()`` is the JSON object of ``planner explore --json``."""

    name: str | None
    objective: Objective
    top: list[dict[str, Any]]
    pareto: list[dict[str, Any]]
    counts: dict[str, Any]
    outcome: SweepOutcome = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (plain floats, ints, bools, None)."""
        return {
            "name": self.name,
            "objective": self.objective.value,
            "top": self.top,
            "pareto": self.pareto,
            "pareto_criteria": [
                _OBJECTIVE_FIELD[self.objective],
                "memory_per_gpu_bytes",
                "num_gpus",
            ],
            "counts": self.counts,
            "placement": PLACEMENT_NOTE,
        }


_OBJECTIVE_FIELD = {
    Objective.TIME: "iteration_time_s",
    Objective.TIME_TO_TRAIN: "time_to_train_s",
    Objective.COST: "gpu_seconds",
    Objective.TOKENS_PER_GPU: "tokens_per_s_per_gpu",
}


def _entries(
    space: DesignSpace, cols: CandidateColumns, objective: Objective
) -> list[dict[str, Any]]:
    base_par = space.document.get("parallelism") or {}
    layouts = [layout_of(cols, i, base_par) for i in range(cols.n)]
    gpus = [int(g) for g in cols.num_gpus]
    docs = [space.scenario_document(lay, n) for lay, n in zip(layouts, gpus, strict=True)]
    predictions = predict_documents(docs)
    out: list[dict[str, Any]] = []
    for lay, n, pred in zip(layouts, gpus, predictions, strict=True):
        if "error" in pred:  # an enumerated layout the scenario rules reject: a bug, say so
            raise InfeasibleError(f"internal: candidate {lay} on {n} GPUs: {pred['error']}")
        entry: dict[str, Any] = {"num_gpus": n, "parallelism": lay, "prediction": pred}
        if objective is Objective.COST:
            ttt = pred.get("time_to_train_s")
            entry["gpu_hours"] = None if ttt is None else n * ttt / 3600.0
        out.append(entry)
    return out


def _infeasible_message(space: DesignSpace, outcome: SweepOutcome) -> str:
    rejected = {k: v for k, v in outcome.rejected.items() if v}
    parts = ", ".join(f"{v:,} {k}" for k, v in sorted(rejected.items(), key=lambda kv: -kv[1]))
    what = f"no valid layout among {outcome.enumerated:,} candidates ({parts or 'none'})"
    if outcome.rejected["out_of_memory"] and math.isfinite(outcome.min_oom_memory_bytes):
        need = outcome.min_oom_memory_bytes / 2**30
        have = outcome.hbm_bytes / 2**30
        return (
            f"{what}; every layout that tiles the GPUs is out of memory: the leanest needs "
            f"{need:.1f} GiB per GPU, the GPU has {have:.1f} GiB. Feasible with about "
            f"{math.ceil(need / have)}x the GPUs (more pipeline/tensor sharding), a GPU with "
            f"more memory, or opening recompute (full) and zero_stage (3) if they were fixed"
        )
    return (
        f"{what}; no combination of the allowed values tiles the GPU count and global batch. "
        "Open more knobs (leave them out), or choose num_gpus and global_batch_size with "
        "common factors (powers of two) compatible with the model's heads and layers"
    )


def explore(
    space: DesignSpace,
    *,
    objective: Objective | str = Objective.TIME,
    top_k: int = 10,
    rank_offset: int = 0,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    workers: int = 1,
    efficiency: EfficiencyModel | None = None,
    with_pareto: bool = True,
) -> ExploreResult:
    """Sweep ``space`` and build the contract's entries for ranks ``rank_offset+1 ..
    rank_offset+top_k`` and (unless ``with_pareto`` is false) the Pareto front.

    Raises ``InfeasibleError`` (saying why and what would make it feasible) when no candidate
    is valid and fits in memory; ``SpecError`` for a bad ``objective`` setup.
    """
    objective = _objective(objective)
    if rank_offset < 0:
        raise SpecError("rank_offset", f"must be >= 0, got {rank_offset}")
    outcome = sweep(
        space,
        objective=objective,
        top_k=top_k + rank_offset,
        chunk_size=chunk_size,
        workers=workers,
        efficiency=efficiency,
    )
    if outcome.evaluated == 0:
        raise InfeasibleError(_infeasible_message(space, outcome))
    page = np.arange(rank_offset, outcome.top.n, dtype=np.int64)
    top = _entries(space, outcome.top.take(page), objective)
    for rank, entry in zip(range(rank_offset + 1, rank_offset + 1 + len(top)), top, strict=True):
        entry["rank"] = rank
    pareto = _entries(space, outcome.pareto, objective) if with_pareto else []
    counts = {
        "enumerated": outcome.enumerated,
        "evaluated": outcome.evaluated,
        "rejected": dict(outcome.rejected),
    }
    return ExploreResult(
        name=space.name,
        objective=objective,
        top=top,
        pareto=pareto,
        counts=counts,
        outcome=outcome,
    )


def explore_document(doc: object, **kwargs: Any) -> dict[str, Any]:
    """One explore document -> the contract's JSON object, or ``{"name", "error"}``.

    ``kwargs`` go to ``explore``. Never raises for bad documents or infeasible spaces: the
    ``error`` reads ``"<field>: <what is wrong and how to fix it>"`` or ``"infeasible: ..."``.
    """
    name = doc.get("name") if isinstance(doc, Mapping) else None
    name = None if name is None else str(name)
    try:
        return explore(parse_space(doc), **kwargs).to_dict()
    except SpecError as exc:
        return {"name": name, "error": str(exc)}
    except InfeasibleError as exc:
        return {"name": name, "error": f"infeasible: {exc}"}


def explore_documents(docs: Sequence[object], **kwargs: Any) -> Iterator[dict[str, Any]]:
    """``explore_document`` over a sweep of documents (one process, results in input order,
    yielded as each finishes so a caller can stream them)."""
    for doc in docs:
        yield explore_document(doc, **kwargs)
