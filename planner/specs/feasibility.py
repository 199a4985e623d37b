"""Layout validity: the one set of rules saying whether a parallel layout tiles the GPUs and
the model (Megatron-LM's divisibility constraints), for one candidate or millions at once.

Each rule is written once, over integers that are Python ``int`` values (one candidate) or
numpy ``int64`` arrays of shape ``(n,)`` (a batch of candidates of one model and one GPU
count): ``%``, ``*``, ``==``, ``&`` and ``|`` mean the same on both. Two readers apply them in
the order of ``Violation`` (a candidate counts under its first broken rule):

* ``layout_violations(model, num_gpus, layout)``: arrays in, one code per candidate out
  (``-1`` valid, else ``Violation.code``). The design-space search (``planner.search``) counts
  its rejections with it.
* ``first_violation(model, num_gpus, layout)`` and ``parallelism_violation(layout)``: one
  candidate, stops at the first broken rule. ``Scenario`` and ``ParallelismSpec`` validation
  call them and raise ``violation_error(...)``, the rule's message: the field to fix, what is
  wrong and the fix.

Rules (Megatron-LM ``arguments.py`` / Megatron-Core ``parallel_state`` constraints):
``tensor·pipeline·context·data = num_gpus``; tensor parallel divides the attention heads, the query
groups and the MLP width(s); the framework splits the layers over ``pipeline·virtual pipeline``
stages (evenly, or as ``planner.specs.pipeline_split`` says: the uneven-stage options, an explicit
layout, the framework's default); interleaving needs pipeline parallelism; load-balanced causal
context parallelism needs ``2·cp`` to divide the sequence; sequence parallelism needs tensor
parallelism and a local sequence divisible by it; an MoE model with tensor parallelism needs
sequence parallelism under Megatron-Core (``MoELayer.forward`` refuses to train without it:
``moe_tensor_parallel_rule``) and must not use it under NeMo Automodel
(``moe_sequence_parallel_refused``); NeMo Automodel's async tensor parallelism (``tp_comm_overlap``,
its ``enable_async_tensor_parallel``) needs sequence parallelism for a dense model and is refused
for an MoE model (``async_tensor_parallel_rule``); Megatron-LM's ``--tp-comm-overlap``
needs sequence parallelism at every tensor-parallel degree, so never at 1
(``tp_comm_overlap_sequence_rule``); expert parallelism needs an MoE model and divides
the experts, and the expert groups fold into the ranks of a pipeline stage (Megatron-Core "MoE
parallel folding", ``parallel_state``: the world size is divisible by
``expert_tensor·expert·pipeline``, so ``expert_tensor_parallel · expert_parallel`` divides
``tensor·context·data``; the expert FFN is split over the expert tensor-parallel ranks); NeMo
Automodel splits no routed expert over tensor parallelism (expert tensor parallelism 1:
``planner.specs.folding``); routed experts with biases (``model.moe_expert_bias``, GPT-OSS) need
expert tensor parallelism 1 under Megatron-Core (``expert_bias_rule``); FP8 parameters
(``fp8_param_gather``) need a sharded optimizer (ZeRO stage 1 or more) or Megatron-FSDP
(``megatron_fsdp``) under Megatron-LM (``fp8_param_gather_rule``); under Megatron-Core's
optimizer (Megatron-LM, NeMo 2, Megatron-Bridge: ``optimizer_dtype_rule``) optimizer dtypes
that need its precision-aware optimizer need a sharded optimizer too, and a bf16 master
(``main_params_dtype: bf16``) is refused below ZeRO-3, neither under Megatron-FSDP; the global
batch is a multiple of ``data_parallel·micro_batch_size``; the interleaved schedule's
micro-batch rule of the framework (``interleaved_microbatch_rule``).
Which GPU precision a scenario may use is a property of the GPU, not of the layout, and stays
in ``Scenario``.

The rules that depend on the framework (the split, the interleaved micro-batch count) take
its name (a ``Framework`` value; ``"megatron"`` by default). Layout knobs a ``Layout`` may
lack (a candidate of the search has no explicit split) read as unset.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from planner.errors import SpecError
from planner.specs._checks import divisors
from planner.specs.folding import (
    expert_tensor_parallel_of,
    experts_split_by_tensor_parallel,
    knob,
)
from planner.specs.model import ModelSpec
from planner.specs.pipeline_split import (
    DEFAULT_FRAMEWORK,
    MEGATRON_CORE,
    TORCH_PIPELINING,
    split_error,
    stage_layer_arrays,
    stage_layers_of,
)

__all__ = [
    "ASYNC_TENSOR_PARALLEL_CHECKED",
    "ASYNC_TENSOR_PARALLEL_SOURCE",
    "BF16_MAIN_PARAMS_SOURCE",
    "DEFAULT_FRAMEWORK",
    "EXPERT_BIAS_SOURCE",
    "FP8_PARAM_GATHER_SOURCE",
    "MOE_SEQUENCE_PARALLEL_REFUSED_SOURCE",
    "MOE_SEQUENCE_PARALLEL_SOURCE",
    "MOE_WITHOUT_SEQUENCE_PARALLEL",
    "PRECISION_AWARE_OPTIMIZER_SOURCE",
    "SEQUENCE_PARALLEL_OFF_BY_DEFAULT",
    "TP_COMM_OVERLAP_SEQUENCE_SOURCE",
    "Layout",
    "Violation",
    "async_tensor_parallel_rule",
    "default_sequence_parallel",
    "expert_bias_rule",
    "expert_tensor_parallel_of",
    "first_violation",
    "fp8_param_gather_rule",
    "interleaved_microbatch_rule",
    "layout_violations",
    "moe_sequence_parallel_refused",
    "moe_tensor_parallel_rule",
    "needs_precision_aware_optimizer",
    "optimizer_dtype_rule",
    "parallelism_violation",
    "probe_tp_comm_overlap",
    "stage_layers_of",
    "tp_comm_overlap_sequence_rule",
    "violation_error",
]


IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]
Int = int | IntArray
Flag = bool | BoolArray


class Layout(Protocol):
    """The knobs the rules read: ``ParallelismSpec`` (one candidate, ``int``/``bool``) and
    ``planner.perf.candidates.CandidateColumns`` (arrays of shape ``(n,)``) both are one. The
    messages read one candidate (Python numbers, or arrays of one element)."""

    @property
    def tensor_parallel(self) -> Int: ...
    @property
    def pipeline_parallel(self) -> Int: ...
    @property
    def context_parallel(self) -> Int: ...
    @property
    def expert_parallel(self) -> Int: ...
    @property
    def data_parallel(self) -> Int: ...
    @property
    def virtual_pipeline(self) -> Int: ...
    @property
    def sequence_parallel(self) -> Flag: ...
    @property
    def micro_batch_size(self) -> Int: ...
    @property
    def global_batch_size(self) -> Int: ...


class Violation(StrEnum):
    """Why a layout is invalid, in the order the rules are checked. The value is the reason's
    name in ``planner explore``'s rejection counts; ``code`` its integer in arrays."""

    GPUS_NOT_DIVISIBLE_BY_TP_PP_CP = "gpus_not_divisible_by_tp_pp_cp"
    TENSOR_PARALLEL_DOES_NOT_DIVIDE_MODEL = "tensor_parallel_does_not_divide_model"
    LAYERS_NOT_DIVISIBLE_BY_PP_VP = "layers_not_divisible_by_pp_vp"
    VIRTUAL_PIPELINE_NEEDS_PIPELINE_PARALLEL = "virtual_pipeline_needs_pipeline_parallel"
    CONTEXT_PARALLEL_DOES_NOT_DIVIDE_SEQUENCE = "context_parallel_does_not_divide_sequence"
    SEQUENCE_PARALLEL_NEEDS_TENSOR_PARALLEL = "sequence_parallel_needs_tensor_parallel"
    SEQUENCE_NOT_DIVISIBLE_BY_TENSOR_PARALLEL = "sequence_not_divisible_by_tensor_parallel"
    MOE_TENSOR_PARALLEL_NEEDS_SEQUENCE_PARALLEL = "moe_tensor_parallel_needs_sequence_parallel"
    ASYNC_TENSOR_PARALLEL_NEEDS_SEQUENCE_PARALLEL = "async_tensor_parallel_needs_sequence_parallel"
    MOE_ASYNC_TENSOR_PARALLEL_NOT_SUPPORTED_BY_FRAMEWORK = (
        "moe_async_tensor_parallel_not_supported_by_framework"
    )
    MOE_SEQUENCE_PARALLEL_NOT_SUPPORTED_BY_FRAMEWORK = (
        "moe_sequence_parallel_not_supported_by_framework"
    )
    EXPERT_PARALLEL_INVALID = "expert_parallel_invalid"
    EXPERTS_NOT_SPLIT_BY_FRAMEWORK = "experts_not_split_by_framework"
    BIASED_EXPERTS_NEED_EXPERT_TENSOR_PARALLEL_1 = "biased_experts_need_expert_tensor_parallel_1"
    FP8_PARAM_GATHER_NEEDS_SHARDED_OPTIMIZER = "fp8_param_gather_needs_sharded_optimizer"
    PRECISION_AWARE_OPTIMIZER_NEEDS_DISTRIBUTED_OPTIMIZER = (
        "precision_aware_optimizer_needs_distributed_optimizer"
    )
    BF16_MAIN_PARAMS_NOT_SUPPORTED_BY_FRAMEWORK = "bf16_main_params_not_supported_by_framework"
    GLOBAL_BATCH_NOT_DIVISIBLE_BY_DP_MICRO_BATCH = "global_batch_not_divisible_by_dp_micro_batch"
    MICROBATCHES_INVALID_FOR_INTERLEAVED_SCHEDULE = "microbatches_invalid_for_interleaved_schedule"

    @property
    def code(self) -> int:
        """Array code of this violation: its position in the check order."""
        return _ORDER.index(self)

    @classmethod
    def from_code(cls, code: int) -> Violation:
        """The violation of an array code (``ValueError`` outside ``0..len(Violation)-1``)."""
        if not 0 <= code < len(_ORDER):
            raise ValueError(f"violation code must be in 0..{len(_ORDER) - 1}, got {code}")
        return _ORDER[code]


