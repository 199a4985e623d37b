"""A scenario: one training job on one cluster, the unit of every prediction."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from planner.errors import SpecError
from planner.specs._checks import divisors, require_int, require_number
from planner.specs.hardware import HardwareSpec
from planner.specs.model import ModelSpec
from planner.specs.parallelism import ParallelismSpec


class Framework(StrEnum):
    """Training framework running the job (informational; the Megatron schedule is modelled)."""

    MEGATRON = "megatron"
    NEMO = "nemo"
    TORCHTITAN = "torchtitan"
    FSDP = "fsdp"
    DEEPSPEED = "deepspeed"
    MAXTEXT = "maxtext"
    LLM_FOUNDRY = "llm_foundry"
    OTHER = "other"


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingSpec:
    """The training run: ``total_tokens`` to train on and/or ``train_iters`` optimizer steps
    (Megatron ``--train-iters``); either gives ``time_to_train_s`` (tokens win when both)."""

    framework: Framework = Framework.MEGATRON
    total_tokens: float | None = None
    train_iters: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.framework, Framework):
            raise SpecError(
                "training.framework",
                f"must be one of {', '.join(Framework)}, got {self.framework!r}",
            )
        if self.total_tokens is not None:
            require_number("training.total_tokens", self.total_tokens)
        if self.train_iters is not None:
            require_int("training.train_iters", self.train_iters)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """Model x hardware x parallelism x training, checked for consistency.

    Raises ``SpecError`` naming the field to fix when the layout does not tile the GPUs or the
    model (``tp*pp*cp*dp != num_gpus``, heads or query groups not divisible by tp, layers not
    divisible by ``pp*vp``, sequence not divisible by ``cp``, experts not divisible by ``ep``,
    precision the GPU lacks).
    """

    name: str | None = None
    model: ModelSpec
    hardware: HardwareSpec
    parallelism: ParallelismSpec
    training: TrainingSpec = field(default_factory=TrainingSpec)

    def __post_init__(self) -> None:
        m, hw, par = self.model, self.hardware, self.parallelism
        tp, pp, cp, dp = (
            par.tensor_parallel,
            par.pipeline_parallel,
            par.context_parallel,
            par.data_parallel,
        )
        product = tp * pp * cp * dp
        if product != hw.num_gpus:
            hint = (
                f"set data_parallel to {hw.num_gpus // (tp * pp * cp)} or leave it out"
                if hw.num_gpus % (tp * pp * cp) == 0
                else f"num_gpus must be a multiple of tensor·pipeline·context = {tp * pp * cp}"
            )
            raise SpecError(
                "parallelism.data_parallel",
                f"tensor·pipeline·context·data = {tp}·{pp}·{cp}·{dp} = {product} ≠ "
                f"hardware.num_gpus = {hw.num_gpus}; {hint}",
            )
        if m.num_attention_heads % tp:
            raise SpecError(
                "parallelism.tensor_parallel",
                f"{tp} does not divide model.num_attention_heads={m.num_attention_heads}; "
                f"use one of {divisors(m.num_attention_heads)}",
            )
        if m.num_query_groups % tp:
            raise SpecError(
                "model.num_query_groups",
                f"{m.num_query_groups} KV groups cannot be split over tensor_parallel={tp}; "
                f"use tensor_parallel among {divisors(m.num_query_groups)}",
            )
        if m.ffn_hidden_size % tp or (m.is_moe and m.moe_ffn_hidden_size % tp):
            raise SpecError(
                "parallelism.tensor_parallel",
                f"{tp} does not divide the MLP width (ffn_hidden_size={m.ffn_hidden_size}"
                + (f", moe_ffn_hidden_size={m.moe_ffn_hidden_size}" if m.is_moe else "")
                + ")",
            )
        stages = pp * par.virtual_pipeline
        if m.num_layers % stages:
            field_name = "virtual_pipeline" if par.virtual_pipeline > 1 else "pipeline_parallel"
            raise SpecError(
                f"parallelism.{field_name}",
                f"model.num_layers={m.num_layers} is not divisible by pipeline_parallel·"
                f"virtual_pipeline = {pp}·{par.virtual_pipeline} = {stages}; each model chunk "
                f"needs the same number of layers",
            )
        if cp > 1 and m.seq_length % (2 * cp):
            raise SpecError(
                "parallelism.context_parallel",
                f"model.seq_length={m.seq_length} must be divisible by 2·context_parallel = "
                f"{2 * cp} (load-balanced causal context parallelism)",
            )
        if par.sequence_parallel and (m.seq_length // cp) % tp:
            raise SpecError(
                "parallelism.sequence_parallel",
                f"the local sequence {m.seq_length // cp} is not divisible by tensor_parallel="
                f"{tp}; change seq_length or set sequence_parallel to false",
            )
        ep = par.expert_parallel
        if ep > 1:
            if not m.is_moe:
                raise SpecError(
                    "parallelism.expert_parallel",
                    "needs an MoE model (model.num_experts > 0); set it to 1",
                )
            if m.num_experts % ep:
                raise SpecError(
                    "parallelism.expert_parallel",
                    f"{ep} does not divide model.num_experts={m.num_experts}; "
                    f"use one of {divisors(m.num_experts)}",
                )
            if (dp * cp) % ep:
                raise SpecError(
                    "parallelism.expert_parallel",
                    f"experts are sharded within the data·context-parallel group of {dp * cp} "
                    f"GPUs; {ep} does not divide it (use one of {divisors(dp * cp)})",
                )
        if not hw.gpu.supports(par.precision):
            hw.gpu.peak_flop_per_s(par.precision)  # raises the SpecError with the fix

    @property
    def tokens_per_iteration(self) -> int:
        """Tokens consumed by one optimizer step, ``global_batch_size * seq_length``."""
        return self.parallelism.global_batch_size * self.model.seq_length
