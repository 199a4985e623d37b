"""How a training job is split over its GPUs (Megatron-LM terms), as a frozen value object."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from planner.errors import SpecError
from planner.specs._checks import require_bool, require_int
from planner.specs.feasibility import parallelism_violation, violation_error
from planner.specs.hardware import Precision
from planner.specs.pipeline_split import virtual_stages


class Recompute(StrEnum):
    """Activation recomputation (Megatron ``--recompute-granularity``; Korthikanti et al. 2022).

    The one recompute vocabulary: the name is the scenario-format value; ``code`` (0 none,
    1 selective, 2 full, in declaration order, growing with the work recomputed) is the integer
    the vectorised engine and the design-space sweeps carry in their arrays.
    """

    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"

    @property
    def code(self) -> int:
        """Array code of this mode: 0 none, 1 selective, 2 full."""
        return _RECOMPUTE_ORDER.index(self)

    @classmethod
    def from_code(cls, code: int) -> Recompute:
        """The mode of an array code (``ValueError`` outside 0..2)."""
        if not 0 <= code < len(_RECOMPUTE_ORDER):
            raise ValueError(f"recompute code must be 0, 1 or 2, got {code}")
        return _RECOMPUTE_ORDER[code]


_RECOMPUTE_ORDER: tuple[Recompute, ...] = tuple(Recompute)


class RecomputeModule(StrEnum):
    """What selective recompute repeats (Megatron-Core ``--recompute-modules``, with
    ``--recompute-granularity selective``; default ``core_attn``): the attention core, the
    MoE activation function, the layer norms, MLA's up projections, the dense MLP, the whole
    MoE layer (its token exchange included) or the shared experts."""

    CORE_ATTN = "core_attn"
    MOE_ACT = "moe_act"
    LAYERNORM = "layernorm"
    MLA_UP_PROJ = "mla_up_proj"
    MLP = "mlp"
    MOE = "moe"
    SHARED_EXPERTS = "shared_experts"


class Fp8Recipe(StrEnum):
    """Low-precision recipe (Megatron ``--fp8-recipe`` / ``--fp4-recipe``; Transformer Engine
    recipes, ``planner.perf.precision``); ``code`` (1..5) is the engine's array code, 0 there
    meaning 16-bit training."""

    DELAYED = "delayed"
    TENSORWISE = "tensorwise"
    BLOCKWISE = "blockwise"
    MXFP8 = "mxfp8"
    NVFP4 = "nvfp4"

    @property
    def code(self) -> int:
        """Array code: 1 delayed ... 5 nvfp4 (0 is 16-bit training)."""
        return tuple(Fp8Recipe).index(self) + 1


class OptimizerDtype(StrEnum):
    """Storage dtype of one optimizer state (Megatron-LM ``--exp-avg-dtype``,
    ``--exp-avg-sq-dtype``; Transformer Engine ``FusedAdam``'s ``exp_avg_dtype`` /
    ``exp_avg_sq_dtype``, where ``torch.uint8`` stands for FP8); ``bytes`` per element: 4, 2,
    2, 1."""

    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"

    @property
    def bytes(self) -> float:
        """Bytes per element."""
        return {"fp32": 4.0, "fp8": 1.0}.get(self.value, 2.0)


class MainParamsDtype(StrEnum):
    """Dtype of the parameters the optimizer updates (``parallelism.main_params_dtype``,
    ``ParallelismSpec`` docstring): ``fp32`` / ``fp16`` a master copy of that dtype beside the
    16-bit weights, ``bf16`` no master (the bf16 weights themselves); ``bytes`` of the master
    per parameter: 4, 2, 0 (``bf16``'s weights are counted as weights)."""

    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"

    @property
    def bytes(self) -> float:
        """Bytes per parameter of the master."""
        return 0.0 if self is MainParamsDtype.BF16 else OptimizerDtype(self.value).bytes


class OptimizerImplementation(StrEnum):
    """How PyTorch's ``torch.optim.Adam`` / ``AdamW`` runs its step
    (``parallelism.optimizer_implementation``; pytorch/pytorch ``torch/optim/adam.py``, torch
    2.13): ``foreach`` (``foreach=True``, ``_multi_tensor_adam``: horizontal ``torch._foreach_*``
    kernels over every parameter, allocating ``sqrt(exp_avg_sq)`` for all owned parameters at
    once), ``fused`` (``fused=True``, ``_fused_adam``: one ``torch._fused_adam_`` kernel per
    chunk of tensors, updating parameters and moments in place) or ``for_loop`` (both false,
    ``_single_tensor_adam``: one parameter at a time, its ``denom`` a temporary of that one
    parameter's size, freed before the next). torchtitan's ``optimizer.implementation`` names
    them ``foreach``, ``fused``, ``for-loop``."""

    FOREACH = "foreach"
    FUSED = "fused"
    FOR_LOOP = "for_loop"


RECIPES_OF_PRECISION: dict[Precision, tuple[Fp8Recipe, ...]] = {
    Precision.FP8: (Fp8Recipe.DELAYED, Fp8Recipe.TENSORWISE, Fp8Recipe.BLOCKWISE, Fp8Recipe.MXFP8),
    Precision.MXFP8: (Fp8Recipe.MXFP8,),
    Precision.NVFP4: (Fp8Recipe.NVFP4,),
}
"""The recipes each low precision runs with; the first is its default (Megatron-LM's
``--fp8-recipe`` default ``delayed``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelismSpec:
    """Tensor/pipeline/context/expert/data parallel degrees, batch split and memory knobs.

    ``virtual_pipeline`` is the number of interleaved 1F1B model chunks per pipeline rank.
    ``global_batch_size`` and ``micro_batch_size`` count sequences. ``fp8_recipe`` (Megatron
    ``--fp8-recipe``): how FP8/MXFP8/NVFP4 GEMMs are scaled (``Fp8Recipe``; default: the
    precision's, ``RECIPES_OF_PRECISION``). ``zero_stage``: 0 plain data
    parallel, 1 distributed optimizer (Megatron ``--use-distributed-optimizer``), 2 also shards
    gradients, 3 also shards weights (FSDP). ``flash_attention`` (extra field, default true as in
    Megatron-Core) means the ``s x s`` attention scores are never stored.
    ``grad_reduce_in_fp32`` (extra field; Megatron-Core ``DistributedDataParallelConfig``,
    ``--accumulate-allreduce-grads-in-fp32``): gradients are accumulated and reduced across
    data-parallel ranks in fp32 (4 bytes per parameter) rather than 16-bit; None (the default)
    takes the framework's default for the precision (``planner.perf.frameworks``).
    ``overlap_grad_reduce`` / ``overlap_param_gather`` (extra fields; Megatron-LM
    ``--overlap-grad-reduce`` / ``--overlap-param-gather``): the data-parallel gradient
    reduction runs in buckets under the last microbatch's backward / the parameter all-gather
    (ZeRO >= 1) under the first microbatch's forward; false: after the backward / before the
    forward, fully exposed; None (the default): overlapped, as current recipes of every
    framework run (FSDP/ZeRO-3 always overlap).
    ``tp_comm_overlap`` (extra field; Megatron-LM ``--tp-comm-overlap``, off by default there):
    the tensor-parallel all-gathers and reduce-scatters are split into chunks that overlap
    the GEMMs consuming and producing them (Transformer Engine userbuffers; torchtitan's async
    TP, ``parallelism.enable_async_tensor_parallel``, does the same with torch.compile's
    micro-pipelined all-gather/reduce-scatter matmuls; Hopper and later,
    ``planner.perf.tensor``); false: only ``tp_overlap_fraction`` hides; None (the default):
    the framework's recipes' choice (``FrameworkProfile.tp_comm_overlap``).
    ``recompute_early_stop`` (extra field): under full recompute the checkpointed layer's
    recomputation stops once the tensors its backward needs are rebuilt, so the layer's last
    GEMM (the MLP down projection) is not re-run (non-reentrant ``torch.utils.checkpoint`` of
    PyTorch 2.1 and later); false: the whole forward again; None (the default): the
    framework's (``FrameworkProfile.recompute_early_stop``).
    ``separate_qkv_projections`` / ``separate_gate_up_projections`` (extra fields): the
    attention's query, key and value projections are three linears (a gated MLP's gate and up
    projections two), each its own GEMM of the same input, not one fused GEMM (torchtitan's
    ``wq`` / ``wk`` / ``wv`` before pytorch/torchtitan@3396a4b37, its ``w1`` / ``w3``); which
    matmuls torchtitan's op-level selective recompute re-runs follows from them
    (``planner.perf.operators``, ``planner.perf.memory``); None (the default): the
    framework's (``FrameworkProfile.separate_qkv_projections`` /
    ``separate_gate_up_projections``).
    ``fp8_tp_all_gather`` (extra field): under a tensorwise FP8 recipe the sequence-parallel
    all-gathers of the tensor-parallel layers move FP8, one byte per element (torchao's float8
    tensor-parallel styles, which torchtitan applied before pytorch/torchtitan@1786292db;
    ``planner.perf.tensor``); None (the default): the framework's
    (``FrameworkProfile.fp8_tp_all_gather``).
    ``fp8_param_gather`` (extra field; Megatron-LM ``--fp8-param-gather``, Megatron-Bridge's
    ``MixedPrecisionConfig.fp8_param_gather``): under a low-precision recipe the model's
    transformer weights are kept in its quantised format (Transformer Engine
    ``fp8_model_init``), the optimizer keeping the higher-precision master; the quantised weight
    replaces the 16-bit weight and the copy TE would otherwise cache
    (``planner.perf.memory``), and the data-parallel parameter gathers move one byte per weight
    (``planner.perf.data``). Needs precision ``fp8`` or ``mxfp8``.
    ``main_params_dtype``, ``exp_avg_dtype``, ``exp_avg_sq_dtype``, ``store_param_remainders``
    (extra fields, ``MainParamsDtype``, ``OptimizerDtype``; Megatron-LM's precision-aware
    optimizer names, ``--use-precision-aware-optimizer`` with ``--main-params-dtype`` {fp32,
    fp16}, ``--exp-avg-dtype`` / ``--exp-avg-sq-dtype`` {fp32, fp16, bf16, fp8}, all fp32 by
    default, NVIDIA/Megatron-LM ``megatron/training/arguments.py``: the flags since
    ``core_v0.11.0`` (moments then fp32, fp16 or fp8), bf16 moments since ``core_v0.13.0``, the
    same at ``d98e8a64dd``; Megatron-Core ``OptimizerConfig.store_param_remainders``, default
    True since ``core_v0.13.0``): what Adam keeps per owned parameter. ``main_params_dtype`` is
    the dtype of the parameters the optimizer updates: ``fp32`` a 4-byte fp32 master beside the
    16-bit model weights (Megatron's distributed optimizer; under PyTorch FSDP the fp32 sharded
    parameter itself, cast to 16 bits for the compute); ``fp16`` a 2-byte fp16 master beside the
    16-bit weights (Megatron-LM ``--main-params-dtype fp16``: Transformer Engine ``FusedAdam``
    keeps it, ``master_weight_dtype``); ``bf16`` no separate master: the optimizer updates the
    bf16 model weights themselves, as pure-bf16 stacks do (a bf16 model under
    ``torch.optim.AdamW``: LLaMA-Factory ``pure_bf16``, torchtune ``dtype: bf16``; Megatron-LM
    has no bf16 master, so the name is free for this). The moments take 4, 2, 2 or 1 byte each
    (FP8: TE ``FusedAdam`` stores ``torch.uint8`` with a per-tensor scale).
    ``store_param_remainders`` (``fp32`` only, bf16 weights): the optimizer keeps only the 16
    low bits of the fp32 master, the bf16 weight holding the high 16 (2 bytes; TE ``FusedAdam``
    ``store_param_remainders``, which it applies only to an fp32 master of bf16 parameters and
    then allocates it as ``torch.int16``,
    ``transformer_engine/pytorch/optimizers/fused_adam.py`` ``_initialize_state`` @ ``v2.7``);
    not under ZeRO-3, whose shards keep the whole fp32 master. Each absent field takes the
    framework profile's value (``planner.perf.frameworks``: master and ``adam_moment_bytes / 2``
    per moment; ``store_param_remainders`` the profile's, true for NeMo's distributed Adam), so
    a scenario without them predicts as before. The gradients follow ``grad_reduce_in_fp32`` (a
    pure-bf16 stack's are bf16: false).
    ``optimizer_implementation`` (extra field, ``OptimizerImplementation``: ``foreach``,
    ``fused``, ``for_loop``): how PyTorch's Adam runs its step; only ``foreach`` allocates a
    list of temporaries over every owned parameter (one second moment's bytes each), which the
    memory model counts at the optimizer step (``planner.perf.memory``). It sits with the
    optimizer's dtypes as the other setting of what the optimizer holds. Absent: the framework
    profile's (``FrameworkProfile.adam_foreach``: foreach for NeMo Automodel at
    ``tensor_parallel`` 1; no list for the others, torchtitan's fused default included), so a
    scenario without it predicts as its framework steps by default. Stated, it holds at every
    ``tensor_parallel`` (Automodel passes a ``foreach`` the config gives through,
    ``OptimizerFromFactoryConfig.build``, NVIDIA-NeMo/Automodel
    ``nemo_automodel/components/optim/optimizer.py`` @ ``36044ad3d1``).

    ``megatron_fsdp`` (extra field; Megatron-LM ``--use-megatron-fsdp``, Megatron-Bridge
    ``ddp.use_megatron_fsdp``): ``zero_stage`` is what Megatron-FSDP's
    ``data_parallel_sharding_strategy`` shards (``no_shard`` 0 ... ``optim_grads_params`` 3,
    ``planner.scenario.megatron_table.MEGATRON_FSDP_STAGES``); the timing and memory models
    read only ``zero_stage``, the layout rules this too (``fp8_param_gather_rule``).
    ``activation_offload_layers`` (extra field; Megatron-Core ``cpu_offloading`` with
    ``cpu_offloading_num_layers`` and ``cpu_offloading_activations``, activations only): the
    first ``N`` transformer layers' saved activations are copied to host memory during the
    forward and back for the backward (``planner.perf.memory``). Megatron-Core refuses it with
    pipeline parallelism or with activation recompute, and with ``N`` not below the model's
    layers (``TransformerConfig.__post_init__``; the last check is the scenario's).

    ``pipeline_batch_size`` (extra field): the samples per data-parallel rank that one run of
    the pipeline schedule takes, its fill and drain included. None (the default): the whole
    iteration's ``global_batch_size / data_parallel`` (Megatron-LM calls its schedule once
    per iteration with every microbatch: ``train_step``'s ``forward_backward_func(...,
    num_microbatches=get_num_microbatches())``, ``megatron/training/training.py`` @
    ``86df799dc4``). NeMo Automodel runs one schedule per
    gradient-accumulation step, each over ``step_scheduler.local_batch_size`` samples in
    microbatches of ``pp_microbatch_size`` (NVIDIA-NeMo/Automodel
    ``nemo_automodel/recipes/llm/train_ft.py``: ``_run_train_optim_step`` calls
    ``_forward_backward_step`` per local batch, each a ``pp.info.schedule.step``; from
    pipeline parallelism's introduction @ ``a1e232161`` through ``36044ad3d1``): there it is
    ``local_batch_size`` and the iteration pays ``global_batch_size / (data_parallel ·
    local_batch_size)`` fills and drains. torchtitan does the same with its
    ``training.local_batch_size`` (``torchtitan/train.py`` @ ``238fa9953``: ``train_step``
    calls ``forward_backward_step``, one ``pp_schedule.step``, per accumulated microbatch).
    Must be a multiple of ``micro_batch_size`` that divides ``global_batch_size /
    data_parallel`` (``SpecError`` naming the field otherwise).

    Uneven pipeline stages and MoE parallel folding (Megatron-Core names; every field optional,
    absent = an even split and experts split over the tensor-parallel ranks; rules and sources
    in ``planner.specs.pipeline_split`` and ``planner.specs.feasibility``):
    ``pipeline_layout`` (``--pipeline-model-parallel-layout``: a layout string such as
    ``"Et*3|(tt|)*29,m|L"``, or the transformer layers per virtual stage, virtual stage
    ``chunk·pipeline_parallel + rank``; ``virtual_pipeline`` must be the number of virtual
    stages over ``pipeline_parallel``), ``decoder_first_pipeline_num_layers`` /
    ``decoder_last_pipeline_num_layers`` (layers of the first / last pipeline rank),
    ``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split`` (the
    embedding / loss takes one layer's place in the split), ``expert_tensor_parallel``
    (``--expert-tensor-parallel-size``: the ranks each expert's FFN is split over; the expert
    groups fold into the stage's ``tensor·context·data`` ranks). Raises
    ``SpecError``
    naming ``parallelism.<field>``: the layout rules that read only these fields (interleaving
    needs pipeline parallelism, sequence parallelism needs tensor parallelism, the global batch
    is a multiple of ``data_parallel·micro_batch_size``) come from ``planner.specs.feasibility``,
    as do the checks that involve the model or the GPU count (``Scenario``).
    """

    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    context_parallel: int = 1
    expert_parallel: int = 1
    data_parallel: int = 1
    virtual_pipeline: int = 1
    sequence_parallel: bool = False
    micro_batch_size: int = 1
    global_batch_size: int
    recompute: Recompute = Recompute.NONE
    recompute_modules: tuple[RecomputeModule, ...] | None = None
    recompute_num_layers: int | None = None
    zero_stage: int = 1
    precision: Precision = Precision.BF16
    fp8_recipe: Fp8Recipe | None = None
    flash_attention: bool = True
    grad_reduce_in_fp32: bool | None = None
    overlap_grad_reduce: bool | None = None
    overlap_param_gather: bool | None = None
    tp_comm_overlap: bool | None = None
    recompute_early_stop: bool | None = None
    separate_qkv_projections: bool | None = None
    separate_gate_up_projections: bool | None = None
    fp8_tp_all_gather: bool | None = None
    expert_tensor_parallel: int | None = None
    pipeline_layout: str | tuple[int, ...] | None = None
    decoder_first_pipeline_num_layers: int | None = None
    decoder_last_pipeline_num_layers: int | None = None
    account_for_embedding_in_pipeline_split: bool = False
    account_for_loss_in_pipeline_split: bool = False
    pipeline_batch_size: int | None = None
    fp8_param_gather: bool = False
    megatron_fsdp: bool = False
    activation_offload_layers: int = 0
    main_params_dtype: MainParamsDtype | None = None
    exp_avg_dtype: OptimizerDtype | None = None
    exp_avg_sq_dtype: OptimizerDtype | None = None
    store_param_remainders: bool | None = None
    optimizer_implementation: OptimizerImplementation | None = None

    def __post_init__(self) -> None:
        for name in (
            "tensor_parallel",
            "pipeline_parallel",
            "context_parallel",
            "expert_parallel",
            "data_parallel",
            "virtual_pipeline",
            "micro_batch_size",
            "global_batch_size",
        ):
            require_int(f"parallelism.{name}", getattr(self, name))
        require_int("parallelism.zero_stage", self.zero_stage, minimum=0)
        if self.zero_stage > 3:
            raise SpecError(
                "parallelism.zero_stage", f"must be 0, 1, 2 or 3, got {self.zero_stage}"
            )
        require_bool("parallelism.sequence_parallel", self.sequence_parallel)
        require_bool("parallelism.flash_attention", self.flash_attention)
        optional_flags = (
            "grad_reduce_in_fp32",
            "overlap_grad_reduce",
            "overlap_param_gather",
            "tp_comm_overlap",
            "recompute_early_stop",
            "separate_qkv_projections",
            "separate_gate_up_projections",
            "fp8_tp_all_gather",
        )
        for optional in optional_flags:
            if getattr(self, optional) is not None:
                require_bool(f"parallelism.{optional}", getattr(self, optional))
        if not isinstance(self.recompute, Recompute):
            raise SpecError(
                "parallelism.recompute", f"must be none, selective or full, got {self.recompute!r}"
            )
        self._check_pipeline_batch_size()
        if self.recompute_modules is not None:
            if any(not isinstance(m, RecomputeModule) for m in self.recompute_modules):
                raise SpecError(
                    "parallelism.recompute_modules",
                    f"each must be one of {', '.join(RecomputeModule)}",
                )
            if self.recompute is not Recompute.SELECTIVE:
                raise SpecError(
                    "parallelism.recompute_modules",
                    "applies to selective recompute (Megatron --recompute-granularity "
                    "selective); set parallelism.recompute to selective",
                )
        if self.recompute_num_layers is not None:
            require_int("parallelism.recompute_num_layers", self.recompute_num_layers, minimum=1)
            if self.recompute is not Recompute.FULL:
                raise SpecError(
                    "parallelism.recompute_num_layers",
                    "applies to full recompute (Megatron --recompute-granularity full "
                    "--recompute-method block); set parallelism.recompute to full",
                )
        if not isinstance(self.precision, Precision):
            raise SpecError(
                "parallelism.precision",
                f"must be one of {', '.join(Precision)}, got {self.precision!r}",
            )
        self._check_recipe()
        self._check_offload()
        self._check_optimizer_dtypes()
        self._check_split_fields()
        violation = parallelism_violation(self)
        if violation is not None:
            raise violation_error(violation, self)

    def _check_recipe(self) -> None:
        """``fp8_recipe`` must be one the precision runs with."""
        if self.fp8_recipe is None:
            return
        if not isinstance(self.fp8_recipe, Fp8Recipe):
            raise SpecError(
                "parallelism.fp8_recipe",
                f"must be one of {', '.join(Fp8Recipe)}, got {self.fp8_recipe!r}",
            )
        allowed = RECIPES_OF_PRECISION.get(self.precision, ())
        if self.fp8_recipe not in allowed:
            hint = (
                f"use one of {', '.join(allowed)}"
                if allowed
                else "set parallelism.precision to fp8, mxfp8 or nvfp4"
            )
            raise SpecError(
                "parallelism.fp8_recipe",
                f"{self.fp8_recipe} does not run with precision {self.precision}; {hint}",
            )

    def _check_offload(self) -> None:
        """``fp8_param_gather`` needs FP8 or MXFP8; ``activation_offload_layers`` neither
        pipeline parallelism nor recompute (Megatron-Core ``TransformerConfig.__post_init__``:
        "Currently there is no support for Pipeline parallelism with CPU offloading", "CPU
        offloading does not work when activation recomputation is enabled", core_v0.14.0)."""
        require_bool("parallelism.fp8_param_gather", self.fp8_param_gather)
        require_bool("parallelism.megatron_fsdp", self.megatron_fsdp)
        if self.fp8_param_gather and self.precision not in (Precision.FP8, Precision.MXFP8):
            raise SpecError(
                "parallelism.fp8_param_gather",
                "keeps the weights in FP8; set parallelism.precision to fp8 or mxfp8",
            )
        require_int(
            "parallelism.activation_offload_layers", self.activation_offload_layers, minimum=0
        )
        if not self.activation_offload_layers:
            return
        if self.pipeline_parallel > 1:
            raise SpecError(
                "parallelism.activation_offload_layers",
                "Megatron-Core offloads activations only without pipeline parallelism; set "
                "pipeline_parallel to 1 or leave activation_offload_layers out",
            )
        if self.recompute is not Recompute.NONE:
            raise SpecError(
                "parallelism.activation_offload_layers",
                "Megatron-Core offloads activations only without activation recompute; set "
                "recompute to none or leave activation_offload_layers out",
            )

    def _check_optimizer_dtypes(self) -> None:
        """The optimizer's dtypes and implementation (class docstring): known values;
        ``main_params_dtype`` bf16
        (the optimizer updates the bf16 weights) needs bf16 weights (not precision fp16, not
        ``fp8_param_gather``); ``store_param_remainders`` needs an fp32 master of bf16
        weights."""
        kinds: dict[str, type[StrEnum]] = {
            "main_params_dtype": MainParamsDtype,
            "exp_avg_dtype": OptimizerDtype,
            "exp_avg_sq_dtype": OptimizerDtype,
            "optimizer_implementation": OptimizerImplementation,
        }
        for name, kind in kinds.items():
            value = getattr(self, name)
            allowed = tuple(kind)
            if value is not None and not isinstance(value, kind):
                raise SpecError(
                    f"parallelism.{name}",
                    f"must be one of {', '.join(allowed)}, got {value!r}",
                )
        main = self.main_params_dtype
        if main is MainParamsDtype.BF16 and self.precision is Precision.FP16:
            raise SpecError(
                "parallelism.main_params_dtype",
                "bf16 means the optimizer updates the bf16 weights themselves, and precision "
                "fp16 keeps fp16 weights; set main_params_dtype to fp32 or fp16 (a master copy) "
                "or precision to bf16",
            )
        if main is MainParamsDtype.BF16 and self.fp8_param_gather:
            raise SpecError(
                "parallelism.main_params_dtype",
                "bf16 (no master copy) cannot go with fp8_param_gather, whose FP8 weights are "
                "cast from the optimizer's master; set main_params_dtype to fp32 or fp16",
            )
        if self.store_param_remainders is None:
            return
        require_bool("parallelism.store_param_remainders", self.store_param_remainders)
        if not self.store_param_remainders:
            return
        if main not in (None, MainParamsDtype.FP32) or self.precision is Precision.FP16:
            raise SpecError(
                "parallelism.store_param_remainders",
                "keeps the low 16 bits of an fp32 master of bf16 weights (Transformer Engine "
                "FusedAdam); set main_params_dtype to fp32 and precision to bf16 (or a "
                "low-precision recipe on bf16 weights), or leave store_param_remainders out",
            )

    @property
    def low_precision_recipe(self) -> Fp8Recipe | None:
        """The recipe the GEMMs run with: ``fp8_recipe``, else the precision's default
        (``RECIPES_OF_PRECISION``); None in 16-bit training."""
        if self.fp8_recipe is not None:
            return self.fp8_recipe
        recipes = RECIPES_OF_PRECISION.get(self.precision)
        return recipes[0] if recipes else None

    def _check_split_fields(self) -> None:
        """Types of the uneven-split and folding fields, and the combinations Megatron-Core's
        ``TransformerConfig.__post_init__`` refuses whatever the model."""
        for name in (
            "account_for_embedding_in_pipeline_split",
            "account_for_loss_in_pipeline_split",
        ):
            require_bool(f"parallelism.{name}", getattr(self, name))
        for name in (
            "expert_tensor_parallel",
            "decoder_first_pipeline_num_layers",
            "decoder_last_pipeline_num_layers",
        ):
            if getattr(self, name) is not None:
                require_int(f"parallelism.{name}", getattr(self, name))
        uneven = (
            self.decoder_first_pipeline_num_layers is not None
            or self.decoder_last_pipeline_num_layers is not None
        )
        accounted = (
            self.account_for_embedding_in_pipeline_split or self.account_for_loss_in_pipeline_split
        )
        if uneven and accounted:
            raise SpecError(
                "parallelism.decoder_first_pipeline_num_layers",
                "cannot be combined with account_for_embedding_in_pipeline_split / "
                "account_for_loss_in_pipeline_split (Megatron-Core TransformerConfig); use one way "
                "of splitting",
            )
        if self.pipeline_layout is None:
            return
        if uneven or accounted:
            raise SpecError(
                "parallelism.pipeline_layout",
                "cannot be combined with decoder_first/last_pipeline_num_layers or the "
                "account_for_* options (Megatron-Core TransformerConfig); give one of them",
            )
        layout = self.pipeline_layout
        if isinstance(layout, tuple):
            if not layout:
                raise SpecError("parallelism.pipeline_layout", "an empty list has no stage")
            for i, count in enumerate(layout):
                require_int(f"parallelism.pipeline_layout[{i}]", count, minimum=0)
        elif not isinstance(layout, str):
            raise SpecError(
                "parallelism.pipeline_layout",
                f"must be a layout string (such as 'Et*3|(tt|)*29,m|L') or a list of layers per "
                f"virtual stage, got {layout!r}",
            )
        stages = len(virtual_stages(layout))
        p = self.pipeline_parallel
        if stages % p:
            raise SpecError(
                "parallelism.pipeline_layout",
                f"{stages} virtual stages cannot be spread over pipeline_parallel={p} ranks "
                "(Megatron-Core PipelineParallelLayerLayout: a multiple of it)",
            )
        if self.virtual_pipeline != stages // p:
            raise SpecError(
                "parallelism.virtual_pipeline",
                f"the pipeline_layout has {stages} virtual stages over {p} ranks, so "
                f"virtual_pipeline is {stages // p}, not {self.virtual_pipeline}; set it to "
                f"{stages // p} or leave it out",
            )

    @property
    def model_parallel_size(self) -> int:
        """GPUs holding one model replica: ``tp * pp * cp`` (no data or expert parallelism)."""
        return self.tensor_parallel * self.pipeline_parallel * self.context_parallel

    @property
    def num_microbatches(self) -> int:
        """Microbatches per pipeline per iteration, ``global / (data_parallel * micro_batch)``."""
        return self.global_batch_size // (self.data_parallel * self.micro_batch_size)

    @property
    def pipeline_schedule_runs(self) -> int:
        """Runs of the pipeline schedule per iteration, each with its own fill and drain:
        ``global / (data_parallel * pipeline_batch_size)``, 1 without ``pipeline_batch_size``."""
        if self.pipeline_batch_size is None:
            return 1
        return max(1, self.global_batch_size // (self.data_parallel * self.pipeline_batch_size))

    def _check_pipeline_batch_size(self) -> None:
        """``pipeline_batch_size``: a whole number of microbatches that divides the rank's
        share of the global batch (class docstring)."""
        size = self.pipeline_batch_size
        if size is None:
            return
        require_int("parallelism.pipeline_batch_size", size)
        per_rank, rest = divmod(self.global_batch_size, self.data_parallel)
        if size % self.micro_batch_size or rest or per_rank % size:
            raise SpecError(
                "parallelism.pipeline_batch_size",
                f"must be a multiple of micro_batch_size ({self.micro_batch_size}) that divides "
                f"global_batch_size / data_parallel ({self.global_batch_size} / "
                f"{self.data_parallel}), got {size}; leave it out for one pipeline schedule "
                "per iteration",
            )