_ORDER: tuple[Violation, ...] = tuple(Violation)

# ---- the rules: one expression each, for ints or int64 arrays --------------------------------

LayoutRule = Callable[[Layout], Flag]
ScenarioRule = Callable[[ModelSpec, int, Layout, str], Flag]


def _flag(x: Layout, name: str) -> Flag:
    value: Flag = knob(x, name)
    return False if value is None else value


def _tiles(m: ModelSpec, num_gpus: int, x: Layout, fw: str) -> Flag:
    product = x.tensor_parallel * x.pipeline_parallel * x.context_parallel * x.data_parallel
    return product != num_gpus


def _tensor_divides_model(m: ModelSpec, num_gpus: int, x: Layout, fw: str) -> Flag:
    t = x.tensor_parallel
    bad = (m.num_attention_heads % t != 0) | (m.num_query_groups % t != 0)
    bad = bad | (m.ffn_hidden_size % t != 0)
    if m.is_moe and knob(x, "expert_tensor_parallel") is None:
        # no expert tensor parallel degree stated: the experts split over the TP ranks (or,
        # for one candidate that folds only with fewer, over the degree it must have set)
        etp = expert_tensor_parallel_of(m, num_gpus, x, fw)
        bad = bad | (m.moe_ffn_hidden_size % etp != 0)
    return bad


def _layers(m: ModelSpec, num_gpus: int, x: Layout, fw: str) -> Flag:
    if not isinstance(x.pipeline_parallel, np.ndarray):  # one candidate: the cached resolver
        try:
            stage_layers_of(m, x, fw)
        except SpecError:
            return True
        return False
    known = knob(x, "stage_layers")  # CandidateColumns of a design space: split per row once
    if known is not None:
        refused: BoolArray = known[:, 3] == 0
        return refused
    ones = np.ones(x.pipeline_parallel.shape, dtype=np.bool_)
    *_, valid = stage_layer_arrays(
        m.num_layers,
        x.pipeline_parallel,
        np.asarray(x.virtual_pipeline),
        ones & _flag(x, "account_for_embedding_in_pipeline_split"),
        ones & _flag(x, "account_for_loss_in_pipeline_split"),
        str(fw),
        first=knob(x, "decoder_first_pipeline_num_layers"),
        last=knob(x, "decoder_last_pipeline_num_layers"),
    )
    out: BoolArray = ~valid
    return out


def _interleaving_needs_pipeline(x: Layout) -> Flag:
    return (x.virtual_pipeline > 1) & (x.pipeline_parallel == 1)


def _context_divides_sequence(m: ModelSpec, num_gpus: int, x: Layout, fw: str) -> Flag:
    c = x.context_parallel
    return (c > 1) & (m.seq_length % (2 * c) != 0)


def _sequence_parallel_needs_tensor(x: Layout) -> Flag:
    return x.sequence_parallel & (x.tensor_parallel == 1)


def _sequence_divides_by_tensor(m: ModelSpec, num_gpus: int, x: Layout, fw: str) -> Flag:
    local = m.seq_length // x.context_parallel
    return x.sequence_parallel & (local % x.tensor_parallel != 0)


MOE_SEQUENCE_PARALLEL_SOURCE = (
    "NVIDIA/Megatron-LM megatron/core/transformer/moe/moe_layer.py, MoELayer.forward, at "
    "core_v0.16.1 (55ac7082517c3878ae653c07c09c534b8aed49f6) and main "
    "(d98e8a64ddf34856e74b24714e3bedb2f5a39553): raises ValueError when training with the "
    "attention tensor-parallel group larger than 1 and sequence_parallel false"
)
"""Where Megatron-Core refuses an MoE layer with tensor parallelism and no sequence
parallelism."""


def moe_tensor_parallel_rule(framework: str) -> bool:
    """Whether ``framework`` trains MoE layers only with sequence parallelism when
    ``tensor_parallel > 1``: Megatron-LM and NeMo (Megatron-Core, ``MOE_SEQUENCE_PARALLEL_SOURCE``:
    "During training, performance may degrade if MoE and tensor parallelism are enabled
    without also enabling sequence parallelism", raised as a ``ValueError``). The other
    frameworks do not run Megatron-Core's MoE layer, and the planner knows no such rule of
    theirs."""
    return framework in MEGATRON_CORE


def _moe_sequence_parallel(m: ModelSpec, num_gpus: int, x: Layout, fw: str) -> Flag:
    if not m.is_moe or not moe_tensor_parallel_rule(fw):
        return x.tensor_parallel < 0  # False, of the candidates' shape
    sequence_parallel = x.sequence_parallel
    if isinstance(sequence_parallel, np.ndarray):
        out: BoolArray = (x.tensor_parallel > 1) & ~sequence_parallel
        return out
    return bool(x.tensor_parallel > 1) and not sequence_parallel


MOE_SEQUENCE_PARALLEL_REFUSED_SOURCE = (
    "NVIDIA-NeMo/Automodel nemo_automodel/components/moe/parallelizer.py at "
    "36044ad3d139363fb6c73c24af2e7c6b65ec52f6: parallelize_model resolves the MoE "
    "tensor-parallel plan (_resolve_moe_tp_plan) whenever the tensor-parallel mesh is larger "
    "than 1, and that raises ValueError for sequence_parallel=True ('not supported by the "
    "custom MoE TP path yet'); added by 8a83fdcee (after v0.5.0, whose parallelize_model "
    "asserts that MoE models take no tensor parallelism at all)"
)
"""Where NeMo Automodel refuses sequence parallelism for an MoE model with tensor
parallelism."""

