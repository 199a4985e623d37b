"""A running job: what moving it to another layout costs, and whether that pays.

Restart cost (assumptions, all overridable): the job saves a checkpoint on stop and reloads it
resharded to the new layout (Megatron distributed checkpointing), so no trained tokens are
lost; ``restart_s = 2 · checkpoint_bytes / bandwidth + relaunch_s + warmup_iterations ·
new_iteration_time_s``. ``checkpoint_bytes`` = 14 bytes per parameter (16-bit weights 2, fp32
master weights 4, Adam moments 8; Megatron-LM checkpoint layout, Rajbhandari et al. 2020 §3);
bandwidth = aggregate parallel-file-system bandwidth (default 20 GB/s); ``relaunch_s``
(default 300 s) covers requeue, container and process start, NCCL initialisation and the data
loader; the first ``warmup_iterations`` (default 10) are counted as lost (allocator warm-up,
autotuning, CUDA graph capture).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.perf.step import Prediction
from planner.search import ExploreEntry
from planner.specs._checks import require_int, require_number
from planner.specs.scenario import Scenario

__all__ = [
    "CHECKPOINT_BYTES_PER_PARAM",
    "DEFAULT_RESTART",
    "RestartAssumptions",
    "RestartCost",
    "RunningAdvice",
    "RunningJob",
]

CHECKPOINT_BYTES_PER_PARAM = 14.0
"""16-bit weights (2) + fp32 master weights (4) + Adam first and second moments (4 + 4)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RestartCost:
    """The terms of one restart, seconds (``checkpoint_bytes``: bytes); ``total_s`` their sum
    (the checkpoint is written and read once each)."""

    checkpoint_bytes: float
    checkpoint_save_s: float
    checkpoint_load_s: float
    relaunch_s: float
    warmup_s: float
    total_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RestartAssumptions:
    """What a restart on a new layout costs (see the module docstring), SI units. Raises
    ``SpecError("recommend.restart.<field>", ...)`` for a non-positive bandwidth or bytes per
    parameter, a negative relaunch time or warm-up."""

    checkpoint_bandwidth_bytes_per_s: float = 20e9
    relaunch_s: float = 300.0
    warmup_iterations: int = 10
    checkpoint_bytes_per_param: float = CHECKPOINT_BYTES_PER_PARAM

    def __post_init__(self) -> None:
        require_number(
            "recommend.restart.checkpoint_bandwidth_gb_per_s",
            self.checkpoint_bandwidth_bytes_per_s,
        )
        require_number("recommend.restart.relaunch_s", self.relaunch_s, positive=False)
        require_int("recommend.restart.warmup_iterations", self.warmup_iterations, minimum=0)
        require_number(
            "recommend.restart.checkpoint_bytes_per_param", self.checkpoint_bytes_per_param
        )

    def cost(self, new_iteration_time_s: float, num_params: float) -> RestartCost:
        """The cost of restarting a model of ``num_params`` parameters on a layout whose
        iteration takes ``new_iteration_time_s``."""
        checkpoint_bytes = self.checkpoint_bytes_per_param * num_params
        io = checkpoint_bytes / self.checkpoint_bandwidth_bytes_per_s
        warm = self.warmup_iterations * new_iteration_time_s
        return RestartCost(
            checkpoint_bytes=checkpoint_bytes,
            checkpoint_save_s=io,
            checkpoint_load_s=io,
            relaunch_s=self.relaunch_s,
            warmup_s=warm,
            total_s=2.0 * io + self.relaunch_s + warm,
        )


DEFAULT_RESTART = RestartAssumptions()


@dataclass(frozen=True, slots=True, kw_only=True)
class RunningJob:
    """The job as it runs: ``gpu`` (its GPU type as the request names it), ``current`` (the
    scenario it runs now: GPUs and full layout), ``tokens_trained`` so far, and ``base``: the
    job on the same GPUs as the search for its best layout sees it (the request's
    one-per-job parallelism fields, with the precision and flash attention it runs with)."""

    gpu: str
    current: Scenario
    base: Scenario
    tokens_trained: float

    def __post_init__(self) -> None:
        require_number("recommend.running.tokens_trained", self.tokens_trained, positive=False)

    @property
    def num_gpus(self) -> int:
        """GPUs the job runs on."""
        return self.current.hardware.num_gpus


@dataclass(frozen=True, slots=True, kw_only=True)
class RunningAdvice:
    """Whether a running job should move to its best layout on the same GPUs.

    ``current_prediction`` is the prediction of the layout it runs; ``best`` the best layout
    by time to train (None with ``reason`` when the search found none); ``restart_cost`` the
    cost of the move (None without ``best``). Times in seconds, throughput in tokens/s.
    """

    job: RunningJob
    current_prediction: Prediction
    remaining_tokens: float
    best: ExploreEntry | None
    reason: str | None = None
    restart_cost: RestartCost | None = None

    @property
    def remaining_time_current_s(self) -> float:
        """Time to train the remaining tokens on the current layout."""
        return self.remaining_tokens / self.current_prediction.tokens_per_s

    @property
    def faster(self) -> bool:
        """True when the best layout's iteration is shorter than the current one's."""
        if self.best is None:
            return False
        return self.best.prediction.iteration_time_s < self.current_prediction.iteration_time_s

    @property
    def speedup(self) -> float | None:
        """Current iteration time over the best layout's."""
        if self.best is None:
            return None
        return self.current_prediction.iteration_time_s / self.best.prediction.iteration_time_s

    @property
    def iteration_time_saving_s(self) -> float | None:
        """Iteration time the best layout saves."""
        if self.best is None:
            return None
        return self.current_prediction.iteration_time_s - self.best.prediction.iteration_time_s

    @property
    def remaining_time_after_restart_s(self) -> float | None:
        """Restart cost plus the time to train the remaining tokens on the best layout."""
        if self.best is None or self.restart_cost is None:
            return None
        return self.remaining_tokens / self.best.prediction.tokens_per_s + self.restart_cost.total_s

    @property
    def time_saved_s(self) -> float | None:
        """Time the move saves, restart included (negative: it costs time)."""
        after = self.remaining_time_after_restart_s
        return None if after is None else self.remaining_time_current_s - after

    @property
    def restart_pays(self) -> bool | None:
        """True when moving saves time."""
        saved = self.time_saved_s
        return None if saved is None else saved > 0

    @property
    def break_even_remaining_tokens(self) -> float | None:
        """Tokens left to train below which the move no longer pays (None when the best layout
        is not faster per token)."""
        if self.best is None or self.restart_cost is None:
            return None
        gain_per_token = (
            1.0 / self.current_prediction.tokens_per_s - 1.0 / self.best.prediction.tokens_per_s
        )
        return self.restart_cost.total_s / gain_per_token if gain_per_token > 0 else None
