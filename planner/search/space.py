"""The design space of one job: which parallelism knobs are open, and their allowed values.

A ``DesignSpace`` is a base ``Scenario`` (model, hardware, training and the parallelism fields
that are one value per job: precision, flash attention, gradient-reduction precision and
overlap), the GPU counts and global batch sizes to consider, and ``Knobs``: per knob, the
allowed values, or ``None`` when open (every value valid on its own). It holds one
``SubSpace`` per (GPU count, global batch) pair, each the Cartesian product of per-knob value
lists, never materialised. ``SubSpace.decode(start, stop)`` gives the candidates
``start..stop-1`` of that product (mixed-radix index, knobs in ``KNOBS`` order, the last
fastest) with the reason each invalid one is rejected for, so a sweep walks 10^8 candidates in
bounded memory; ``DesignSpace.scenario`` turns one candidate into its ``Scenario``
(``dataclasses.replace`` on the base).

Open knobs take, for ``N`` GPUs and the base model: tensor parallel the divisors of ``gcd(heads,
query groups, ffn[, moe ffn])`` that divide ``N`` and the NVLink domain
(``hardware.nvlink_domain_size``: each tensor-parallel group inside one domain;
``values.tensor_parallel_degrees``); pipeline parallel the divisors of ``N`` over which the
framework can split the layers (``planner.specs.pipeline_split``: the divisors of the layer
count for an even split, of ``layers + 1`` or ``+ 2`` with the
``account_for_embedding/loss_in_pipeline_split`` options (both open: false/true), under
Megatron-Core the uneven first / last ranks ``decoder_first/last_pipeline_num_layers`` whose
busiest rank holds ``⌈layers / p⌉`` layers (``values.uneven_splits``), any count up to the
layers for a framework with a default uneven split); context parallel 1 and every ``c`` dividing
``N`` with ``seq_length % 2c == 0``; expert parallel the divisors of the expert count (1 for
dense models); expert tensor parallel (MoE parallel folding) 1 and the space's tensor-parallel
degrees that divide the expert FFN (only 1 under a framework that keeps the experts whole,
``planner.specs.folding``; the tensor-parallel degree, unused, for dense models);
virtual pipeline the divisors of each rank's share of the split; micro-batch the divisors of the
global batch; recompute none/selective/full; ZeRO stage 0-3; sequence parallel false/true. The
pipeline degree, the two ``account_for`` options, the virtual pipeline degree and the first /
last ranks' layers are one digit of the product (``planner.search.values``), over the
combinations that split the layers (the options are never combined with one stage, where they
change nothing; listed degrees are crossed in full). ``data_parallel`` is always derived
(``N/(tp·pp·cp)``); a list of values filters it. Combinations are then checked with the layout
rules ``Scenario`` applies under the base scenario's framework (``planner.specs.feasibility``;
``REJECT_REASONS``), so ``enumerated`` equals ``evaluated + sum(rejected)`` in a sweep's counts.

Equivalent layouts (``equivalent_layout``) are counted once: two candidates are equivalent
when they run the same way, which the rules leave in one case: ZeRO stages 0, 1 and 2 when
every parameter's data-parallel group has one rank (``data·context = 1`` and expert data
parallel 1: a distributed optimizer, or sharded gradients, over one rank is the plain one);
the lowest allowed of these stages that the layout rules accept is kept (stage 1 where
Megatron-LM refuses FP8 parameters at stage 0 without Megatron-FSDP, ``fp8_param_gather_rule``,
or Megatron-Core's optimizer, without Megatron-FSDP, the job's optimizer dtypes,
``optimizer_dtype_rule``). (ZeRO-3
stays distinct: PyTorch FSDP keeps its sharded fp32 parameters and gathers 16-bit copies per
unit even over one rank.)

Placement: the engine places groups in Megatron-Core rank order (tensor fastest, then context,
data, pipeline slowest; ``planner.perf.collectives``), so "which dimension sits inside the
NVLink domain" follows from the degrees (tensor first, then context, ...) and is not a
separate knob.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

from planner.errors import SpecError
from planner.perf.batch import ScenarioArrays
from planner.perf.candidates import CandidateColumns
from planner.perf.operators import OPERATOR_COLUMNS
from planner.search.values import DIGITS, knob_values, pipeline_combinations
from planner.specs._checks import require_int
from planner.specs.feasibility import (
    Violation,
    fp8_param_gather_rule,
    layout_violations,
    needs_precision_aware_optimizer,
    optimizer_dtype_rule,
    probe_tp_comm_overlap,
)
from planner.specs.parallelism import MainParamsDtype, ParallelismSpec, Recompute
from planner.specs.pipeline_split import stage_layer_arrays
from planner.specs.scenario import Scenario

__all__ = [
    "DIGITS",
    "KNOBS",
    "REJECT_REASONS",
    "DesignSpace",
    "JobLayout",
    "Knobs",
    "SubSpace",
    "allowed_counts",
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
    "expert_tensor_parallel",
    "account_for_embedding_in_pipeline_split",
    "account_for_loss_in_pipeline_split",
    "decoder_first_pipeline_num_layers",
    "decoder_last_pipeline_num_layers",
)
"""Enumerated knobs (``data_parallel`` is derived, GPU count and global batch select the
sub-space)."""

_SPLIT_KNOBS = ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers")
"""Knobs whose values are layer counts or None (unset)."""

_BOOL_KNOBS = (
    "sequence_parallel",
    "account_for_embedding_in_pipeline_split",
    "account_for_loss_in_pipeline_split",
)

_T = TypeVar("_T")

REJECT_REASONS: tuple[str, ...] = (
    Violation.GPUS_NOT_DIVISIBLE_BY_TP_PP_CP.value,
    "data_parallel_not_allowed",
    *(v.value for v in Violation if v is not Violation.GPUS_NOT_DIVISIBLE_BY_TP_PP_CP),
    "equivalent_layout",
    "out_of_memory",
)
"""Why a candidate is not timed, in the order checked (a candidate counts under the first):
the layout rules of ``planner.specs.feasibility`` (``Violation``, in its order), with the
design space's own filter on ``data_parallel`` second, then equivalence to another candidate
(module docstring) and the memory model's verdict last."""