MOE_WITHOUT_SEQUENCE_PARALLEL = frozenset({"automodel"})
"""Frameworks (``Framework`` values) whose MoE tensor parallelism keeps the token path
(attention, router) replicated and refuses sequence parallelism
(``MOE_SEQUENCE_PARALLEL_REFUSED_SOURCE``)."""


def moe_sequence_parallel_refused(framework: str) -> bool:
    """Whether ``framework`` refuses sequence parallelism for an MoE model with
    ``tensor_parallel > 1``: NeMo Automodel (``MOE_SEQUENCE_PARALLEL_REFUSED_SOURCE``), the
    converse of Megatron-Core's ``moe_tensor_parallel_rule``."""
    return framework in MOE_WITHOUT_SEQUENCE_PARALLEL


SEQUENCE_PARALLEL_OFF_BY_DEFAULT = frozenset({"automodel"})
"""Frameworks (``Framework`` values) whose sequence parallelism is off unless a run turns it
on, for every model: NeMo Automodel (``FSDP2Config.sequence_parallel = False``,
nemo_automodel/components/distributed/config.py @ 36044ad3d139363fb6c73c24af2e7c6b65ec52f6
and v0.5.0; the dense parallelizer passes it to the tensor-parallel plan as given)."""


def default_sequence_parallel(tensor_parallel: int, framework: str) -> bool:
    """Sequence parallelism when a scenario leaves it out: on with tensor parallelism (as
    Megatron-Core needs it for MoE layers, ``moe_tensor_parallel_rule``, and the Megatron
    recipes run it), except under a framework whose own default is off for every model
    (``SEQUENCE_PARALLEL_OFF_BY_DEFAULT``: NeMo Automodel, whose MoE plan also refuses it,
    ``moe_sequence_parallel_refused``). Stating async tensor parallelism does not turn it on
    there: Automodel raises instead (``async_tensor_parallel_rule``)."""
    if framework in SEQUENCE_PARALLEL_OFF_BY_DEFAULT:
        return False
    return tensor_parallel > 1


def _moe_sequence_parallel_refused(m: ModelSpec, num_gpus: int, x: Layout, fw: str) -> Flag:
    if not m.is_moe or not moe_sequence_parallel_refused(fw):
        return x.tensor_parallel < 0  # False, of the candidates' shape
    return (x.tensor_parallel > 1) & x.sequence_parallel


ASYNC_TENSOR_PARALLEL_SOURCE = (
    "NVIDIA-NeMo/Automodel at 36044ad3d139363fb6c73c24af2e7c6b65ec52f6: "
    "nemo_automodel/components/moe/parallelizer.py parallelize_model raises ValueError for "
    "enable_async_tensor_parallel=True whenever the tensor-parallel mesh is larger than 1 "
    "('not supported by the custom MoE TP path'; added by 8a83fdcee, after v0.5.0, which "
    "asserts that MoE models take no tensor parallelism at all); "
    "nemo_automodel/components/distributed/parallelizer.py (the dense path) raises "
    "ValueError for it without sequence_parallel when the tensor-parallel mesh is larger than "
    "1 ('requires sequence_parallel=True'; also in v0.5.0, added by 2013a4dd6), although the "
    "FSDP2Config docstring says it is forced on"
)
"""Where NeMo Automodel refuses async tensor parallelism (``FSDP2Config``'s
``enable_async_tensor_parallel``, torch.compile's micro-pipelined TP)."""

ASYNC_TENSOR_PARALLEL_CHECKED = frozenset({"automodel"})
"""Frameworks (``Framework`` values) whose async tensor-parallel checks the layout rules apply
(``ASYNC_TENSOR_PARALLEL_SOURCE``)."""


def async_tensor_parallel_rule(framework: str) -> bool:
    """Whether ``framework`` checks a stated ``parallelism.tp_comm_overlap`` (the scenario's
    async tensor parallelism, ``enable_async_tensor_parallel`` in NeMo Automodel) against the
    model and the layout when ``tensor_parallel > 1``: NeMo Automodel refuses it for an MoE
    model and needs sequence parallelism with it for a dense one
    (``ASYNC_TENSOR_PARALLEL_SOURCE``). Megatron-LM's ``--tp-comm-overlap`` check is
    ``tp_comm_overlap_sequence_rule``; torchtitan's async TP has checks of its own the planner
    does not apply here."""
    return framework in ASYNC_TENSOR_PARALLEL_CHECKED


TP_COMM_OVERLAP_SEQUENCE_SOURCE = (
    "NVIDIA/Megatron-LM megatron/training/arguments.py validate_args: 'if args.tp_comm_overlap: "
    "assert args.sequence_parallel == True' ('Tensor parallel communication/GEMM overlap can "
    "happen only when sequence parallelism is enabled') in every release from core_v0.4.0 "
    "(38879f8b3f0edc4ed4f50ac2f3271010b12c549f, megatron/arguments.py) through core_v0.15.0 "
    "(0d7e02bd26d3eb347ad8d1bef625002babfa6df7, line 930), core_v0.19.0 "
    "(5be9626709af2722333bf54797c954c09edeada3) and main "
    "(d98e8a64ddf34856e74b24714e3bedb2f5a39553); from core_v0.10.0 "
    "(7ee599a25ca15f042c1087176b73ebddb0566d02; e1993fa6f70763523a84432ab1f5eb42e77ccf2a moved "
    "it) the assertion runs after validate_args sets sequence_parallel to False at "
    "tensor_model_parallel_size 1, so --tp-comm-overlap at tensor parallelism 1 fails even "
    "with --sequence-parallel (core_v0.4.0 to core_v0.9.0 asserted first and accepted that "
    "pair). NeMo 2 (nemo/lightning/pytorch/callbacks/megatron_comm_overlap.py @ "
    "8cfedd7203462cb251a914e700e5605444277561, also v2.0.0) and Megatron-Bridge "
    "(src/megatron/bridge/training/comm_overlap.py @ 067f987df03b8355b03192d88d70f1709fedf51a, "
    "also v0.3.0) turn the overlap off with a warning at TP < 2 or without sequence_parallel "
    "instead, NeMo 1 likewise (megatron_base_model.py, ub_tp_comm_overlap), and Megatron-Core's "
    "ModelParallelConfig asserts nothing of it"
)
"""Where Megatron-LM refuses ``--tp-comm-overlap`` without sequence parallelism."""


def tp_comm_overlap_sequence_rule(framework: str) -> bool:
    """Whether ``framework`` refuses a stated ``parallelism.tp_comm_overlap`` without
    sequence parallelism at every tensor-parallel degree, 1 included, for every model
    (``TP_COMM_OVERLAP_SEQUENCE_SOURCE``).

    * Megatron-LM: yes (``validate_args``; its sequence parallelism is off at tensor
      parallelism 1, so the overlap is refused there whatever the scenario says).
    * NeMo (1, 2, Megatron-Bridge): no. They drop the overlap with a warning and train; the
      launch readers state no ``tp_comm_overlap`` for them.
    * NeMo Automodel: its own rule, at ``tensor_parallel > 1`` (``async_tensor_parallel_rule``).
    * The other frameworks: not checked.

    An unset ``tp_comm_overlap`` (the framework profile's default) is never refused."""
    return framework == "megatron"


def probe_tp_comm_overlap(stated: bool | None, framework: str) -> bool | None:
    """The ``tp_comm_overlap`` a pure data-parallel probe of a job (the explorer's base, which
    stands for the job's model, hardware and one-per-job fields, never for a candidate) may
    state: ``stated``, except an overlap the framework refuses at tensor parallelism 1
    (``tp_comm_overlap_sequence_rule``), left unset there; the search applies the job's value
    to its candidates (``planner.search.space.DesignSpace``)."""
    if stated is True and tp_comm_overlap_sequence_rule(framework):
        return None
    return stated


