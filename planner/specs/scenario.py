"""A scenario: one training job on one cluster, the unit of every prediction."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from planner.errors import SpecError
from planner.specs._checks import require_bool, require_int, require_number
from planner.specs.feasibility import first_violation, violation_error
from planner.specs.hardware import HardwareSpec, Precision
from planner.specs.model import ModelSpec
from planner.specs.parallelism import ParallelismSpec

_BLOCK_SCALED = (Precision.MXFP8.value, Precision.NVFP4.value)
"""Recipes whose GEMMs need the GPU's block-scaled tensor cores (Blackwell)."""


class Framework(StrEnum):
    """Training framework running the job (informational; the Megatron schedule is modelled)."""

    MEGATRON = "megatron"
    NEMO = "nemo"
    TORCHTITAN = "torchtitan"
    FSDP = "fsdp"
    DEEPSPEED = "deepspeed"
    MAXTEXT = "maxtext"
    LLM_FOUNDRY = "llm_foundry"
    AUTOMODEL = "automodel"
    OTHER = "other"


class TrainingMode(StrEnum):
    """What the run trains: ``pretrain`` (every weight), ``sft`` (full supervised
    fine-tuning: every weight, typically on packed sequences) or ``lora`` (low-rank adapters on
    a frozen base, Hu et al. 2021)."""

    PRETRAIN = "pretrain"
    SFT = "sft"
    LORA = "lora"


class CudaGraphs(StrEnum):
    """What the training loop captures in CUDA graphs (Megatron-Core ``cuda_graph_impl`` /
    ``cuda_graph_scope``, NVIDIA/Megatron-LM ``megatron/core/transformer/transformer_config.py``
    @ ``d98e8a64dd``): ``none``; ``per_layer``, graphs of whole transformer layers or of parts of
    them (``local`` or ``transformer_engine`` with a scope such as ``attn``, ``moe_router``,
    ``moe_preprocess``, or the whole layer); ``full_iteration``, one graph of the whole forward
    and backward (``--cuda-graph-impl full_iteration``; before Megatron-Core 0.16
    ``--cuda-graph-scope full_iteration`` with the ``local`` implementation)."""

    NONE = "none"
    PER_LAYER = "per_layer"
    FULL_ITERATION = "full_iteration"


class LoraTarget(StrEnum):
    """Linear layers LoRA adapts (NeMo 2.0 ``nemo.collections.llm.peft.LoRA`` names)."""

    LINEAR_QKV = "linear_qkv"
    LINEAR_PROJ = "linear_proj"
    LINEAR_FC1 = "linear_fc1"
    LINEAR_FC2 = "linear_fc2"


LORA_DEFAULT_RANK = 32
"""NeMo 2.0 ``LoRA(dim=32)`` (``nemo/collections/llm/peft/lora.py``), as its recipes use."""
LORA_DEFAULT_TARGETS: tuple[LoraTarget, ...] = tuple(LoraTarget)
"""NeMo 2.0 ``LoRA.target_modules`` default: all four linear layers of a transformer layer."""


FRAMEWORK_VERSION_MAX_CHARS = 64
"""The longest ``training.framework_version`` (a container tag or version, not a document)."""


