"""Running reductions of a sweep: the best candidates so far (top-k) and the Pareto front.

``Kept`` holds candidates (their layout, objective in minimisation form, peak memory per GPU
and enumeration index); ``top``, ``top_groups`` and ``pareto`` reduce one, and merging two
reductions then reducing again gives the reduction of the union, so chunks can be reduced in
any grouping. Ties are broken by memory, then enumeration index: the result never depends on
chunking.

Near-equal candidates (``top_groups``, ``groups``): in ranking order, the best candidate opens
a group and every candidate whose objective is within ``tolerance`` of it (``objective <= o +
tolerance·|o|``, a relative tolerance) joins it; the first candidate beyond opens the next
group, and so on. Adding candidates never raises the objective of the ``k``-th group's first
candidate (by induction over the groups: each opens at the minimum over a superset), so a
reduction may drop every candidate beyond the ``k``-th group's limit and stays exact.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import NDArray

from planner.perf.candidates import CandidateColumns

__all__ = ["MAX_GROUPED", "Kept", "groups", "pareto", "top", "top_groups"]

MAX_GROUPED = 1 << 16
"""Candidates ``top_groups`` keeps at most (about 9 MiB of columns): beyond it (a space whose
``k`` best groups hold more candidates than this) the best ``MAX_GROUPED`` in ranking order
are kept, and the groups are formed among them."""

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

_KEY_FIELDS = tuple(f.name for f in fields(CandidateColumns))
"""The candidate columns (``CandidateColumns`` fields) kept, merged and paged by the sweep
(the sweep's candidates have every optional column)."""


@dataclass(slots=True)
class Kept:
    """Candidates kept by a reduction: their layout, objective, memory and global index."""

    cols: CandidateColumns
    objective: FloatArray
    memory: FloatArray
    index: IntArray

    @classmethod
    def empty(cls) -> Kept:
        """No candidate."""
        z = np.zeros(0, dtype=np.int64)
        no = np.zeros(0, dtype=np.bool_)
        cols = CandidateColumns(  # every column, as the sweep's candidates have
            tensor_parallel=z,
            pipeline_parallel=z,
            context_parallel=z,
            expert_parallel=z,
            data_parallel=z,
            virtual_pipeline=z,
            sequence_parallel=no,
            micro_batch_size=z,
            global_batch_size=z,
            recompute=z,
            zero_stage=z,
            num_gpus=z,
            expert_tensor_parallel=z,
            account_for_embedding_in_pipeline_split=no,
            account_for_loss_in_pipeline_split=no,
            decoder_first_pipeline_num_layers=z,
            decoder_last_pipeline_num_layers=z,
            stage_layers=z,
            fp8_param_gather=no,
            megatron_fsdp=no,
        )
        return cls(cols=cols, objective=np.zeros(0), memory=np.zeros(0), index=z)

    @property
    def n(self) -> int:
        """Number of candidates kept."""
        return int(self.index.shape[0])

    def take(self, sel: IntArray) -> Kept:
        """The candidates at indices ``sel``, in that order."""
        return Kept(
            cols=self.cols.take(sel),
            objective=self.objective[sel],
            memory=self.memory[sel],
            index=self.index[sel],
        )

    def concat(self, other: Kept) -> Kept:
        """These candidates followed by ``other``'s."""
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
        return Kept(
            cols=cols,
            objective=np.concatenate((self.objective, other.objective)),
            memory=np.concatenate((self.memory, other.memory)),
            index=np.concatenate((self.index, other.index)),
        )

    def order(self) -> IntArray:
        """Indices sorted by objective, then memory, then enumeration index."""
        out: IntArray = np.lexsort((self.index, self.memory, self.objective))
        return out


def top(kept: Kept, k: int) -> Kept:
    """The ``k`` best candidates (``Kept.order``), best first."""
    if kept.n > 4 * k:  # cheap pre-selection before the exact ordering
        part = np.argpartition(kept.objective, k)[: k + 1]
        threshold = kept.objective[part].max()
        kept = kept.take(np.flatnonzero(kept.objective <= threshold))
    return kept.take(kept.order()[:k])


def _limits(objective: FloatArray, k: int, tolerance: float) -> list[float]:
    """The first objective of each of the (at most) ``k`` best groups, in order."""
    firsts: list[float] = []
    above = objective
    for _ in range(k):
        if above.size == 0:
            break
        first = float(above.min())
        firsts.append(first)
        above = above[above > first + tolerance * abs(first)]
    return firsts


def top_groups(kept: Kept, k: int, tolerance: float, cap: int = MAX_GROUPED) -> Kept:
    """Every candidate of the ``k`` best groups of near-equal candidates (module docstring),
    in ranking order (``Kept.order``); at most ``cap`` of them (the best)."""
    if kept.n == 0:
        return kept
    firsts = _limits(kept.objective, k, tolerance)
    if len(firsts) == k:
        last = firsts[-1]
        kept = kept.take(np.flatnonzero(kept.objective <= last + tolerance * abs(last)))
    return kept.take(kept.order()[:cap])


def groups(kept: Kept, tolerance: float) -> IntArray:
    """The group of each candidate of ``kept`` (in ranking order, as ``top_groups`` returns
    them): 0 for the best group, 1 for the next, ...; shape ``(kept.n,)``."""
    out = np.zeros(kept.n, dtype=np.int64)
    start, group = 0, 0
    objective = kept.objective
    while start < kept.n:
        first = float(objective[start])
        stop = start + int(
            np.searchsorted(objective[start:], first + tolerance * abs(first), "right")
        )
        out[start:stop] = group
        start, group = stop, group + 1
    return out


def pareto(kept: Kept) -> Kept:
    """Non-dominated candidates over (objective, memory, num_gpus), sorted by objective."""
    if kept.n == 0:
        return kept
    fronts: list[Kept] = []
    for gpus in np.unique(kept.cols.num_gpus):
        # the group's rows in ``Kept.order``, found on the sort keys alone: only the front's
        # rows are taken (a chunk's group is every candidate it timed)
        rows = np.flatnonzero(kept.cols.num_gpus == gpus)
        rows = rows[np.lexsort((kept.index[rows], kept.memory[rows], kept.objective[rows]))]
        memory = kept.memory[rows]
        best_mem = np.minimum.accumulate(memory)
        prev = np.concatenate(([np.inf], best_mem[:-1]))
        fronts.append(kept.take(rows[memory < prev]))
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