def _async_tensor_parallel(x: Layout, fw: str) -> Flag:
    """Candidates stating async tensor parallelism with ``tensor_parallel > 1`` under a
    framework that checks it (an unset ``tp_comm_overlap`` is Automodel's default, off)."""
    if not async_tensor_parallel_rule(fw):
        return x.tensor_parallel < 0  # False, of the candidates' shape
    return (x.tensor_parallel > 1) & _flag(x, "tp_comm_overlap")


def _async_tensor_parallel_sequence(m: ModelSpec, num_gpus: int, x: Layout, fw: str) -> Flag:
    without = np.logical_not(x.sequence_parallel)
    if tp_comm_overlap_sequence_rule(fw):  # every model, every tensor-parallel degree
        return (x.tensor_parallel > 0) & _flag(x, "tp_comm_overlap") & without
    if m.is_moe:  # Automodel's MoE path refuses async TP outright (_moe_async_tensor_parallel)
        return x.tensor_parallel < 0
    return _async_tensor_parallel(x, fw) & without


def _moe_async_tensor_parallel(m: ModelSpec, num_gpus: int, x: Layout, fw: str) -> Flag:
    if not m.is_moe:
        return x.tensor_parallel < 0
    return _async_tensor_parallel(x, fw)


def _expert_parallel(m: ModelSpec, num_gpus: int, x: Layout, fw: str) -> Flag:
    e = x.expert_parallel
    if not m.is_moe:
        return e > 1
    etp = expert_tensor_parallel_of(m, num_gpus, x, fw)
    ranks = x.tensor_parallel * x.context_parallel * x.data_parallel
    return (m.num_experts % e != 0) | (ranks % (etp * e) != 0) | (m.moe_ffn_hidden_size % etp != 0)


def _experts_whole(m: ModelSpec, num_gpus: int, x: Layout, fw: str) -> Flag:
    etp = expert_tensor_parallel_of(m, num_gpus, x, fw)
    if not m.is_moe or experts_split_by_tensor_parallel(fw):
        return etp < 0  # False, of the candidates' shape
    return etp > 1


EXPERT_BIAS_SOURCE = (
    "NVIDIA/Megatron-LM megatron/core/transformer/transformer_config.py, "
    "TransformerConfig.__post_init__: asserts expert_tensor_parallel_size == 1 ('Bias in Moe is "
    "only supported when ETP==1') when num_moe_experts is set and add_bias_linear is true; "
    "added by a329dd6da586261a45a8f7d04c1e659ffedd80ae ('Enable bias in expert mlp [gpt-oss "
    "5/5]', which replaced the earlier refusal of any biased MoE), in every release since: "
    "core_v0.15.0 (103851dcf4c380fe93463e2c128cbfba9bd84e37), core_v0.16.1 "
    "(55ac7082517c3878ae653c07c09c534b8aed49f6) and main "
    "(d98e8a64ddf34856e74b24714e3bedb2f5a39553)"
)
"""Where Megatron-Core refuses routed experts with biases split by expert tensor parallelism."""


def expert_bias_rule(framework: str) -> bool:
    """Whether ``framework`` refuses routed experts with biases (``model.moe_expert_bias``)
    split over more than one expert tensor-parallel rank (``EXPERT_BIAS_SOURCE``; the degree
    defaults to ``tensor_parallel``, ``ModelParallelConfig.__post_init__``).

    * Megatron-LM and NeMo: yes. Both build Megatron-Core's ``TransformerConfig`` (NeMo 2's
      ``GPTOSSConfig`` subclasses it with ``add_bias_linear: True``,
      nemo/collections/llm/gpt/model/gpt_oss.py @ 8cfedd7203462cb251a914e700e5605444277561;
      Megatron-Bridge's ``GPTModelProvider`` is one and its GPT-OSS bridge sets
      ``add_bias_linear``, src/megatron/bridge/models/gpt_provider.py / gpt_oss/gpt_oss_bridge.py
      @ 067f987df03b8355b03192d88d70f1709fedf51a, whose H100 GPT-OSS recipes set
      ``expert_tensor_parallel_size = 1``, recipes/gpt_oss/h100/gpt_oss.py).
    * torchtitan: no. It shards the biased experts over tensor parallelism (``mlp1_bias`` with
      the column-split weight, ``mlp2_bias`` replicated: ``GptossTensorParallel`` and
      ``GptossExpertTensorParallel``, torchtitan/models/gpt_oss/expert_parallel.py @
      a2b5ee66ccb7dec7f4d746832b62780c94152d13; the same layout in
      torchtitan/models/gpt_oss/sharding.py @ b5bcd76c66d0acb1a08b176d9639425bc55e0b2a, after
      it dropped its separate expert tensor-parallel degree).
    * NeMo Automodel: not this rule. Its MoE tensor-parallel plan keeps the routed experts on
      the expert-parallel ranks whatever their biases (``_resolve_moe_tp_plan``,
      nemo_automodel/components/moe/parallelizer.py @
      36044ad3d139363fb6c73c24af2e7c6b65ec52f6), so it raises nothing about biases.
    * The other frameworks: not checked; the planner knows no such rule of theirs.
    """
    return framework in MEGATRON_CORE


def _expert_bias(m: ModelSpec, num_gpus: int, x: Layout, fw: str) -> Flag:
    etp = expert_tensor_parallel_of(m, num_gpus, x, fw)
    if not (m.is_moe and m.moe_expert_bias and expert_bias_rule(fw)):
        return etp < 0  # False, of the candidates' shape
    return etp > 1


FP8_PARAM_GATHER_SOURCE = (
    "NVIDIA/Megatron-LM megatron/training/arguments.py, validate_args: with "
    "args.fp8_param_gather it asserts the distributed optimizer ('--fp8-param-gather only "
    "supported with distributed optimizer') from core_r0.9.0 "
    "(1afee592e85ac7994887eb5f4ef3998f76384333) through core_v0.11.0; the distributed "
    "optimizer or torch FSDP2 at core_v0.12.0 and core_v0.13.0; the distributed optimizer, "
    "torch FSDP2, Megatron-FSDP or inference (no grad) at core_v0.14.0 "
    "(23e00ed0963c35382dfe8a5a94fb3cda4d21e133), core_v0.15.0, core_v0.16.1 "
    "(55ac7082517c3878ae653c07c09c534b8aed49f6) and main "
    "(d98e8a64ddf34856e74b24714e3bedb2f5a39553)"
)
"""Where Megatron-LM refuses FP8 parameters without a sharded optimizer."""


def fp8_param_gather_rule(framework: str) -> bool:
    """Whether ``framework`` refuses ``parallelism.fp8_param_gather`` with ZeRO stage 0 (no
    distributed optimizer, no FSDP), for training.

    * Megatron-LM: yes (``FP8_PARAM_GATHER_SOURCE``; its ZeRO stages 1-2 are the distributed
      optimizer, stage 3 Megatron-FSDP or torch FSDP2), but not under Megatron-FSDP
      (``parallelism.megatron_fsdp``), whose ``--use-megatron-fsdp`` passes the assertion at
      every ``--data-parallel-sharding-strategy``, ``no_shard`` (stage 0) included: the
      assertion names the flag, not a strategy (core_v0.14.0 through main, commits above).
      Before core_v0.14.0 its name was ``--use-custom-fsdp``, which ``validate_args`` runs
      only with ``--use-distributed-optimizer`` (core_v0.12.0 d580efc68a9f, core_v0.13.0
      c550cf6c41c3), so the assertion passes there too.
    * NeMo 2 and Megatron-Bridge: no such check. NeMo's ``MegatronMixedPrecision`` passes
      ``fp8_param_gather`` to the DDP config without one
      (nemo/lightning/pytorch/plugins/mixed_precision.py @
      8cfedd7203462cb251a914e700e5605444277561); Megatron-Bridge's ``ConfigContainer``
      checks it only with MXFP8 (``reuse_grad_buf_for_mxfp8_param_ag``) and under
      Megatron-FSDP v2 (src/megatron/bridge/training/config.py @
      067f987df03b8355b03192d88d70f1709fedf51a), and Megatron-Core's own configs assert
      nothing of it. The assertion lives in Megatron-LM's training script only.
    * The other frameworks: the planner knows no such rule of theirs.
    """
    return framework == "megatron"


