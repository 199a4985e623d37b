"""The design space of one job: which parallelism knobs are open, and their allowed values.

An *explore document* is a scenario document (``docs/scenario-format.md``) whose
``parallelism`` fields may be absent (open: every value valid on its own) or a list of allowed
values, and whose ``hardware.num_gpus`` may be a list. ``parse_space(doc)`` turns it into a
``DesignSpace``: one ``SubSpace`` per (GPU count, global batch) pair, each the Cartesian
product of per-knob value lists, never materialised. ``SubSpace.decode(start, stop)`` gives the
candidates ``start..stop-1`` of that product (mixed-radix index, knobs in ``KNOBS`` order, the
last fastest) with the reason each invalid one is rejected for, so a sweep walks 10^8
candidates in bounded memory.

Open knobs take, for ``N`` GPUs and the base model: tensor parallel the divisors of
``gcd(heads, query groups, ffn[, moe ffn])`` that divide ``N``; pipeline parallel the divisors
of the layer count that divide ``N``; context parallel 1 and every ``c`` dividing ``N`` with
``seq_length % 2c == 0``; expert parallel the divisors of the expert count (1 for dense
models); virtual pipeline the divisors of the layer count; micro-batch the divisors of the
global batch; recompute none/selective/full; ZeRO stage 0-3; sequence parallel false/true.
``data_parallel`` is always derived (``N/(tp·pp·cp)``); a list of values filters it. Combinations
are then checked with ``Scenario``'s rules (``REJECT_REASONS``), so ``enumerated`` equals
``evaluated + sum(rejected)`` in a sweep's counts.

Placement: the engine places groups in Megatron-Core rank order (tensor fastest, then context,
data, pipeline slowest; ``planner.perf.collectives``), so "which dimension sits inside the
NVLink domain" follows from the degrees (tensor first, then context, ...) and is not a
separate knob.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.errors import SpecError
from planner.perf.batch import ScenarioArrays
from planner.perf.candidates import CandidateColumns
from planner.scenario import parse_scenario
from planner.scenario.parse import SECTION_KEYS
from planner.specs._checks import require_int
from planner.specs.feasibility import Violation, layout_violations
from planner.specs.parallelism import Recompute
from planner.specs.scenario import Scenario

__all__ = [
    "KNOBS",
    "REJECT_REASONS",
    "DesignSpace",
    "SubSpace",
    "parse_space",
]

IntArray = NDArray[np.int64]

KNOBS = (
    "tensor_parallel",
    "pipeline_parallel",
    "context_parallel",
    "expert_parallel",
    "virtual_pipeline",
    "micro_batch_size",
    "recompute",
    "zero_stage",
    "sequence_parallel",
)
"""Enumerated knobs, outermost first (``data_parallel`` is derived, GPU count and global batch
select the sub-space)."""

REJECT_REASONS: tuple[str, ...] = (
    Violation.GPUS_NOT_DIVISIBLE_BY_TP_PP_CP.value,
    "data_parallel_not_allowed",
    *(v.value for v in Violation if v is not Violation.GPUS_NOT_DIVISIBLE_BY_TP_PP_CP),
    "out_of_memory",
)
"""Why a candidate is not timed, in the order checked (a candidate counts under the first):
the layout rules of ``planner.specs.feasibility`` (``Violation``, in its order), with the
design space's own filter on ``data_parallel`` second and the memory model's verdict last."""

DATA_PARALLEL_NOT_ALLOWED = REJECT_REASONS.index("data_parallel_not_allowed")
"""Index of ``data_parallel_not_allowed`` in ``REJECT_REASONS`` (a list of allowed values)."""
_REASON_OF_CODE = np.array([REJECT_REASONS.index(v.value) for v in Violation], dtype=np.int64)
"""``REJECT_REASONS`` index of each ``Violation.code``."""
_TILES = Violation.GPUS_NOT_DIVISIBLE_BY_TP_PP_CP.code

OUT_OF_MEMORY = len(REJECT_REASONS) - 1
"""Index of ``out_of_memory`` in ``REJECT_REASONS`` (decided by the sweep, not ``decode``)."""

_LIST_KNOBS = (*KNOBS, "data_parallel", "global_batch_size")
SCALAR_FIELDS = tuple(k for k in SECTION_KEYS["parallelism"] if k not in _LIST_KNOBS)
"""The scenario's other ``parallelism`` fields (precision, flash attention, gradient-reduction
precision and overlap): one value per explore document, carried into every candidate."""


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


@dataclass(frozen=True, slots=True, kw_only=True)
class SubSpace:
    """The candidates of one GPU count and global batch: a product of per-knob value lists.

    ``base`` is the validated probe scenario (model, hardware with ``num_gpus``, training,
    precision, flash attention; its own layout is irrelevant) and ``base_arrays`` its
    ``ScenarioArrays``. ``values[k]`` lists the allowed values of ``KNOBS[k]`` (recompute as
    codes, sequence parallel as 0/1). ``data_parallel`` is None when open, else the allowed set.
    ``offset`` is the index of this sub-space's first candidate in the whole design space.
    """

    num_gpus: int
    global_batch_size: int
    base: Scenario
    base_arrays: ScenarioArrays
    values: tuple[IntArray, ...]
    data_parallel: tuple[int, ...] | None
    offset: int

    @property
    def size(self) -> int:
        """Candidates in the product (valid or not)."""
        return math.prod(len(v) for v in self.values)

    def decode(self, start: int, stop: int) -> tuple[CandidateColumns, IntArray]:
        """Candidates ``start..stop-1`` and the reason code of each (``-1`` = valid so far,
        else an index into ``REJECT_REASONS``); arrays of shape ``(stop - start,)``."""
        return self.decode_at(np.arange(start, stop, dtype=np.int64))

    def decode_at(self, index: IntArray) -> tuple[CandidateColumns, IntArray]:
        """``decode`` for arbitrary candidate indices (``0 <= index < size``), shape ``(n,)``."""
        idx = np.asarray(index, dtype=np.int64)
        digits: list[IntArray] = []
        for vals in reversed(self.values):
            size = len(vals)
            digits.append(vals[idx % size])
            idx = idx // size
        t, p, c, e, v, b, rc, z, sp = reversed(digits)
        n = int(idx.shape[0])
        num_gpus = self.num_gpus
        tpc = t * p * c
        d = np.where(num_gpus % tpc == 0, num_gpus // tpc, 1)
        cols = CandidateColumns(
            tensor_parallel=t,
            pipeline_parallel=p,
            context_parallel=c,
            expert_parallel=e,
            data_parallel=d,
            virtual_pipeline=v,
            sequence_parallel=sp.astype(np.bool_),
            micro_batch_size=b,
            global_batch_size=np.full(n, self.global_batch_size, dtype=np.int64),
            recompute=rc,
            zero_stage=z,
            num_gpus=np.full(n, num_gpus, dtype=np.int64),
        )
        code = layout_violations(self.base.model, num_gpus, cols)
        reason = np.where(code >= 0, _REASON_OF_CODE[code], -1)
        if self.data_parallel is not None:  # checked once the GPUs are tiled, before the rest
            allowed = np.isin(d, np.asarray(self.data_parallel, dtype=np.int64))
            reason[(code != _TILES) & ~allowed] = DATA_PARALLEL_NOT_ALLOWED
        return cols, reason


@dataclass(frozen=True, slots=True, kw_only=True)
class DesignSpace:
    """All sub-spaces of one explore document, and the document they came from.

    ``document`` is the input with its ``parallelism`` and ``hardware.num_gpus`` as given;
    ``scenario_document(...)`` rebuilds a plain scenario document for one candidate.
    """

    name: str | None
    document: Mapping[str, Any]
    subspaces: tuple[SubSpace, ...]

    @property
    def size(self) -> int:
        """Candidates enumerated over all sub-spaces."""
        return sum(s.size for s in self.subspaces)

    def scenario_document(self, parallelism: Mapping[str, Any], num_gpus: int) -> dict[str, Any]:
        """The ``planner predict`` document of one candidate (the input with this layout)."""
        doc = copy.deepcopy(dict(self.document))
        hardware = dict(doc.get("hardware") or {})
        hardware["num_gpus"] = num_gpus
        doc["hardware"] = hardware
        doc["parallelism"] = dict(parallelism)
        return doc


def _values(path: str, raw: object) -> list[object] | None:
    """``None`` when open, else the list of allowed values (a scalar is a list of one)."""
    if raw is None:
        return None
    if isinstance(raw, list | tuple):
        if not raw:
            raise SpecError(path, "an empty list allows nothing; leave the field out to open it")
        return list(raw)
    return [raw]


def _ints(path: str, raw: list[object], *, minimum: int = 1) -> list[int]:
    out: list[int] = []
    for i, raw_value in enumerate(raw):
        value = (
            int(raw_value) if isinstance(raw_value, float) and raw_value.is_integer() else raw_value
        )
        require_int(f"{path}[{i}]" if len(raw) > 1 else path, value, minimum=minimum)
        out.append(int(value))  # type: ignore[call-overload]
    return sorted(set(out))


def _recompute_codes(path: str, raw: list[object]) -> list[int]:
    codes: list[int] = []
    for value in raw:
        text = str(value).strip().lower()
        if text not in tuple(Recompute):
            raise SpecError(
                path, f"unknown value {value!r}; use one of {', '.join(r.value for r in Recompute)}"
            )
        codes.append(Recompute(text).code)
    return sorted(set(codes))


def _bools(path: str, raw: list[object]) -> list[int]:
    for value in raw:
        if not isinstance(value, bool):
            raise SpecError(path, f"must be true or false (or a list of them), got {value!r}")
    return sorted({int(bool(v)) for v in raw})


def _probe_document(doc: Mapping[str, Any], num_gpus: int) -> dict[str, Any]:
    par = doc.get("parallelism") or {}
    probe_par: dict[str, Any] = {"data_parallel": num_gpus, "global_batch_size": num_gpus}
    for key in SCALAR_FIELDS:
        if par.get(key) is not None:
            probe_par[key] = par[key]
    probe = {k: v for k, v in doc.items() if k != "parallelism"}
    probe["hardware"] = {**dict(doc.get("hardware") or {}), "num_gpus": num_gpus}
    probe["parallelism"] = probe_par
    return probe


def parse_space(doc: object) -> DesignSpace:
    """Validate an explore document into a ``DesignSpace``.

    Raises ``SpecError("<dotted.field>", ...)`` for everything ``parse_scenario`` rejects in
    the model, hardware and training sections, for malformed knob lists (empty, wrong types,
    ZeRO stage outside 0-3, unknown recompute mode), and for the ``SCALAR_FIELDS`` (precision,
    flash attention, ...) given as lists (explore one of each per document; a JSONL sweeps more).
    """
    if isinstance(doc, SpecError):
        raise doc
    if not isinstance(doc, Mapping):
        raise SpecError("", f"a scenario must be a mapping, got {type(doc).__name__}")
    par = doc.get("parallelism")
    if par is None:
        raise SpecError("parallelism", "the 'parallelism' section is required (global_batch_size)")
    if not isinstance(par, Mapping):
        raise SpecError("parallelism", f"must be a mapping of fields, got {type(par).__name__}")
    allowed = (*_LIST_KNOBS, *SCALAR_FIELDS)
    for key in par:
        if key not in allowed:
            raise SpecError(f"parallelism.{key}", f"unknown field; allowed: {', '.join(allowed)}")
    for key in SCALAR_FIELDS:
        if isinstance(par.get(key), list | tuple):
            raise SpecError(
                f"parallelism.{key}",
                "give one value per document; sweep several with a JSONL of documents",
            )
    hardware = doc.get("hardware")
    if not isinstance(hardware, Mapping):
        raise SpecError("hardware", "the 'hardware' section is required (gpu, num_gpus)")
    raw_gpus = _values("hardware.num_gpus", hardware.get("num_gpus"))
    if raw_gpus is None:
        raise SpecError("hardware.num_gpus", "is required (a count or a list of counts)")
    gpu_counts = _ints("hardware.num_gpus", raw_gpus)
    raw_batch = _values("parallelism.global_batch_size", par.get("global_batch_size"))
    if raw_batch is None:
        raise SpecError(
            "parallelism.global_batch_size", "is required (sequences per iteration, or a list)"
        )
    batches = _ints("parallelism.global_batch_size", raw_batch)
    given: dict[str, list[int] | None] = {}
    for key in KNOBS:
        raw = _values(f"parallelism.{key}", par.get(key))
        path = f"parallelism.{key}"
        if raw is None:
            given[key] = None
        elif key == "recompute":
            given[key] = _recompute_codes(path, raw)
        elif key == "sequence_parallel":
            given[key] = _bools(path, raw)
        elif key == "zero_stage":
            stages = _ints(path, raw, minimum=0)
            if max(stages) > 3:
                raise SpecError(path, f"must be 0, 1, 2 or 3, got {max(stages)}")
            given[key] = stages
        else:
            given[key] = _ints(path, raw)
    raw_dp = _values("parallelism.data_parallel", par.get("data_parallel"))
    data_parallel = None if raw_dp is None else tuple(_ints("parallelism.data_parallel", raw_dp))

    subspaces: list[SubSpace] = []
    offset = 0
    for num_gpus in gpu_counts:
        base = parse_scenario(_probe_document(doc, num_gpus))
        base_arrays = ScenarioArrays.from_scenarios([base])
        for batch in batches:
            values = _knob_values(base, num_gpus, batch, given)
            sub = SubSpace(
                num_gpus=num_gpus,
                global_batch_size=batch,
                base=base,
                base_arrays=base_arrays,
                values=values,
                data_parallel=data_parallel,
                offset=offset,
            )
            subspaces.append(sub)
            offset += sub.size
    name = doc.get("name")
    return DesignSpace(
        name=None if name is None else str(name), document=doc, subspaces=tuple(subspaces)
    )


def _knob_values(
    base: Scenario, num_gpus: int, batch: int, given: Mapping[str, Sequence[int] | None]
) -> tuple[IntArray, ...]:
    m = base.model
    width = math.gcd(m.num_attention_heads, m.num_query_groups, m.ffn_hidden_size)
    if m.is_moe:
        width = math.gcd(width, m.moe_ffn_hidden_size)
    gpu_divisors = _divisors(num_gpus)
    open_values: dict[str, list[int]] = {
        "tensor_parallel": [t for t in _divisors(width) if num_gpus % t == 0],
        "pipeline_parallel": [p for p in _divisors(m.num_layers) if num_gpus % p == 0],
        "context_parallel": [c for c in gpu_divisors if c == 1 or m.seq_length % (2 * c) == 0],
        "expert_parallel": _divisors(m.num_experts) if m.is_moe else [1],
        "virtual_pipeline": _divisors(m.num_layers),
        "micro_batch_size": _divisors(batch),
        "recompute": [0, 1, 2],
        "zero_stage": [0, 1, 2, 3],
        "sequence_parallel": [0, 1],
    }
    out: list[IntArray] = []
    for key in KNOBS:
        chosen = given[key]
        vals = open_values[key] if chosen is None else list(chosen)
        out.append(np.asarray(vals, dtype=np.int64))
    return tuple(out)