EQUIVALENT_LAYOUT = REJECT_REASONS.index("equivalent_layout")
"""Index of ``equivalent_layout`` in ``REJECT_REASONS``."""

DATA_PARALLEL_NOT_ALLOWED = REJECT_REASONS.index("data_parallel_not_allowed")
"""Index of ``data_parallel_not_allowed`` in ``REJECT_REASONS`` (a list of allowed values)."""
_REASON_OF_CODE = np.array([REJECT_REASONS.index(v.value) for v in Violation], dtype=np.int64)
"""``REJECT_REASONS`` index of each ``Violation.code``."""
_TILES = Violation.GPUS_NOT_DIVISIBLE_BY_TP_PP_CP.code

OUT_OF_MEMORY = len(REJECT_REASONS) - 1
"""Index of ``out_of_memory`` in ``REJECT_REASONS`` (decided by the sweep, not ``decode``)."""

_COARSE = np.arange(
    REJECT_REASONS.index(Violation.BIASED_EXPERTS_NEED_EXPERT_TENSOR_PARALLEL_1.value) + 1
)
"""The reasons up to ``biased_experts_need_expert_tensor_parallel_1``: their rules read the
tensor, pipeline (with its split), context, expert and expert tensor-parallel degrees, the
data-parallel degree they set, sequence parallelism and what is one value per sub-space (the
model, the framework, the job's async tensor parallelism), never the micro-batch size,
recompute or ZeRO stage (the ``_FINE_DIGITS``), so a candidate's first broken rule among them
is its coarse class's (``SubSpace.decode_valid``; ``tests/search`` checks the counts against a
full decode)."""

_FINE_DIGITS = slice(DIGITS.index("micro_batch_size"), len(DIGITS))
"""The digits inside a coarse class: micro-batch, recompute, ZeRO stage, sequence parallel
(the last, fastest digit)."""

_COARSE_TABLE_MAX = 1 << 20
"""Most coarse classes a sub-space tabulates (8 MiB of int64)."""


_JOB_OPTIMIZER_FIELDS = frozenset(
    {"main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype", "store_param_remainders"}
)
"""The optimizer's dtype fields, one value per job, that the layout rules read beside the
ZeRO stage (``optimizer_dtype_rule``)."""