def _fp8_param_gather(m: ModelSpec, num_gpus: int, x: Layout, fw: str) -> Flag:
    zero: Int = knob(x, "zero_stage")
    gather = _flag(x, "fp8_param_gather")
    if zero is None or not fp8_param_gather_rule(fw):
        return x.tensor_parallel < 0  # False, of the candidates' shape
    # Megatron-FSDP passes the assertion at every sharding strategy, no_shard (stage 0) included
    return gather & (zero == 0) & np.logical_not(_flag(x, "megatron_fsdp"))


PRECISION_AWARE_OPTIMIZER_SOURCE = (
    "NVIDIA/Megatron-LM megatron/core/optimizer/optimizer_config.py "
    "OptimizerConfig.__post_init__ at core_v0.14.0 (23e00ed0963c35382dfe8a5a94fb3cda4d21e133) "
    "and core_v0.16.1 (55ac7082517c3878ae653c07c09c534b8aed49f6): '--use-precision-aware-"
    "optimizer only supported with distributed optimizer', and without it main_params_dtype, "
    "exp_avg_dtype and exp_avg_sq_dtype 'can only be fp32'; at main "
    "(d98e8a64ddf34856e74b24714e3bedb2f5a39553) the first check moved to "
    "get_megatron_optimizer (megatron/core/optimizer/__init__.py), the second stayed"
)
"""Where Megatron-Core refuses the precision-aware optimizer without its distributed
optimizer, and non-fp32 optimizer dtypes without the precision-aware optimizer."""

BF16_MAIN_PARAMS_SOURCE = (
    "NVIDIA/Megatron-LM megatron/training/arguments.py: --main-params-dtype choices fp32, fp16 "
    "at core_v0.14.0, core_v0.16.1 and d98e8a64dd; Megatron-Core's precision-aware path hands a "
    "non-fp32 main_params_dtype to Transformer Engine FusedAdam as master_weight_dtype "
    "(megatron/core/optimizer/__init__.py @ d98e8a64dd), which raises 'FusedAdam only "
    "supports fp32/fp16 master weights' (NVIDIA/TransformerEngine "
    "transformer_engine/pytorch/optimizers/fused_adam.py @ v2.7, "
    "fedd9ddc739a4f28b2ee705df5577d20d33400ec, and @ v2.18)"
)
"""Where Megatron-Core's optimizer refuses a bf16 master (no master: the optimizer updating
the bf16 weights)."""


def optimizer_dtype_rule(framework: str) -> bool:
    """Whether ``framework`` builds its optimizer with Megatron-Core's ``OptimizerConfig`` and
    ``get_megatron_optimizer``, and so refuses (below ZeRO-3 and without Megatron-FSDP,
    ``parallelism.megatron_fsdp``, which keeps its own main-weight buffer,
    ``--megatron-fsdp-main-params-dtype`` with choices fp32, bf16, fp16, auto at
    d98e8a64dd, and runs on the distributed optimizer at every sharding strategy, ``no_shard``
    included: ``validate_args`` sets ``use_distributed_optimizer`` under
    ``--use-megatron-fsdp`` (Megatron-FSDP v1, megatron/training/arguments.py @ core_v0.18.0
    and d98e8a64dd), asserted it under ``--use-custom-fsdp`` (core_v0.12.0, core_v0.13.0), and
    between them its guide says it "must be used with a distributed optimizer"
    (docs/user-guide/features/custom_fsdp.md @ core_v0.16.1); Megatron-Bridge's
    ``ConfigContainer`` sets it, "use_distributed_optimizer=True is required for
    Megatron-FSDP" (src/megatron/bridge/training/config.py @ 067f987df03b)):

    * the precision-aware optimizer at ZeRO stage 0 (``PRECISION_AWARE_OPTIMIZER_SOURCE``): a
      stated ``main_params_dtype`` fp16, a moment dtype other than fp32, or
      ``store_param_remainders`` true (remainders exist only in Transformer Engine's
      ``FusedAdam`` under it) need ``--use-precision-aware-optimizer``, which needs the
      distributed optimizer (ZeRO stage 1-2 in the planner's terms);
    * ``main_params_dtype`` bf16 at ZeRO stages 0-2 (``BF16_MAIN_PARAMS_SOURCE``).

    True for ``megatron`` (Megatron-LM) and ``nemo``: NeMo 2's ``MegatronOptimizerModule``
    and Megatron-Bridge's ``OptimizerConfig`` (a subclass of Megatron-Core's, its
    ``__post_init__`` deferred to ``ConfigContainer.validate``,
    src/megatron/bridge/training/config.py @ 067f987df03b8355b03192d88d70f1709fedf51a) build
    the same optimizer. No other framework's optimizer reads these names."""
    return framework in MEGATRON_CORE


def _stated(x: Layout, name: str) -> str | None:
    value = knob(x, name)
    return None if value is None else str(value)


def needs_precision_aware_optimizer(x: Layout) -> bool:
    """Whether the optimizer dtypes ``x`` states need Megatron-Core's precision-aware optimizer
    (``optimizer_dtype_rule``): an fp16 master, a moment not in fp32, or fp32 remainders."""
    moments = (_stated(x, "exp_avg_dtype"), _stated(x, "exp_avg_sq_dtype"))
    return (
        _stated(x, "main_params_dtype") == "fp16"
        or any(m not in (None, "fp32") for m in moments)
        or knob(x, "store_param_remainders") is True
    )


def _precision_aware_optimizer(m: ModelSpec, num_gpus: int, x: Layout, fw: str) -> Flag:
    zero: Int = knob(x, "zero_stage")
    if zero is None or not optimizer_dtype_rule(fw) or not needs_precision_aware_optimizer(x):
        return x.tensor_parallel < 0  # False, of the candidates' shape
    return (zero == 0) & np.logical_not(_flag(x, "megatron_fsdp"))


def _bf16_main_params(m: ModelSpec, num_gpus: int, x: Layout, fw: str) -> Flag:
    zero: Int = knob(x, "zero_stage")
    if zero is None or not optimizer_dtype_rule(fw) or _stated(x, "main_params_dtype") != "bf16":
        return x.tensor_parallel < 0  # False, of the candidates' shape
    return (zero < 3) & np.logical_not(_flag(x, "megatron_fsdp"))


def _global_batch(x: Layout) -> Flag:
    return x.global_batch_size % (x.data_parallel * x.micro_batch_size) != 0


def interleaved_microbatch_rule(framework: str) -> str | None:
    """What the framework's interleaved 1F1B needs of the micro-batch count ``m`` (``p``
    pipeline ranks), as text, or None when it states nothing:

    * Megatron-LM / NeMo: Megatron-Core 0.16.1 ``forward_backward_pipelining_with_interleaving``
      runs micro-batches in groups of ``microbatch_group_size_per_vp_stage`` (default ``p``,
      ``ModelParallelConfig.__post_init__``), refuses a group size outside ``[p, m]`` and a last
      group smaller than ``p``: with the default, ``m`` must be a multiple of ``p``
      (Narayanan et al. SC'21 §2.2.2 states the same requirement; Megatron-LM before core 0.10
      raised "number of microbatches is not divisible by pipeline-model-parallel-size").
    * torchtitan: PyTorch's ``ScheduleInterleaved1F1B`` (torch 2.13
      ``distributed/pipelining/schedules.py``) runs ``max(1, m // p)`` rounds and refuses
      ``m`` not a multiple of the rounds (so ``m < p`` runs, in one round).
    """
    if framework in MEGATRON_CORE:
        return "a multiple of pipeline_parallel (Megatron-Core interleaved 1F1B)"
    if framework in TORCH_PIPELINING:
        return "a multiple of max(1, m // pipeline_parallel) rounds (torch ScheduleInterleaved1F1B)"
    return None


