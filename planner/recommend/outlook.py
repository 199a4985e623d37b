"""What the planner knows about one job when it advises a scheduler; pure value, no I/O.

The service builds a :class:`JobOutlook` from its stored prediction and ETA; the admission
policy (``planner.recommend.admission``) and the time-limit policy
(``planner.recommend.time_limit``) decide from it alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.specs.job import JobStatus


@dataclass(frozen=True, slots=True, kw_only=True)
class JobOutlook:
    """One job's prediction and ETA as the policies read them.

    ``status``: the scheduler's state; ``num_gpus``: GPUs allocated or requested (None:
    unknown); ``train_iters``: iterations the job runs; ``start_time_s``: epoch s (running
    jobs). From the performance model (all None without a prediction, ``has_prediction``
    False, ``description`` then says why): ``step_time_s`` (s per iteration), ``mfu_ratio``,
    ``memory_per_gpu_bytes``, ``fits_in_memory``. From the ETA: ``remaining_p50_s`` /
    ``remaining_p90_s`` (s from now, or the runtime of a pending job) and
    ``completion_p50_s`` / ``completion_p90_s`` (epoch s, running jobs). ``iteration``: the
    last iteration the job reported (running jobs; None: unknown). From the cluster's
    history of slow nodes (``planner.stragglers.exposure``, queued jobs): ``straggler_factor``
    (expected slowdown, >= 1), ``straggler_probability`` (chance the allocation includes a slow
    node), ``straggler_slowdown`` (the slowdown such nodes caused); ``eta_straggler_factor`` is
    the part of that factor the ETA already multiplied in (1: none).
    """

    job_id: str
    status: JobStatus = JobStatus.UNKNOWN
    num_gpus: int | None = None
    train_iters: int | None = None
    start_time_s: float | None = None
    has_prediction: bool = False
    description: str = ""
    step_time_s: float | None = None
    mfu_ratio: float | None = None
    memory_per_gpu_bytes: float | None = None
    fits_in_memory: bool | None = None
    remaining_p50_s: float | None = None
    remaining_p90_s: float | None = None
    completion_p50_s: float | None = None
    completion_p90_s: float | None = None
    iteration: int | None = None
    straggler_factor: float | None = None
    straggler_probability: float | None = None
    straggler_slowdown: float | None = None
    eta_straggler_factor: float = 1.0

    @property
    def predicted_runtime_s(self) -> float | None:
        """The model's runtime from start to end: step time x iterations (None: unknown)."""
        if self.step_time_s is None or not self.train_iters:
            return None
        return self.step_time_s * self.train_iters

    @property
    def peak_step_time_s(self) -> float | None:
        """The fastest an iteration can physically run: the model's FLOPs per iteration over
        the job's GPUs at their peak rate, i.e. the predicted step time x the predicted MFU
        (``mfu = flops / (step time x num_gpus x peak FLOP/s)``); None without a prediction."""
        if self.step_time_s is None or self.mfu_ratio is None:
            return None
        if self.step_time_s <= 0 or not 0 < self.mfu_ratio <= 1:
            return None
        return self.step_time_s * self.mfu_ratio

    @property
    def predicted_runtime_with_stragglers_s(self) -> float | None:
        """The model's runtime times the expected straggler slowdown of a queued job (the
        model's runtime when there is no term)."""
        runtime = self.predicted_runtime_s
        if runtime is None or self.straggler_factor is None:
            return runtime
        return runtime * max(1.0, self.straggler_factor)