@dataclass(frozen=True, slots=True)
class JobLayout:
    """A sub-space's candidates as the layout rules read them: their columns, the job's
    stated async tensor parallelism (``SubSpace.tp_comm_overlap``, one value for every
    candidate, which ``CandidateColumns`` does not carry; ``async_tensor_parallel_rule``,
    ``tp_comm_overlap_sequence_rule``) and the optimizer's dtypes of the job's parallelism
    (``_JOB_OPTIMIZER_FIELDS``; ``optimizer_dtype_rule``).
    Every other attribute is the columns'."""

    cols: CandidateColumns
    tp_comm_overlap: bool
    job: ParallelismSpec

    def __getattr__(self, name: str) -> Any:
        if name in _JOB_OPTIMIZER_FIELDS:
            return getattr(self.job, name)
        return getattr(self.cols, name)


@dataclass(frozen=True, slots=True, kw_only=True)
class SubSpace:
    """The candidates of one GPU count and global batch: a product of per-knob value lists.

    ``base`` is the validated probe scenario (model, hardware with ``num_gpus``, training,
    precision, flash attention; its own layout is irrelevant) and ``base_arrays`` its
    ``ScenarioArrays``. ``values[k]`` lists the allowed values of ``DIGITS[k]`` (recompute as
    codes, sequence parallel as 0/1, the expert tensor-parallel degree 0 for "the
    tensor-parallel one" in a dense model, the pipeline digit as row indices of
    ``pipelines``: rows of ``planner.search.values.PIPELINE_COLUMNS``, ``(p, embedding, loss,
    v, first, last)``, shape ``(k, 6)``, ``first`` / ``last`` 0 where unset). ``data_parallel`` is
    None when open, else the allowed set. ``zero_stages`` are the allowed ZeRO stages (the
    lowest of 0-2 is the one kept among equivalent layouts). ``offset`` is the index of this
    sub-space's first candidate in the whole design space. ``tp_comm_overlap``: the job's
    stated ``parallelism.tp_comm_overlap`` (None: unset, the framework's default), which the
    layout rules check every candidate against; the probe may not state it (``_probe``).

    Derived once, at construction: ``pipeline_stages`` (shape ``(k, 4)``: each pipeline row's
    split, ``stage_layer_arrays``: layers of rank 0, the busiest middle rank, rank ``p-1``, 1
    where the framework accepts it), ``coarse_reasons`` (``_coarse_table``) and
    ``operator_values`` (per ``OPERATOR_COLUMNS`` column, the sorted values its candidates
    take: the radix of ``operator_codes``).
    """

    num_gpus: int
    global_batch_size: int
    base: Scenario
    base_arrays: ScenarioArrays
    values: tuple[IntArray, ...]
    pipelines: IntArray
    data_parallel: tuple[int, ...] | None
    offset: int
    zero_stages: tuple[int, ...] = (0, 1, 2, 3)
    tp_comm_overlap: bool | None = None
    pipeline_stages: IntArray = field(init=False, repr=False, compare=False)
    coarse_reasons: IntArray | None = field(init=False, repr=False, compare=False)
    operator_values: tuple[IntArray, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # the split of each pipeline combination (few rows), looked up per candidate by decode
        p = self.pipelines
        first, middle, last, valid = stage_layer_arrays(
            self.base.model.num_layers,
            p[:, 0],
            p[:, 3],
            p[:, 1].astype(np.bool_),
            p[:, 2].astype(np.bool_),
            str(self.base.training.framework),
            first=p[:, 4],
            last=p[:, 5],
        )
        stages = np.stack([first, middle, last, valid.astype(np.int64)], axis=1)
        object.__setattr__(self, "pipeline_stages", stages.astype(np.int64))
        object.__setattr__(self, "coarse_reasons", self._coarse_table())
        values = tuple(self._column_values(name) for name in OPERATOR_COLUMNS)
        object.__setattr__(self, "operator_values", values)

    def _coarse_table(self) -> IntArray | None:
        """The reason (``REJECT_REASONS`` index, ``-1`` for none) of each coarse class: the
        candidates that share every digit but micro-batch, recompute and ZeRO stage (class
        ``index // fine · len(sequence parallel) + sequence-parallel digit``, ``fine`` the
        product of those three digits' and the sequence-parallel digit's value counts) and
        break one of the ``_COARSE`` rules, which read none of those three digits; -1 where
        the class passes them. None when the table would not be much smaller than the
        sub-space (every candidate is then decoded)."""
        fine = math.prod(len(v) for v in self.values[_FINE_DIGITS])
        num_sp = len(self.values[-1])
        classes = self.size // fine * num_sp
        if classes > min(_COARSE_TABLE_MAX, self.size // 4):
            return None
        cls = np.arange(classes, dtype=np.int64)
        _, reason = self.decode_at(cls // num_sp * fine + cls % num_sp)  # fine digits 0
        out: IntArray = np.where(np.isin(reason, _COARSE), reason, -1)
        return out

    def decode_valid(self, start: int, stop: int) -> tuple[CandidateColumns, IntArray, IntArray]:
        """The candidates ``start..stop-1`` that pass every layout rule: their columns, their
        positions in the range (offsets from ``start``), shape ``(k,)``, and how many of the
        others each reason rejects (``REJECT_REASONS`` order, shape ``(len(REJECT_REASONS),)``).
        The same candidates and counts as ``decode``; coarse classes that break a rule reading
        none of the micro-batch, recompute and ZeRO digits (``coarse_reasons``) are counted
        without decoding their candidates."""
        index = np.arange(start, stop, dtype=np.int64)
        rejected = np.zeros(len(REJECT_REASONS), dtype=np.int64)
        if self.coarse_reasons is not None:
            fine = math.prod(len(v) for v in self.values[_FINE_DIGITS])
            num_sp = len(self.values[-1])
            coarse = self.coarse_reasons[index // fine * num_sp + index % num_sp]
            rejected += np.bincount(coarse[coarse >= 0], minlength=len(REJECT_REASONS))
            index = index[coarse < 0]
        cols, reason = self.decode_at(index)
        rejected += np.bincount(reason[reason >= 0], minlength=len(REJECT_REASONS))
        valid = np.flatnonzero(reason < 0)
        return cols.take(valid), index[valid] - start, rejected

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
        n = int(idx.shape[0])
        digits: list[IntArray] = []
        for vals in reversed(self.values):
            if len(vals) == 1:  # a fixed knob: no division
                digits.append(np.full(n, vals[0], dtype=np.int64))
                continue
            idx, digit = np.divmod(idx, len(vals))
            digits.append(vals[digit])
        t, pipe, c, e, etp, b, rc, z, sp = reversed(digits)
        row = self.pipelines[pipe]
        p, v = row[:, 0], row[:, 3]
        etp = np.where(etp == 0, t, etp)  # dense models: the tensor-parallel degree (unused)
        num_gpus = self.num_gpus
        replicas, rest = np.divmod(num_gpus, t * p * c)
        d = np.where(rest == 0, replicas, 1)
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
            expert_tensor_parallel=etp,
            account_for_embedding_in_pipeline_split=row[:, 1].astype(np.bool_),
            account_for_loss_in_pipeline_split=row[:, 2].astype(np.bool_),
            decoder_first_pipeline_num_layers=row[:, 4],
            decoder_last_pipeline_num_layers=row[:, 5],
            stage_layers=self.pipeline_stages[pipe],
            fp8_param_gather=np.full(n, self.base.parallelism.fp8_param_gather, dtype=np.bool_),
            megatron_fsdp=np.full(n, self.base.parallelism.megatron_fsdp, dtype=np.bool_),
        )
        framework = self.base.training.framework
        layout = JobLayout(
            cols, tp_comm_overlap=self.tp_comm_overlap is True, job=self.base.parallelism
        )
        code = layout_violations(self.base.model, num_gpus, layout, framework=framework)
        reason = np.where(code >= 0, _REASON_OF_CODE[code], -1)
        if self.data_parallel is not None:  # checked once the GPUs are tiled, before the rest
            allowed = np.isin(d, np.asarray(self.data_parallel, dtype=np.int64))
            reason[(code != _TILES) & ~allowed] = DATA_PARALLEL_NOT_ALLOWED
        reason[(reason < 0) & self._equivalent(cols)] = EQUIVALENT_LAYOUT
        return cols, reason

    def operator_codes(self, cols: CandidateColumns) -> IntArray:
        """One code per candidate of this sub-space, equal for two candidates exactly when
        they agree on every column of ``planner.perf.operators.OPERATOR_COLUMNS`` (so they
        have the same operator table): the mixed-radix number of each column's position among
        the values the sub-space allows for it. Shape ``(cols.n,)``, codes in ``[0, product of
        the value counts)``."""
        code = np.zeros(cols.n, dtype=np.int64)
        for name, allowed in zip(OPERATOR_COLUMNS, self.operator_values, strict=True):
            column = np.asarray(getattr(cols, name))
            code = code * len(allowed) + np.searchsorted(allowed, column)
        return code

    def _column_values(self, name: str) -> IntArray:
        """The sorted distinct values candidates of this sub-space take in column ``name``
        (the expert tensor-parallel degree: its listed values, with the tensor-parallel
        degrees standing for "the tensor-parallel one", code 0)."""
        values = self.values[DIGITS.index(name)]
        if name == "expert_tensor_parallel":
            tensor = self.values[DIGITS.index("tensor_parallel")]
            values = np.union1d(values[values > 0], tensor)
        out: IntArray = np.unique(values).astype(np.int64)
        return out

    def _fp8_param_gather_refuses_stage_0(self) -> bool:
        """Whether the layout rules refuse ZeRO stage 0 for every candidate of this sub-space
        (``fp8_param_gather_rule``: FP8 parameters under a framework that needs a sharded
        optimizer for them, unless Megatron-FSDP shards)."""
        parallelism = self.base.parallelism
        return (
            parallelism.fp8_param_gather
            and not parallelism.megatron_fsdp
            and fp8_param_gather_rule(self.base.training.framework)
        )

    def _optimizer_dtypes_refuse(self) -> frozenset[int]:
        """The ZeRO stages the layout rules refuse for every candidate of this sub-space for
        the job's optimizer dtypes under Megatron-Core's optimizer (``optimizer_dtype_rule``):
        stage 0 where they need the precision-aware optimizer, stages 0-2 for a bf16 master;
        none under Megatron-FSDP."""
        par = self.base.parallelism
        if par.megatron_fsdp or not optimizer_dtype_rule(self.base.training.framework):
            return frozenset()
        if par.main_params_dtype is MainParamsDtype.BF16:
            return frozenset({0, 1, 2})
        return frozenset({0}) if needs_precision_aware_optimizer(par) else frozenset()

    def _equivalent(self, cols: CandidateColumns) -> NDArray[np.bool_]:
        """Candidates equivalent to one with a lower allowed ZeRO stage (module docstring):
        stage 1 or 2 where every data-parallel group has one rank."""
        # a stage the layout rules refuse for every candidate is not the one kept: FP8
        # parameters without a sharded optimizer (fp8_param_gather_rule) leave stage 1
        refused = 0 if self._fp8_param_gather_refuses_stage_0() else -1
        lower = [
            s
            for s in self.zero_stages
            if s <= 2 and s != refused and s not in self._optimizer_dtypes_refuse()
        ]
        if len(lower) < 2:
            return np.zeros(cols.n, dtype=np.bool_)
        dense_group = cols.data_parallel * cols.context_parallel
        etp = (
            cols.tensor_parallel
            if cols.expert_tensor_parallel is None
            else (cols.expert_tensor_parallel)
        )
        expert_group = (cols.tensor_parallel * dense_group) // np.maximum(
            etp * cols.expert_parallel, 1
        )
        alone = (dense_group == 1) & ((expert_group <= 1) | (not self.base.model.is_moe))
        out: NDArray[np.bool_] = alone & (cols.zero_stage > lower[0]) & (cols.zero_stage <= 2)
        return out


def allowed_counts(path: str, values: Sequence[object], *, minimum: int = 1) -> tuple[int, ...]:
    """Validate a list of allowed counts (GPU counts, batch sizes, degrees): each an ``int``
    ``>= minimum``; the sorted distinct values. ``SpecError(path, ...)`` (``path[i]`` naming
    the element when there are several) for an empty list or a bad element."""
    if not values:
        raise SpecError(path, "an empty list allows nothing; leave the field out to open it")
    for i, value in enumerate(values):
        require_int(f"{path}[{i}]" if len(values) > 1 else path, value, minimum=minimum)
    return tuple(sorted({cast(int, v) for v in values}))


@dataclass(frozen=True, slots=True, kw_only=True)
class Knobs:
    """The allowed values of each enumerated knob (``KNOBS``), ``None`` when open, and the
    allowed values of the derived ``data_parallel`` degree (``None``: any).

    Values may repeat and come in any order (a sweep takes the distinct values, ascending).
    Raises ``SpecError("parallelism.<knob>", ...)`` for an empty tuple, a degree or micro-batch
    size below 1, a ZeRO stage outside 0-3, a recompute value that is not a ``Recompute``, a
    sequence-parallel or ``account_for`` value that is not a ``bool``, a first / last rank's
    layer count (``decoder_first/last_pipeline_num_layers``) that is neither ``None`` (unset)
    nor an ``int >= 1``.
    """

    tensor_parallel: tuple[int, ...] | None = None
    pipeline_parallel: tuple[int, ...] | None = None
    context_parallel: tuple[int, ...] | None = None
    expert_parallel: tuple[int, ...] | None = None
    virtual_pipeline: tuple[int, ...] | None = None
    micro_batch_size: tuple[int, ...] | None = None
    recompute: tuple[Recompute, ...] | None = None
    zero_stage: tuple[int, ...] | None = None
    sequence_parallel: tuple[bool, ...] | None = None
    expert_tensor_parallel: tuple[int, ...] | None = None
    account_for_embedding_in_pipeline_split: tuple[bool, ...] | None = None
    account_for_loss_in_pipeline_split: tuple[bool, ...] | None = None
    decoder_first_pipeline_num_layers: tuple[int | None, ...] | None = None
    decoder_last_pipeline_num_layers: tuple[int | None, ...] | None = None
    data_parallel: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        for name in (*KNOBS, "data_parallel"):
            values = getattr(self, name)
            if values is not None:
                _KNOB_CHECKS[name](f"parallelism.{name}", values)

    @classmethod
    def from_values(cls, values: Mapping[str, Sequence[object]]) -> Knobs:
        """Knobs from the allowed values of each knob as a document gives them (a knob left
        out is open), each checked as ``Knobs`` checks them, in the same order (so the first
        bad knob is the one reported). Raises ``SpecError("parallelism.<knob>", ...)``."""

        def given(name: str, check: Callable[[str, Sequence[object]], _T]) -> _T | None:
            raw = values.get(name)
            return None if raw is None else check(f"parallelism.{name}", raw)

        return cls(
            tensor_parallel=given("tensor_parallel", _degrees),
            pipeline_parallel=given("pipeline_parallel", _degrees),
            context_parallel=given("context_parallel", _degrees),
            expert_parallel=given("expert_parallel", _degrees),
            virtual_pipeline=given("virtual_pipeline", _degrees),
            micro_batch_size=given("micro_batch_size", _degrees),
            recompute=given("recompute", _recompute_modes),
            zero_stage=given("zero_stage", _zero_stages),
            sequence_parallel=given("sequence_parallel", _flags),
            expert_tensor_parallel=given("expert_tensor_parallel", _degrees),
            account_for_embedding_in_pipeline_split=given(
                "account_for_embedding_in_pipeline_split", _flags
            ),
            account_for_loss_in_pipeline_split=given("account_for_loss_in_pipeline_split", _flags),
            decoder_first_pipeline_num_layers=given(
                "decoder_first_pipeline_num_layers", _layer_counts
            ),
            decoder_last_pipeline_num_layers=given(
                "decoder_last_pipeline_num_layers", _layer_counts
            ),
            data_parallel=given("data_parallel", _degrees),
        )

    def codes(self, name: str) -> tuple[int, ...] | None:
        """The distinct allowed values of knob ``name`` as array codes, ascending (recompute
        as ``Recompute.code``, sequence parallel as 0/1, an unset first / last rank's layer
        count as 0); None when open."""
        values = getattr(self, name)
        if values is None:
            return None
        if name in _SPLIT_KNOBS:
            return tuple(sorted({0 if v is None else int(v) for v in values}))
        if name == "recompute":
            return tuple(sorted({Recompute(v).code for v in values}))
        return tuple(sorted({int(v) for v in values}))


def _degrees(path: str, values: Sequence[object]) -> tuple[int, ...]:
    """Allowed degrees or sizes, in the order given: each an ``int >= 1``."""
    allowed_counts(path, values)  # raises on an empty list or a bad element
    return tuple(v for v in values if isinstance(v, int))  # every one, checked above


def _zero_stages(path: str, values: Sequence[object]) -> tuple[int, ...]:
    """Allowed ZeRO stages, in the order given: each 0, 1, 2 or 3."""
    stages = allowed_counts(path, values, minimum=0)
    if stages[-1] > 3:
        raise SpecError(path, f"must be 0, 1, 2 or 3, got {stages[-1]}")
    return tuple(v for v in values if isinstance(v, int))  # every one, checked above


def _flags(path: str, values: Sequence[object]) -> tuple[bool, ...]:
    """Allowed values of an on/off knob, in the order given: each a ``bool``."""
    out: list[bool] = []
    for value in values:
        if not isinstance(value, bool):
            raise SpecError(path, f"must be true or false (or a list of them), got {value!r}")
        out.append(value)
    return tuple(out)


def _layer_counts(path: str, values: Sequence[object]) -> tuple[int | None, ...]:
    """Allowed layer counts of a first / last pipeline rank, in the order given: each an
    ``int >= 1`` or None (unset)."""
    if not values:
        allowed_counts(path, values)  # raises: an empty list allows nothing
    counts = [v for v in values if v is not None]
    if counts:
        allowed_counts(path, counts)
    return tuple(v for v in values if v is None or isinstance(v, int))  # every one, checked


def _recompute_modes(path: str, values: Sequence[object]) -> tuple[Recompute, ...]:
    """Allowed recompute modes, in the order given: each a ``Recompute``."""
    if not values:
        raise SpecError(path, "an empty list allows nothing; leave the field out to open it")
    out: list[Recompute] = []
    for value in values:
        if not isinstance(value, Recompute):
            raise SpecError(
                path, f"unknown value {value!r}; use one of {', '.join(r.value for r in Recompute)}"
            )
        out.append(value)
    return tuple(out)


_KNOB_CHECKS: dict[str, Callable[[str, Sequence[object]], tuple[object, ...]]] = {
    **dict.fromkeys((*KNOBS, "data_parallel"), _degrees),
    "recompute": _recompute_modes,
    "zero_stage": _zero_stages,
    **dict.fromkeys(_BOOL_KNOBS, _flags),
    **dict.fromkeys(_SPLIT_KNOBS, _layer_counts),
}
"""How each knob's allowed values are checked (``Knobs``)."""


def _count_or_none(column: IntArray | None, i: int) -> int | None:
    """An optional layer-count column's value for candidate ``i``: None where unset (0)."""
    if column is None or int(column[i]) == 0:
        return None
    return int(column[i])


def _probe(base: Scenario, num_gpus: int) -> Scenario:
    """``base`` on ``num_gpus`` GPUs in the plainest layout (pure data parallelism): the
    scenario whose arrays the candidates of that GPU count replace the layout of. A
    ``tp_comm_overlap`` the framework refuses at tensor parallelism 1
    (``tp_comm_overlap_sequence_rule``) is left unset there (``probe_tp_comm_overlap``): the
    sub-space carries the job's value and its arrays' column (``DesignSpace``)."""
    parallelism = replace(
        base.parallelism,
        tp_comm_overlap=probe_tp_comm_overlap(
            base.parallelism.tp_comm_overlap, str(base.training.framework)
        ),
        tensor_parallel=1,
        pipeline_parallel=1,
        context_parallel=1,
        expert_parallel=1,
        data_parallel=num_gpus,
        virtual_pipeline=1,
        sequence_parallel=False,
        micro_batch_size=1,
        global_batch_size=num_gpus,
        expert_tensor_parallel=None,
        pipeline_layout=None,
        decoder_first_pipeline_num_layers=None,
        decoder_last_pipeline_num_layers=None,
        account_for_embedding_in_pipeline_split=False,
        account_for_loss_in_pipeline_split=False,
    )
    return replace(
        base, hardware=replace(base.hardware, num_gpus=num_gpus), parallelism=parallelism
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DesignSpace:
    """Every layout of one job to consider: its sub-spaces, one per (GPU count, global batch).

    ``base``: the job (a validated ``Scenario``; its own GPU count and layout do not matter,
    its precision, flash attention, gradient-reduction precision and overlap are every
    candidate's). ``num_gpus`` and ``global_batch_size``: the values to consider (any order,
    repeats ignored); ``knobs``: the allowed values of the other knobs. ``subspaces`` is
    derived. ``tp_comm_overlap``: the job's stated ``parallelism.tp_comm_overlap`` where
    ``base`` (a pure data-parallel probe, ``planner.scenario.space.probe_document``) could not
    state it (Megatron-LM refuses it at tensor parallelism 1); None: the base's. Raises
    ``SpecError("hardware.num_gpus" | "parallelism.global_batch_size", ...)`` for an empty
    list or a count below 1.
    """

    base: Scenario
    num_gpus: tuple[int, ...]
    global_batch_size: tuple[int, ...]
    knobs: Knobs = field(default_factory=Knobs)
    tp_comm_overlap: bool | None = None
    subspaces: tuple[SubSpace, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        gpu_counts = allowed_counts("hardware.num_gpus", self.num_gpus)
        batches = allowed_counts("parallelism.global_batch_size", self.global_batch_size)
        subspaces: list[SubSpace] = []
        offset = 0
        overlap = self.job_tp_comm_overlap
        for num_gpus in gpu_counts:
            base = _probe(self.base, num_gpus)
            base_arrays = ScenarioArrays.from_scenarios([base])
            if overlap is not None:  # the job's, which the probe may leave unset
                base_arrays = replace(base_arrays, tp_comm_overlap=np.array([overlap]))
            pipelines = pipeline_combinations(base, num_gpus, self.knobs)
            for batch in batches:
                sub = SubSpace(
                    num_gpus=num_gpus,
                    global_batch_size=batch,
                    base=base,
                    base_arrays=base_arrays,
                    values=knob_values(base, num_gpus, batch, self.knobs, len(pipelines)),
                    pipelines=pipelines,
                    data_parallel=self.knobs.data_parallel,
                    offset=offset,
                    zero_stages=self.knobs.codes("zero_stage") or (0, 1, 2, 3),
                    tp_comm_overlap=overlap,
                )
                subspaces.append(sub)
                offset += sub.size
        object.__setattr__(self, "subspaces", tuple(subspaces))

    @property
    def name(self) -> str | None:
        """The job's name (``base.name``)."""
        return self.base.name

    @property
    def job_tp_comm_overlap(self) -> bool | None:
        """The job's ``parallelism.tp_comm_overlap``: ``tp_comm_overlap``, else the base's."""
        if self.tp_comm_overlap is not None:
            return self.tp_comm_overlap
        return self.base.parallelism.tp_comm_overlap

    @property
    def size(self) -> int:
        """Candidates enumerated over all sub-spaces."""
        return sum(s.size for s in self.subspaces)

    def scenario(self, candidates: CandidateColumns, i: int) -> Scenario:
        """Candidate ``i`` of ``candidates`` (a valid layout of this space) as its
        ``Scenario``: the base with that GPU count and layout (``dataclasses.replace``)."""
        parallelism = replace(
            self.base.parallelism,
            tensor_parallel=int(candidates.tensor_parallel[i]),
            pipeline_parallel=int(candidates.pipeline_parallel[i]),
            context_parallel=int(candidates.context_parallel[i]),
            expert_parallel=int(candidates.expert_parallel[i]),
            data_parallel=int(candidates.data_parallel[i]),
            virtual_pipeline=int(candidates.virtual_pipeline[i]),
            sequence_parallel=bool(candidates.sequence_parallel[i]),
            micro_batch_size=int(candidates.micro_batch_size[i]),
            global_batch_size=int(candidates.global_batch_size[i]),
            recompute=Recompute.from_code(int(candidates.recompute[i])),
            zero_stage=int(candidates.zero_stage[i]),
            tp_comm_overlap=self.job_tp_comm_overlap,
            expert_tensor_parallel=(
                int(candidates.expert_tensor_parallel[i])
                if self.base.model.is_moe and candidates.expert_tensor_parallel is not None
                else None
            ),
            account_for_embedding_in_pipeline_split=bool(
                candidates.flag("account_for_embedding_in_pipeline_split")[i]
            ),
            account_for_loss_in_pipeline_split=bool(
                candidates.flag("account_for_loss_in_pipeline_split")[i]
            ),
            decoder_first_pipeline_num_layers=_count_or_none(
                candidates.decoder_first_pipeline_num_layers, i
            ),
            decoder_last_pipeline_num_layers=_count_or_none(
                candidates.decoder_last_pipeline_num_layers, i
            ),
        )
        hardware = replace(self.base.hardware, num_gpus=int(candidates.num_gpus[i]))
        return replace(self.base, hardware=hardware, parallelism=parallelism)