def _interleaved_microbatches(m: ModelSpec, num_gpus: int, x: Layout, fw: str) -> Flag:
    p, v = x.pipeline_parallel, x.virtual_pipeline
    micro = x.global_batch_size // (x.data_parallel * x.micro_batch_size)
    if fw in MEGATRON_CORE:
        return (v > 1) & (micro % p != 0)
    if fw in TORCH_PIPELINING:
        rounds = np.maximum(micro // p, 1)
        out: Flag = (v > 1) & (micro % rounds != 0)
        return out
    return (v > 1) & (p < 0)  # no rule: False, of the candidates' shape


_PARALLELISM_RULES: tuple[tuple[Violation, LayoutRule], ...] = (
    (Violation.SEQUENCE_PARALLEL_NEEDS_TENSOR_PARALLEL, _sequence_parallel_needs_tensor),
    (Violation.VIRTUAL_PIPELINE_NEEDS_PIPELINE_PARALLEL, _interleaving_needs_pipeline),
    (Violation.GLOBAL_BATCH_NOT_DIVISIBLE_BY_DP_MICRO_BATCH, _global_batch),
)
"""The rules that read only the layout, which ``ParallelismSpec`` checks on its own (before
any ``Scenario`` rule; the order in which it reports them is this one)."""


def _on_layout(rule: LayoutRule) -> ScenarioRule:
    return lambda m, num_gpus, x, fw: rule(x)


_MODEL_RULES: dict[Violation, ScenarioRule] = {
    Violation.GPUS_NOT_DIVISIBLE_BY_TP_PP_CP: _tiles,
    Violation.TENSOR_PARALLEL_DOES_NOT_DIVIDE_MODEL: _tensor_divides_model,
    Violation.LAYERS_NOT_DIVISIBLE_BY_PP_VP: _layers,
    Violation.CONTEXT_PARALLEL_DOES_NOT_DIVIDE_SEQUENCE: _context_divides_sequence,
    Violation.SEQUENCE_NOT_DIVISIBLE_BY_TENSOR_PARALLEL: _sequence_divides_by_tensor,
    Violation.MOE_TENSOR_PARALLEL_NEEDS_SEQUENCE_PARALLEL: _moe_sequence_parallel,
    Violation.ASYNC_TENSOR_PARALLEL_NEEDS_SEQUENCE_PARALLEL: _async_tensor_parallel_sequence,
    Violation.MOE_ASYNC_TENSOR_PARALLEL_NOT_SUPPORTED_BY_FRAMEWORK: _moe_async_tensor_parallel,
    Violation.MOE_SEQUENCE_PARALLEL_NOT_SUPPORTED_BY_FRAMEWORK: _moe_sequence_parallel_refused,
    Violation.EXPERT_PARALLEL_INVALID: _expert_parallel,
    Violation.EXPERTS_NOT_SPLIT_BY_FRAMEWORK: _experts_whole,
    Violation.BIASED_EXPERTS_NEED_EXPERT_TENSOR_PARALLEL_1: _expert_bias,
    Violation.FP8_PARAM_GATHER_NEEDS_SHARDED_OPTIMIZER: _fp8_param_gather,
    Violation.PRECISION_AWARE_OPTIMIZER_NEEDS_DISTRIBUTED_OPTIMIZER: _precision_aware_optimizer,
    Violation.BF16_MAIN_PARAMS_NOT_SUPPORTED_BY_FRAMEWORK: _bf16_main_params,
    Violation.MICROBATCHES_INVALID_FOR_INTERLEAVED_SCHEDULE: _interleaved_microbatches,
}
_RULES: tuple[tuple[Violation, ScenarioRule], ...] = tuple(
    (v, _MODEL_RULES.get(v) or _on_layout(dict(_PARALLELISM_RULES)[v])) for v in _ORDER
)
"""Every rule, in ``Violation`` order."""


def layout_violations(
    model: ModelSpec, num_gpus: int, layout: Layout, *, framework: str = DEFAULT_FRAMEWORK
) -> IntArray:
    """The first broken rule of each candidate: ``Violation.code``, or ``-1`` when valid.

    ``layout`` holds ``n`` candidates of ``model`` on ``num_gpus`` GPUs as int64 (and bool, for
    ``sequence_parallel`` and the ``account_for`` options) arrays of shape ``(n,)``; the result
    has shape ``(n,)``. ``framework``: the ``Framework`` value the candidates run under.
    """
    n = int(np.shape(layout.tensor_parallel)[0])
    code = np.full(n, -1, dtype=np.int64)
    for violation, rule in _RULES:
        code[(code < 0) & rule(model, num_gpus, layout, framework)] = violation.code
    return code


def first_violation(
    model: ModelSpec, num_gpus: int, layout: Layout, *, framework: str = DEFAULT_FRAMEWORK
) -> Violation | None:
    """The first rule one candidate (``ParallelismSpec``, Python numbers) breaks, or None."""
    for violation, rule in _RULES:
        if rule(model, num_gpus, layout, framework):
            return violation
    return None


def parallelism_violation(layout: Layout) -> Violation | None:
    """The first layout-only rule (no model, no GPU count) one candidate breaks, or None."""
    for violation, rule in _PARALLELISM_RULES:
        if rule(layout):
            return violation
    return None


# ---- one message per violation ---------------------------------------------------------------


def _tiles_message(n: int, x: Layout) -> SpecError:
    tp, pp, cp, dp = (
        int(x.tensor_parallel),
        int(x.pipeline_parallel),
        int(x.context_parallel),
        int(x.data_parallel),
    )
    hint = (
        f"set data_parallel to {n // (tp * pp * cp)} or leave it out"
        if n % (tp * pp * cp) == 0
        else f"num_gpus must be a multiple of tensor·pipeline·context = {tp * pp * cp}"
    )
    return SpecError(
        "parallelism.data_parallel",
        f"tensor·pipeline·context·data = {tp}·{pp}·{cp}·{dp} = {tp * pp * cp * dp} ≠ "
        f"hardware.num_gpus = {n}; {hint}",
    )


def _tensor_message(m: ModelSpec, x: Layout) -> SpecError:
    tp = int(x.tensor_parallel)
    if m.num_attention_heads % tp:
        return SpecError(
            "parallelism.tensor_parallel",
            f"{tp} does not divide model.num_attention_heads={m.num_attention_heads}; "
            f"use one of {divisors(m.num_attention_heads)}",
        )
    if m.num_query_groups % tp:
        return SpecError(
            "model.num_query_groups",
            f"{m.num_query_groups} KV groups cannot be split over tensor_parallel={tp}; "
            f"use tensor_parallel among {divisors(m.num_query_groups)}",
        )
    return SpecError(
        "parallelism.tensor_parallel",
        f"{tp} does not divide the MLP width (ffn_hidden_size={m.ffn_hidden_size}"
        + (f", moe_ffn_hidden_size={m.moe_ffn_hidden_size}" if m.is_moe else "")
        + ")",
    )


def _layers_message(m: ModelSpec, x: Layout, fw: str) -> SpecError:
    try:
        stage_layers_of(m, x, fw)
    except SpecError as err:
        return err
    return split_error(  # not reached for a refused split; kept total for any caller
        m.num_layers,
        int(x.pipeline_parallel),
        int(x.virtual_pipeline),
        fw,
        embedding=bool(_flag(x, "account_for_embedding_in_pipeline_split")),
        loss=bool(_flag(x, "account_for_loss_in_pipeline_split")),
    )


def _context_message(m: ModelSpec, x: Layout) -> SpecError:
    return SpecError(
        "parallelism.context_parallel",
        f"model.seq_length={m.seq_length} must be divisible by 2·context_parallel = "
        f"{2 * int(x.context_parallel)} (load-balanced causal context parallelism)",
    )


def _sequence_message(m: ModelSpec, x: Layout) -> SpecError:
    return SpecError(
        "parallelism.sequence_parallel",
        f"the local sequence {m.seq_length // int(x.context_parallel)} is not divisible by "
        f"tensor_parallel={int(x.tensor_parallel)}; change seq_length or set sequence_parallel to "
        "false",
    )


def _moe_sequence_parallel_message(m: ModelSpec, x: Layout, fw: str) -> SpecError:
    return SpecError(
        "parallelism.sequence_parallel",
        f"an MoE model (model.num_experts={m.num_experts}) with tensor_parallel="
        f"{int(x.tensor_parallel)} must use sequence parallelism under {fw}: Megatron-Core's "
        "MoELayer refuses to train without it (megatron/core/transformer/moe/moe_layer.py, "
        "MoELayer.forward); set sequence_parallel to true (or leave it out: it defaults to true "
        "with tensor parallelism), or set tensor_parallel to 1",
    )


def _moe_sequence_parallel_refused_message(m: ModelSpec, x: Layout, fw: str) -> SpecError:
    return SpecError(
        "parallelism.sequence_parallel",
        f"an MoE model (model.num_experts={m.num_experts}) with tensor_parallel="
        f"{int(x.tensor_parallel)} runs without sequence parallelism under {fw}: its MoE "
        "tensor-parallel plan keeps the attention and router activations replicated and "
        "raises for sequence_parallel=True (NVIDIA-NeMo/Automodel "
        "nemo_automodel/components/moe/parallelizer.py, _resolve_moe_tp_plan); set "
        "sequence_parallel to false, or tensor_parallel to 1",
    )


def _async_tensor_parallel_sequence_message(m: ModelSpec, x: Layout, fw: str) -> SpecError:
    tp = int(x.tensor_parallel)
    if tp_comm_overlap_sequence_rule(fw) and tp == 1:
        return SpecError(
            "parallelism.tp_comm_overlap",
            f"tp_comm_overlap (--tp-comm-overlap) with tensor_parallel=1 is refused under {fw}: "
            "its validate_args turns sequence parallelism off at tensor parallelism 1 and then "
            "asserts it for the overlap (NVIDIA/Megatron-LM megatron/training/arguments.py: "
            "'Tensor parallel communication/GEMM overlap can happen only when sequence "
            "parallelism is enabled'); set tp_comm_overlap to false, or tensor_parallel above 1 "
            "with sequence_parallel",
        )
    if tp_comm_overlap_sequence_rule(fw):
        return SpecError(
            "parallelism.sequence_parallel",
            f"tp_comm_overlap (--tp-comm-overlap) with tensor_parallel={tp} needs sequence "
            f"parallelism under {fw}: the overlap splits the sequence-parallel all-gathers and "
            "reduce-scatters, and validate_args asserts it (NVIDIA/Megatron-LM "
            "megatron/training/arguments.py: 'Tensor parallel communication/GEMM overlap can "
            "happen only when sequence parallelism is enabled'); set sequence_parallel to "
            "true, or tp_comm_overlap to false",
        )
    return SpecError(
        "parallelism.sequence_parallel",
        f"tp_comm_overlap (async tensor parallelism) with tensor_parallel="
        f"{int(x.tensor_parallel)} needs sequence parallelism under {fw}: without it the "
        "row-parallel layers all-reduce and there is no reduce-scatter to overlap, and its "
        "parallelizer raises (NVIDIA-NeMo/Automodel "
        "nemo_automodel/components/distributed/parallelizer.py: "
        "'enable_async_tensor_parallel=True requires sequence_parallel=True'); set "
        "sequence_parallel to true, or tp_comm_overlap to false",
    )


def _moe_async_tensor_parallel_message(m: ModelSpec, x: Layout, fw: str) -> SpecError:
    return SpecError(
        "parallelism.tp_comm_overlap",
        f"an MoE model (model.num_experts={m.num_experts}) with tensor_parallel="
        f"{int(x.tensor_parallel)} runs without async tensor parallelism under {fw}: its MoE "
        "tensor-parallel path keeps the attention and router activations replicated, has no "
        "sequence parallelism for it to overlap and raises (NVIDIA-NeMo/Automodel "
        "nemo_automodel/components/moe/parallelizer.py: 'enable_async_tensor_parallel=True is "
        "not supported by the custom MoE TP path'); set tp_comm_overlap to false, or "
        "tensor_parallel to 1",
    )


def _expert_message(m: ModelSpec, x: Layout, fw: str) -> SpecError:
    ep = int(x.expert_parallel)
    if not m.is_moe:
        return SpecError(
            "parallelism.expert_parallel", "needs an MoE model (model.num_experts > 0); set it to 1"
        )
    if m.num_experts % ep:
        return SpecError(
            "parallelism.expert_parallel",
            f"{ep} does not divide model.num_experts={m.num_experts}; "
            f"use one of {divisors(m.num_experts)}",
        )
    etp = int(expert_tensor_parallel_of(m, 0, x, fw))
    if m.moe_ffn_hidden_size % etp:
        return SpecError(
            "parallelism.expert_tensor_parallel",
            f"{etp} does not divide model.moe_ffn_hidden_size={m.moe_ffn_hidden_size}; use one "
            f"of {divisors(m.moe_ffn_hidden_size)}",
        )
    ranks = int(x.tensor_parallel) * int(x.context_parallel) * int(x.data_parallel)
    return SpecError(
        "parallelism.expert_parallel",
        f"the expert groups fold into the {ranks} tensor·context·data ranks of a pipeline stage "
        f"(Megatron-Core parallel_state: expert_tensor_parallel·expert_parallel must divide "
        f"them); expert_tensor_parallel·expert_parallel = {etp}·{ep} = {etp * ep} does not: use "
        f"expert_parallel among {divisors(ranks // etp if ranks % etp == 0 else 1)} or a smaller "
        "expert_tensor_parallel",
    )


def _experts_whole_message(m: ModelSpec, x: Layout, fw: str) -> SpecError:
    etp = int(expert_tensor_parallel_of(m, 0, x, fw))
    return SpecError(
        "parallelism.expert_tensor_parallel",
        f"{fw} keeps every routed expert whole on its expert-parallel ranks (its MoE "
        "tensor-parallel plan may not target the experts: NVIDIA-NeMo/Automodel "
        "nemo_automodel/components/moe/parallelizer.py, _resolve_moe_tp_plan); "
        f"expert_tensor_parallel={etp} splits them: set it to 1 or leave it out",
    )


def _expert_bias_message(m: ModelSpec, x: Layout, fw: str) -> SpecError:
    etp, tp = int(expert_tensor_parallel_of(m, 0, x, fw)), int(x.tensor_parallel)
    stated = knob(x, "expert_tensor_parallel") is not None
    if stated:
        what = f"expert_tensor_parallel={etp}"
    elif etp == tp:
        what = (
            f"expert_tensor_parallel is unset, so the experts split over tensor_parallel={tp} "
            "ranks (Megatron-Core's default)"
        )
    else:
        what = (
            f"expert_tensor_parallel is unset and resolves to {etp} (the largest divisor of "
            f"tensor_parallel={tp} whose expert groups fold into a pipeline stage)"
        )
    fix = (
        "set expert_tensor_parallel to 1 (split the experts with expert_parallel instead)"
        if stated
        else "set parallelism.expert_tensor_parallel to 1 (tensor_parallel then splits only the "
        "layers outside the experts; expert_parallel splits the experts), or tensor_parallel to 1"
    )
    return SpecError(
        "parallelism.expert_tensor_parallel" if stated else "parallelism.tensor_parallel",
        f"the routed experts carry biases (model.moe_expert_bias) and {what}: Megatron-Core "
        f"refuses biased experts with expert tensor parallelism above 1 under {fw} "
        "(megatron/core/transformer/transformer_config.py, TransformerConfig.__post_init__: "
        f"'Bias in Moe is only supported when ETP==1'); {fix}",
    )


def _fp8_param_gather_message(m: ModelSpec, x: Layout, fw: str) -> SpecError:
    return SpecError(
        "parallelism.zero_stage",
        f"fp8_param_gather keeps the weights in FP8 and {fw} runs it only with a sharded "
        "optimizer or FSDP (megatron/training/arguments.py: '--fp8-param-gather only supported "
        "with distributed optimizer, torch fsdp2, megatron fsdp, or inference mode'); "
        "zero_stage=0 without megatron_fsdp has none: set zero_stage to 1 "
        "(--use-distributed-optimizer) or 3 (FSDP), megatron_fsdp to true (--use-megatron-fsdp "
        "--data-parallel-sharding-strategy no_shard), or fp8_param_gather to false",
    )


def _precision_aware_optimizer_message(m: ModelSpec, x: Layout, fw: str) -> SpecError:
    names = ("main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype", "store_param_remainders")
    stated = ", ".join(f"{n} {knob(x, n)}" for n in names if knob(x, n) is not None)
    return SpecError(
        "parallelism.zero_stage",
        f"the optimizer dtypes stated ({stated}) need Megatron-Core's precision-aware optimizer "
        f"(--use-precision-aware-optimizer), which {fw} runs only with the distributed "
        "optimizer (megatron/core/optimizer: '--use-precision-aware-optimizer only supported "
        "with distributed optimizer'); zero_stage=0 has none: set zero_stage to 1 "
        "(--use-distributed-optimizer), megatron_fsdp to true (Megatron-FSDP runs on the "
        "distributed optimizer), or main_params_dtype, exp_avg_dtype and "
        "exp_avg_sq_dtype to fp32 and store_param_remainders to false (or leave them out)",
    )


def _bf16_main_params_message(m: ModelSpec, x: Layout, fw: str) -> SpecError:
    return SpecError(
        "parallelism.main_params_dtype",
        f"bf16 (no master: the optimizer updates the bf16 weights) is not an option of {fw}'s "
        "Megatron-Core optimizer, which keeps an fp32 or fp16 master (Megatron-LM "
        "--main-params-dtype {fp32, fp16}; Transformer Engine FusedAdam: 'FusedAdam only "
        f"supports fp32/fp16 master weights'); zero_stage={knob(x, 'zero_stage')}: set "
        "main_params_dtype to fp32 or fp16, or megatron_fsdp to true (Megatron-FSDP, whose "
        "main-weight buffer takes --megatron-fsdp-main-params-dtype) or zero_stage to 3",
    )


def _microbatches_message(m: ModelSpec, x: Layout, fw: str) -> SpecError:
    micro = int(x.global_batch_size) // (int(x.data_parallel) * int(x.micro_batch_size))
    p = int(x.pipeline_parallel)
    return SpecError(
        "parallelism.virtual_pipeline",
        f"the interleaved schedule ({fw}) needs the number of micro-batches (global_batch_size / "
        f"(data_parallel·micro_batch_size) = {micro}) to be {interleaved_microbatch_rule(fw)}; "
        f"pipeline_parallel = {p}: change the global or micro-batch size, or set "
        "virtual_pipeline to 1",
    )


def _interleaving_message(x: Layout) -> SpecError:
    return SpecError(
        "parallelism.virtual_pipeline",
        "interleaving needs pipeline_parallel > 1; set virtual_pipeline to 1",
    )


def _sequence_parallel_message(x: Layout) -> SpecError:
    return SpecError(
        "parallelism.sequence_parallel",
        "needs tensor_parallel > 1 (it shards along the tensor-parallel group); set it to false",
    )


def _global_batch_message(x: Layout) -> SpecError:
    per_step = int(x.data_parallel) * int(x.micro_batch_size)
    gbs = int(x.global_batch_size)
    return SpecError(
        "parallelism.global_batch_size",
        f"{gbs} is not divisible by data_parallel·micro_batch_size = "
        f"{int(x.data_parallel)}·{int(x.micro_batch_size)} = {per_step}; use a multiple of "
        f"{per_step} (e.g. {max(per_step, gbs // per_step * per_step)})",
    )


_LAYOUT_MESSAGES: dict[Violation, Callable[[Layout], SpecError]] = {
    Violation.VIRTUAL_PIPELINE_NEEDS_PIPELINE_PARALLEL: _interleaving_message,
    Violation.SEQUENCE_PARALLEL_NEEDS_TENSOR_PARALLEL: _sequence_parallel_message,
    Violation.GLOBAL_BATCH_NOT_DIVISIBLE_BY_DP_MICRO_BATCH: _global_batch_message,
}
_MODEL_MESSAGES: dict[Violation, Callable[[ModelSpec, Layout], SpecError]] = {
    Violation.TENSOR_PARALLEL_DOES_NOT_DIVIDE_MODEL: _tensor_message,
    Violation.CONTEXT_PARALLEL_DOES_NOT_DIVIDE_SEQUENCE: _context_message,
    Violation.SEQUENCE_NOT_DIVISIBLE_BY_TENSOR_PARALLEL: _sequence_message,
}
_FRAMEWORK_MESSAGES: dict[Violation, Callable[[ModelSpec, Layout, str], SpecError]] = {
    Violation.LAYERS_NOT_DIVISIBLE_BY_PP_VP: _layers_message,
    Violation.MOE_TENSOR_PARALLEL_NEEDS_SEQUENCE_PARALLEL: _moe_sequence_parallel_message,
    Violation.ASYNC_TENSOR_PARALLEL_NEEDS_SEQUENCE_PARALLEL: (
        _async_tensor_parallel_sequence_message
    ),
    Violation.MOE_ASYNC_TENSOR_PARALLEL_NOT_SUPPORTED_BY_FRAMEWORK: (
        _moe_async_tensor_parallel_message
    ),
    Violation.MOE_SEQUENCE_PARALLEL_NOT_SUPPORTED_BY_FRAMEWORK: (
        _moe_sequence_parallel_refused_message
    ),
    Violation.EXPERT_PARALLEL_INVALID: _expert_message,
    Violation.EXPERTS_NOT_SPLIT_BY_FRAMEWORK: _experts_whole_message,
    Violation.BIASED_EXPERTS_NEED_EXPERT_TENSOR_PARALLEL_1: _expert_bias_message,
    Violation.FP8_PARAM_GATHER_NEEDS_SHARDED_OPTIMIZER: _fp8_param_gather_message,
    Violation.PRECISION_AWARE_OPTIMIZER_NEEDS_DISTRIBUTED_OPTIMIZER: (
        _precision_aware_optimizer_message
    ),
    Violation.BF16_MAIN_PARAMS_NOT_SUPPORTED_BY_FRAMEWORK: _bf16_main_params_message,
    Violation.MICROBATCHES_INVALID_FOR_INTERLEAVED_SCHEDULE: _microbatches_message,
}


def violation_error(
    violation: Violation,
    layout: Layout,
    *,
    model: ModelSpec | None = None,
    num_gpus: int | None = None,
    framework: str = DEFAULT_FRAMEWORK,
) -> SpecError:
    """The ``SpecError`` for one candidate breaking ``violation``: the field to fix, what is
    wrong and how to fix it (naming the framework rule where it is one). ``model`` (and
    ``num_gpus``, for the GPU-count rule) are needed for the rules that read them;
    ``ValueError`` when one is missing."""
    if violation in _LAYOUT_MESSAGES:
        return _LAYOUT_MESSAGES[violation](layout)
    if violation is Violation.GPUS_NOT_DIVISIBLE_BY_TP_PP_CP:
        if num_gpus is None:
            raise ValueError(f"{violation} needs the GPU count")
        return _tiles_message(num_gpus, layout)
    if model is None:
        raise ValueError(f"{violation} needs the model")
    if violation in _FRAMEWORK_MESSAGES:
        return _FRAMEWORK_MESSAGES[violation](model, layout, framework)
    return _MODEL_MESSAGES[violation](model, layout)
