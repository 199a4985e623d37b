"""A scenario: one training job on one cluster, the unit of every prediction."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from planner.errors import SpecError
from planner.specs._checks import require_int, require_number
from planner.specs.feasibility import first_violation, violation_error
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
    model (``tp*pp*cp*dp != num_gpus``, heads or query groups not divisible by tp, layers the
    framework cannot split over ``pp*vp`` stages, sequence not divisible by ``cp``, experts not
    divisible by ``ep`` or expert groups that do not fold into a stage, a micro-batch count the
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

    @property
    def tokens_per_iteration(self) -> int:
        """Tokens consumed by one optimizer step, ``global_batch_size * seq_length``."""
        return self.parallelism.global_batch_size * self.model.seq_length
