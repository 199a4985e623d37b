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
    last iteration the job reported (running jobs; None: unknown).
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
