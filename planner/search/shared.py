"""Per-layer tables of a sub-space, computed once per distinct operator key.

The operator table (``planner.perf.operators.operator_times``: every kernel of a layer, the
embedding and the LM head, timed for one microbatch), one layer's activation bytes
(``planner.perf.memory.layer_activations``) and the tensor-parallel collectives per layer
(``planner.perf.tensor.tensor_parallel_times``) read only the layout columns ``OPERATOR_COLUMNS``
(tensor, context, expert and expert tensor parallel, micro-batch, sequence parallel,
recompute); the rest of their inputs are the base scenario's. Candidates that differ only in
ZeRO stage, pipeline degree or split, virtual pipeline or data-parallel degree therefore share
them. A ``SharedByKey`` keeps the values of every key a sweep has met in one sub-space (codes
from ``SubSpace.operator_codes``) and computes only the keys a chunk brings that it has not
seen: DeepSeek-V3 on 2,048 H100 (every knob open) times 35 k operator keys for its 0.99 M timed
candidates instead of 0.99 M rows. Each key's values are what the function gives for a batch
holding that candidate (elementwise arithmetic: the numbers of computing it alone, which
``tests/search/test_shared.py`` and the one-engine checks of ``benchmarks/explore.py`` verify).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import fields
from typing import Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from planner.perf.batch import ScenarioArrays
from planner.perf.candidates import CandidateColumns
from planner.perf.efficiency import EfficiencyModel
from planner.perf.engine import link_of
from planner.perf.memory import LayerActivations, layer_activations
from planner.perf.operators import GROUPS, OperatorTimes, operator_times
from planner.perf.tensor import TensorParallelTimes, tensor_parallel_times
from planner.search.space import SubSpace

__all__ = [
    "SharedByKey",
    "shared_layer_activations",
    "shared_operator_times",
    "shared_tensor_times",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

T = TypeVar("T")

_ACTIVATIONS = tuple(f.name for f in fields(LayerActivations))
_TENSOR = tuple(f.name for f in fields(TensorParallelTimes))


class SharedByKey(Generic[T]):
    """A per-layer quantity ``T`` (a dataclass of arrays, fields ``names``, each of shape
    ``(n,)`` for ``n`` candidates; ``compute`` gives it for a batch, ``kind`` builds it from
    its fields) for the candidates of one sub-space, by operator key.

    ``values(cols, arrays)`` gives it for candidates ``cols``, computing only the keys not
    seen before. Safe to call from several threads (the sweep's workers): the table is read
    and extended under a lock; two threads may compute the same new key, and then the first
    one's values are kept (both are the same numbers).
    """

    def __init__(
        self,
        sub: SubSpace,
        compute: Callable[[ScenarioArrays], T],
        kind: Callable[..., T],
        names: tuple[str, ...],
    ) -> None:
        self._sub, self._compute, self._kind, self.names = sub, compute, kind, names
        self._codes: IntArray = np.zeros(0, dtype=np.int64)  # sorted
        self._table: FloatArray = np.zeros((len(names), 0))  # column j: key self._codes[j]
        self._lock = threading.Lock()

    @property
    def num_keys(self) -> int:
        """Distinct operator keys computed so far."""
        return int(self._codes.shape[0])

    def rows(
        self, cols: CandidateColumns, arrays: ScenarioArrays, codes: IntArray | None = None
    ) -> FloatArray:
        """The values for candidates ``cols`` of the sub-space (``arrays``: their
        ``candidate_arrays``; ``codes``: their ``SubSpace.operator_codes`` when the caller has
        them), shape ``(len(names), cols.n)``."""
        code = self._sub.operator_codes(cols) if codes is None else codes
        keys, first, inverse = np.unique(code, return_index=True, return_inverse=True)
        with self._lock:
            known = self._find(keys)
        missing = np.flatnonzero(known < 0)
        if missing.size:
            fresh = self._compute(arrays.take(first[missing]))
            values = np.stack(
                [np.broadcast_to(getattr(fresh, name), (missing.size,)) for name in self.names]
            ).astype(np.float64)
            with self._lock:
                self._insert(keys[missing], values)
                known = self._find(keys)
        out: FloatArray = self._table[:, known][:, inverse]
        return out

    def values(
        self, cols: CandidateColumns, arrays: ScenarioArrays, codes: IntArray | None = None
    ) -> T:
        """The quantity for candidates ``cols`` (``rows``), each field of shape ``(cols.n,)``."""
        rows = self.rows(cols, arrays, codes)
        return self._kind(**{name: rows[j] for j, name in enumerate(self.names)})

    def _find(self, keys: IntArray) -> IntArray:
        """Column of each key (sorted, distinct) in the table, ``-1`` where absent."""
        pos = np.searchsorted(self._codes, keys)
        inside = pos < self._codes.shape[0]
        hit = np.zeros(keys.shape[0], dtype=np.bool_)
        hit[inside] = self._codes[pos[inside]] == keys[inside]
        out: IntArray = np.where(hit, pos, -1)
        return out

    def _insert(self, keys: IntArray, values: FloatArray) -> None:
        """Add the columns ``values`` (shape ``(len(names), len(keys))``) for ``keys``; keys
        another thread added meanwhile keep their values."""
        new = self._find(keys) < 0
        codes = np.concatenate([self._codes, keys[new]])
        table = np.concatenate([self._table, values[:, new]], axis=1)
        order = np.argsort(codes, kind="stable")
        self._codes, self._table = codes[order], table[:, order]


def shared_operator_times(sub: SubSpace, eff: EfficiencyModel) -> SharedByKey[OperatorTimes]:
    """The operator table (``operator_times``) of ``sub``'s candidates, shared by operator
    key."""
    return SharedByKey(sub, lambda a: operator_times(a, eff), OperatorTimes, GROUPS)


def shared_layer_activations(sub: SubSpace, eff: EfficiencyModel) -> SharedByKey[LayerActivations]:
    """One layer's activation bytes (``layer_activations``) of ``sub``'s candidates, shared
    by operator key."""
    return SharedByKey(sub, lambda a: layer_activations(a, eff), LayerActivations, _ACTIVATIONS)


def shared_tensor_times(sub: SubSpace, eff: EfficiencyModel) -> SharedByKey[TensorParallelTimes]:
    """The tensor-parallel communication per layer (``tensor_parallel_times``) of ``sub``'s
    candidates, shared by operator key."""

    def compute(a: ScenarioArrays) -> TensorParallelTimes:
        return tensor_parallel_times(a, eff, link_of(a, eff))

    return SharedByKey(sub, compute, TensorParallelTimes, _TENSOR)