def _check_version(version: object) -> None:
    """Raise ``SpecError`` unless ``version`` is a non-empty, stripped, printable text of at
    most ``FRAMEWORK_VERSION_MAX_CHARS`` characters."""
    if (
        not isinstance(version, str)
        or not version
        or version != version.strip()
        or len(version) > FRAMEWORK_VERSION_MAX_CHARS
        or not version.isprintable()
    ):
        raise SpecError(
            "training.framework_version",
            f"must be the framework's release as text of 1-{FRAMEWORK_VERSION_MAX_CHARS} "
            f"printable characters (such as '25.11' or '0.2.0'), got {version!r}",
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingSpec:
    """The training run: ``total_tokens`` to train on and/or ``train_iters`` optimizer steps
    (Megatron ``--train-iters``); either gives ``time_to_train_s`` (tokens win when both).

    ``mode`` (``TrainingMode``, default ``pretrain``); with ``lora``, ``lora_rank`` and
    ``lora_targets`` (defaults: NeMo's, ``LORA_DEFAULT_RANK`` and ``LORA_DEFAULT_TARGETS``).
    ``packed_sample_length``: mean tokens of the samples packed into one sequence (NeMo packed
    sequences: each sample attends only within itself); None: one sample per sequence.
    ``framework_version``: the framework's release as its user names it (a NeMo container tag
    such as ``25.11``, a package version such as ``0.2.0``; blanks stripped, at most
    ``FRAMEWORK_VERSION_MAX_CHARS`` printable characters); None: not stated. The model does not
    read it; the observed-runs calibration keeps its corrections per release
    (``planner.calibration.observed_runs``). ``cuda_graphs`` (``CudaGraphs``, default ``none``):
    what the loop replays as CUDA graphs; only ``full_iteration`` changes the model (no MoE
    layer waits for the host: ``planner.perf.moe_mlp.moe_host_exposed_s``). ``compiled_loss``
    (default false): the cross-entropy runs under ``torch.compile`` (torchtitan's
    ``compile.components`` with ``loss``), which changes what the loss keeps and moves
    (``planner.perf.loss_memory``).
    """

    framework: Framework = Framework.MEGATRON
    total_tokens: float | None = None
    train_iters: int | None = None
    mode: TrainingMode = TrainingMode.PRETRAIN
    lora_rank: int | None = None
    lora_targets: tuple[LoraTarget, ...] | None = None
    packed_sample_length: int | None = None
    framework_version: str | None = None
    cuda_graphs: CudaGraphs = CudaGraphs.NONE
    compiled_loss: bool = False

    def __post_init__(self) -> None:
        if self.framework_version is not None:
            _check_version(self.framework_version)
        require_bool("training.compiled_loss", self.compiled_loss)
        if not isinstance(self.cuda_graphs, CudaGraphs):
            raise SpecError(
                "training.cuda_graphs",
                f"must be one of {', '.join(CudaGraphs)}, got {self.cuda_graphs!r}",
            )
        if not isinstance(self.framework, Framework):
            raise SpecError(
                "training.framework",
                f"must be one of {', '.join(Framework)}, got {self.framework!r}",
            )
        if not isinstance(self.mode, TrainingMode):
            raise SpecError(
                "training.mode", f"must be one of {', '.join(TrainingMode)}, got {self.mode!r}"
            )
        if self.total_tokens is not None:
            require_number("training.total_tokens", self.total_tokens)
        if self.train_iters is not None:
            require_int("training.train_iters", self.train_iters)
        if self.packed_sample_length is not None:
            require_int("training.packed_sample_length", self.packed_sample_length)
        if self.mode is not TrainingMode.LORA:
            for name in ("lora_rank", "lora_targets"):
                if getattr(self, name) is not None:
                    raise SpecError(f"training.{name}", "applies to training.mode: lora")
            return
        if self.lora_rank is not None:
            require_int("training.lora_rank", self.lora_rank)
        if self.lora_targets is not None and (
            not self.lora_targets or any(not isinstance(t, LoraTarget) for t in self.lora_targets)
        ):
            raise SpecError("training.lora_targets", f"must list some of {', '.join(LoraTarget)}")

    @property
    def trains_base(self) -> bool:
        """True unless the base weights are frozen (LoRA)."""
        return self.mode is not TrainingMode.LORA

    @property
    def adapter_rank(self) -> int:
        """LoRA rank (``lora_rank`` or NeMo's default); 0 unless ``mode`` is ``lora``."""
        if self.mode is not TrainingMode.LORA:
            return 0
        return self.lora_rank if self.lora_rank is not None else LORA_DEFAULT_RANK

    def adapts(self, target: LoraTarget) -> bool:
        """True when LoRA adapts ``target`` (``lora_targets`` or NeMo's default)."""
        if self.mode is not TrainingMode.LORA:
            return False
        targets = self.lora_targets if self.lora_targets is not None else LORA_DEFAULT_TARGETS
        return target in targets


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """Model x hardware x parallelism x training, checked for consistency.

    Raises ``SpecError`` naming the field to fix when the layout does not tile the GPUs or the
    model (``tp*pp*cp*dp != num_gpus``, heads or query groups not divisible by tp, layers the
    framework cannot split over ``pp*vp`` stages, sequence not divisible by ``cp``, experts not
    divisible by ``ep`` or expert groups that do not fold into a stage, biased experts split by
    expert tensor parallelism under Megatron-Core, a micro-batch count the
    framework's interleaved schedule refuses: the rules of ``planner.specs.feasibility``, under
    ``training.framework``, checked on this one candidate) or uses a precision the GPU lacks.
    """

    name: str | None = None
    model: ModelSpec
    hardware: HardwareSpec
    parallelism: ParallelismSpec
    training: TrainingSpec = field(default_factory=TrainingSpec)

    def __post_init__(self) -> None:
        m, hw, par = self.model, self.hardware, self.parallelism
        framework = self.training.framework
        violation = first_violation(m, hw.num_gpus, par, framework=framework)
        if violation is not None:
            raise violation_error(
                violation, par, model=m, num_gpus=hw.num_gpus, framework=framework
            )
        if not hw.gpu.supports(par.precision):
            hw.gpu.peak_flop_per_s(par.precision)  # raises the SpecError with the fix
        packed = self.training.packed_sample_length
        if packed is not None and packed > self.model.seq_length:
            raise SpecError(
                "training.packed_sample_length",
                f"{packed} exceeds model.seq_length={self.model.seq_length}, the packed "
                "sequence the samples are packed into",
            )
        offloaded = par.activation_offload_layers
        if offloaded >= m.num_layers:
            raise SpecError(
                "parallelism.activation_offload_layers",
                f"{offloaded} is not below model.num_layers={m.num_layers} (Megatron-Core "
                "TransformerConfig: CPU offloading can be done only for layers less than the "
                "model's)",
            )
        if offloaded and hw.gpu.host_link_bandwidth_bytes_per_s is None:
            raise SpecError(
                "parallelism.activation_offload_layers",
                f"needs the host-link bandwidth of {hw.gpu.key}, which the GPU catalog does "
                "not give (no public figure); leave activation_offload_layers out",
            )
        recipe = par.low_precision_recipe
        if (
            recipe is not None
            and recipe.value in _BLOCK_SCALED
            and not hw.gpu.supports(Precision(recipe.value))
        ):
            raise SpecError(
                "parallelism.fp8_recipe",
                f"{recipe} needs block-scaled tensor cores, which {hw.gpu.key} lacks "
                f"(Blackwell has them); use fp8_recipe blockwise, tensorwise or delayed",
            )

    @property
    def tokens_per_iteration(self) -> int:
        """Tokens consumed by one optimizer step, ``global_batch_size * seq_length``."""
        return self.parallelism.global_batch_size * self.model.seq_length
