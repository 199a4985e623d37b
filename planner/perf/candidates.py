"""``ScenarioArrays`` for many parallelism candidates of one base scenario, straight from arrays.

Design-space sweeps (``planner.search``) evaluate 10^5-10^6 layouts of one job; building a
``Scenario`` value per layout would cost more than the engine itself. ``candidate_arrays``
takes the arrays of one validated *base* scenario (``ScenarioArrays.from_scenarios([base])``:
model, hardware, training, precision, flash attention) and replaces the parallelism columns
(and the GPU count) with the candidates' values. Every other column is the base's, repeated:
the engine then computes exactly what ``predict`` computes for each candidate's scenario
(the search's tests and ``benchmarks/explore.py`` check this to 1e-9 relative).

The caller guarantees the candidates are valid layouts (``Scenario``'s divisibility rules);
nothing is checked here. The layers of each pipeline rank come from the same split rules as a
``Scenario``'s (``planner.specs.pipeline_split.stage_layer_arrays``, under the framework the
caller names).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.perf.batch import ScenarioArrays, constant_column, from_fields, with_fields
from planner.perf.efficiency import DeviceArrays
from planner.specs.feasibility import DEFAULT_FRAMEWORK
from planner.specs.folding import expert_tensor_parallel_of
from planner.specs.pipeline_split import stage_layer_arrays

__all__ = ["CandidateColumns", "candidate_arrays"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateColumns:
    """Parallelism of ``n`` candidates, arrays of shape ``(n,)`` (integer degrees and sizes).

    ``recompute`` codes: 0 none, 1 selective, 2 full (as ``ScenarioArrays.recompute``);
    ``num_gpus`` is ``tensor·pipeline·context·data``. ``num_microbatches`` is derived,
    ``global_batch_size // (data_parallel · micro_batch_size)``. ``expert_tensor_parallel``
    (MoE parallel folding), the ``account_for`` split options and the uneven first / last
    stages (``decoder_first_pipeline_num_layers`` / ``decoder_last_pipeline_num_layers``,
    transformer layers of pipeline rank 0 / ``p-1``, ``0`` where unset) are optional: None
    reads as unset (the degree a scenario stating none runs with,
    ``planner.specs.folding.expert_tensor_parallel_of`` under the framework; no option; no
    explicit count).
    ``stage_layers`` (optional, shape ``(n, 4)``): what ``stage_layer_arrays`` gives for each
    candidate's split (layers of rank 0, of the busiest middle rank, of rank ``p-1``, and 1
    where the framework accepts the split, else 0), when the caller has it already (a design
    space computes it once per pipeline combination); None: computed where needed.
    ``fp8_param_gather`` (optional): whether the candidate keeps its weights in FP8 (the base
    scenario's ``parallelism.fp8_param_gather``, one value for a design space), read by the
    layout rules (``planner.specs.feasibility``); the engine takes the base's. None: false.
    ``megatron_fsdp`` (optional): whether the candidate's sharding is Megatron-FSDP's (the base
    scenario's ``parallelism.megatron_fsdp``), read by the layout rules. None: false.
    """

    tensor_parallel: IntArray
    pipeline_parallel: IntArray
    context_parallel: IntArray
    expert_parallel: IntArray
    data_parallel: IntArray
    virtual_pipeline: IntArray
    sequence_parallel: BoolArray
    micro_batch_size: IntArray
    global_batch_size: IntArray
    recompute: IntArray
    zero_stage: IntArray
    num_gpus: IntArray
    expert_tensor_parallel: IntArray | None = None
    account_for_embedding_in_pipeline_split: BoolArray | None = None
    account_for_loss_in_pipeline_split: BoolArray | None = None
    decoder_first_pipeline_num_layers: IntArray | None = None
    decoder_last_pipeline_num_layers: IntArray | None = None
    stage_layers: IntArray | None = None
    fp8_param_gather: BoolArray | None = None
    megatron_fsdp: BoolArray | None = None

    @property
    def n(self) -> int:
        """Number of candidates."""
        return int(self.tensor_parallel.shape[0])

    def take(self, index: IntArray | BoolArray) -> CandidateColumns:
        """The candidates selected by an index or mask array."""
        columns: dict[str, object] = {
            f.name: None if getattr(self, f.name) is None else getattr(self, f.name)[index]
            for f in fields(self)
        }
        return from_fields(CandidateColumns, columns)

    def flag(self, name: str) -> BoolArray:
        """The optional bool column ``name``, all false when unset."""
        value = getattr(self, name)
        out: BoolArray = (
            np.zeros(self.n, dtype=np.bool_) if value is None else value.astype(np.bool_)
        )
        return out


@dataclass(frozen=True, slots=True)
class _Experts:
    """The MoE shape of a base scenario (``planner.specs.folding.ExpertShape``)."""

    is_moe: bool
    moe_ffn_hidden_size: int


def _repeat(value: object, n: int) -> NDArray[Any]:
    """The base's one value for ``n`` candidates: a read-only broadcast view of shape ``(n,)``
    (no copy; the engine only reads its inputs)."""
    return constant_column(value if isinstance(value, np.ndarray) else np.asarray([value]), n)


def candidate_arrays(
    base: ScenarioArrays, cand: CandidateColumns, *, framework: str = DEFAULT_FRAMEWORK
) -> ScenarioArrays:
    """Arrays of ``cand.n`` scenarios: ``base`` (a batch of one, as arrays or in the
    one-scenario form) with each candidate's layout, its layers per pipeline rank split as
    ``framework`` (a ``Framework`` value, the base scenario's) splits them.

    Shapes: every field ``(cand.n,)``. Raises ``ValueError`` when ``base.num_scenarios != 1``.
    """
    if base.num_scenarios != 1:
        raise ValueError(f"the base must be a batch of one scenario, got {base.num_scenarios}")
    n = cand.n
    f64 = np.float64
    num_microbatches = cand.global_batch_size // (cand.data_parallel * cand.micro_batch_size)
    num_layers = int(np.asarray(base.num_layers).reshape(-1)[0])
    if cand.stage_layers is not None:
        first, middle, last = (
            cand.stage_layers[:, 0],
            cand.stage_layers[:, 1],
            cand.stage_layers[:, 2],
        )
    else:
        first, middle, last, _ = stage_layer_arrays(
            num_layers,
            cand.pipeline_parallel,
            cand.virtual_pipeline,
            cand.flag("account_for_embedding_in_pipeline_split"),
            cand.flag("account_for_loss_in_pipeline_split"),
            framework,
            first=cand.decoder_first_pipeline_num_layers,
            last=cand.decoder_last_pipeline_num_layers,
        )
    etp = cand.expert_tensor_parallel
    if etp is None:  # resolved as a scenario leaving it unset resolves it
        experts = _Experts(
            is_moe=float(np.asarray(base.num_experts).reshape(-1)[0]) > 0,
            moe_ffn_hidden_size=int(np.asarray(base.moe_ffn_hidden_size).reshape(-1)[0]),
        )
        etp = np.asarray(expert_tensor_parallel_of(experts, 0, cand, framework))
    columns: dict[str, object] = {
        "tensor_parallel": cand.tensor_parallel.astype(f64),
        "pipeline_parallel": cand.pipeline_parallel.astype(f64),
        "context_parallel": cand.context_parallel.astype(f64),
        "expert_parallel": cand.expert_parallel.astype(f64),
        "data_parallel": cand.data_parallel.astype(f64),
        "virtual_pipeline": cand.virtual_pipeline.astype(f64),
        "sequence_parallel": cand.sequence_parallel.astype(np.bool_),
        "micro_batch_size": cand.micro_batch_size.astype(f64),
        "global_batch_size": cand.global_batch_size.astype(f64),
        "num_microbatches": num_microbatches.astype(f64),
        "recompute": cand.recompute.astype(np.int64),
        "zero_stage": cand.zero_stage.astype(np.int64),
        "num_gpus": cand.num_gpus.astype(f64),
        "expert_tensor_parallel": etp.astype(f64),
        "first_stage_layers": first.astype(f64),
        "middle_stage_layers": middle.astype(f64),
        "last_stage_layers": last.astype(f64),
    }
    dev = base.device
    device_fields: dict[str, object] = {
        f.name: (getattr(dev, f.name) if f.name == "gpu_keys" else _repeat(getattr(dev, f.name), n))
        for f in fields(DeviceArrays)
    }
    device = from_fields(DeviceArrays, device_fields)
    for f in fields(ScenarioArrays):
        if f.name in columns or f.name in ("num_scenarios", "device"):
            continue
        columns[f.name] = _repeat(getattr(base, f.name), n)
    return with_fields(base, {"num_scenarios": n, "device": device, **columns})
