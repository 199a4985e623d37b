"""Time-limit policy: the runtime hint of a job and the scheduler time limit it justifies; pure,
no I/O. The Slurm adapter (``adapters.slurm.hints``) writes the results with ``scontrol`` and
into the hints file of ``job_submit.lua``; nothing here knows Slurm's commands.

* **Hint** (:func:`runtime_hint`): a running job's runtime from its start to its p50 (and p90)
  predicted end; a pending job's predicted runtime (p50, p90) with its expected straggler
  slowdown (:func:`straggler_adjustment`); rounded up to
  :data:`QUANTUM_S` (5 min), so a hint changes only when the prediction moves by minutes, not
  every ingest cycle. The ETA blends the model, the online calibration and the job's observed
  progress, and a job's log is written by its user: so the remaining time is never shorter
  than the remaining iterations at the model's peak-compute bound
  (``JobOutlook.peak_step_time_s``: FLOPs per iteration / (GPUs x peak FLOP/s)), and a job
  without a model prediction gets no hint at all (never a user-written number alone).
* **Limit** (:func:`policy_time_limit_min`, :func:`propose_time_limit_min`): ``p90`` (or the
  median) x 1.2 + 10 min, rounded up to whole minutes, at least elapsed + 10 min; applied only
  when it *lowers* the job's current limit by at least 5 min (only operators may raise a limit,
  and the current limit already honours the partition's and association's maxima), and never
  once the job has run longer than the predicted runtime (that prediction is refuted: the limit
  is left alone rather than kill a job on a wrong estimate).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from planner.errors import SpecError
from planner.recommend.outlook import JobOutlook
from planner.specs.job import JobStatus

#: Hints are rounded up to this many seconds.
QUANTUM_S = 300.0

_PARALLELISM = re.compile(r"[A-Za-z0-9=,._:/+-]{1,128}")


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeHint:
    """What the planner tells a scheduler about one job.

    ``predicted_runtime_s``: predicted wall time from start to end, seconds (> 0).
    ``runtime_p90_s``: its 90th percentile, seconds (> 0), the basis of the time-limit policy
    when given. ``eta_s``: predicted end, epoch seconds. ``recommended_gpus``: a count (>= 1).
    ``recommended_parallelism``: e.g. ``"tp=8,pp=4,dp=16"`` (characters ``[A-Za-z0-9=,._:/+-]``,
    at most 128). ``basis``: how the runtime was found (for the audit trail; not compared).
    Raises ``SpecError`` naming the field otherwise.
    """

    predicted_runtime_s: float
    runtime_p90_s: float | None = None
    eta_s: float | None = None
    recommended_gpus: int | None = None
    recommended_parallelism: str | None = None
    basis: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        for name in ("predicted_runtime_s", "runtime_p90_s", "eta_s"):
            value = getattr(self, name)
            if value is None and name != "predicted_runtime_s":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise SpecError(name, f"must be a number of seconds, got {value!r}")
            if not math.isfinite(value) or value <= 0:
                raise SpecError(name, f"must be finite and > 0 seconds, got {value!r}")
        gpus = self.recommended_gpus
        if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1):
            raise SpecError("recommended_gpus", f"must be an integer >= 1, got {gpus!r}")
        par = self.recommended_parallelism
        if par is not None and not _PARALLELISM.fullmatch(par):
            raise SpecError(
                "recommended_parallelism",
                f"{par!r}: use 1-128 characters of [A-Za-z0-9=,._:/+-], e.g. 'tp=8,pp=4,dp=16'",
            )

    @property
    def limit_basis_s(self) -> float:
        """The runtime the time-limit policy starts from: ``runtime_p90_s`` else the median."""
        return self.runtime_p90_s if self.runtime_p90_s is not None else self.predicted_runtime_s


def _ceil_to(value: float, quantum: float) -> float:
    return float(math.ceil(value / quantum) * quantum)


def plausible_remaining_s(job: JobOutlook, *, now_s: float | None = None) -> float | None:
    """The least time the job's remaining iterations can take: remaining iterations x
    ``peak_step_time_s`` (a pending job has all ``train_iters`` to go; a running job has done
    at most what the peak rate allows since its start, whatever its log claims); None without
    a prediction or an iteration count."""
    peak = job.peak_step_time_s
    if peak is None or not job.train_iters:
        return None
    done = 0.0
    if job.status is JobStatus.RUNNING and job.iteration:
        done = float(job.iteration)
        if now_s is not None and job.start_time_s is not None:
            done = min(done, max(0.0, now_s - job.start_time_s) / peak)
    return max(0.0, job.train_iters - done) * peak


def straggler_adjustment(job: JobOutlook) -> float:
    """The factor still to apply to a queued job's runtime for its expected straggler slowdown
    (``planner.stragglers.exposure``): the term's factor over the part the ETA already
    multiplied in, so the slowdown counts exactly once; 1 for other jobs or without a term."""
    if job.status is not JobStatus.PENDING or job.straggler_factor is None:
        return 1.0
    return max(1.0, job.straggler_factor) / max(1.0, job.eta_straggler_factor)


def runtime_hint(job: JobOutlook) -> RuntimeHint | None:
    """The hint of a job (see the module docstring); None without a model prediction, without
    an ETA, or when the runtime is not positive. Raises ``SpecError`` when the ETA holds
    non-finite values."""
    now = None
    if job.completion_p50_s is not None and job.remaining_p50_s is not None:
        now = job.completion_p50_s - job.remaining_p50_s
    floor = plausible_remaining_s(job, now_s=now)
    if not job.has_prediction or floor is None:
        return None
    p50 = p90 = end = None
    start = job.start_time_s
    clipped = False
    if job.status is JobStatus.RUNNING and start is not None and job.completion_p50_s:
        end = job.completion_p50_s
        end90 = job.completion_p90_s or end
        if now is not None:
            clipped = end < now + floor or end90 < now + floor
            end, end90 = max(end, now + floor), max(end90, now + floor)
        p50 = end - start
        p90 = end90 - start
    elif job.status is JobStatus.PENDING and job.remaining_p50_s:
        factor = straggler_adjustment(job)
        clipped = job.remaining_p50_s * factor < floor or (
            job.remaining_p90_s is not None and job.remaining_p90_s * factor < floor
        )
        p50 = max(job.remaining_p50_s * factor, floor)
        p90 = None if job.remaining_p90_s is None else max(job.remaining_p90_s * factor, floor)
    if p50 is None or p50 <= 0:
        return None
    basis = (
        f"ETA p50 {p50:.0f} s, p90 {p90 or p50:.0f} s; peak-compute floor of the remaining "
        f"iterations {floor:.0f} s (model {job.step_time_s:g} s/iteration x MFU "
        f"{job.mfu_ratio:.2f})" + ("; the ETA was faster and was clipped" if clipped else "")
    )
    p50 = _ceil_to(p50, QUANTUM_S)
    p90 = None if p90 is None else _ceil_to(p90, QUANTUM_S)
    end = None if end is None else _ceil_to(end, QUANTUM_S)
    return RuntimeHint(
        predicted_runtime_s=p50,
        runtime_p90_s=p90 if p90 and p90 >= p50 else None,
        eta_s=end,
        recommended_gpus=job.num_gpus if job.num_gpus else None,
        basis=basis,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeLimitPolicy:
    """How enforcing mode turns a prediction into a time limit.

    ``runtime_factor`` x basis (p90, else median runtime) + ``pad_s``; at least ``elapsed +
    min_headroom_s``; applied only when it lowers the current limit by ``min_decrease_s`` or
    more (hysteresis: no update per cycle as predictions move). Raises ``SpecError`` for
    non-finite, negative values or a factor below 1.
    """

    runtime_factor: float = 1.2
    pad_s: float = 600.0
    min_headroom_s: float = 600.0
    min_decrease_s: float = 300.0

    def __post_init__(self) -> None:
        for name in ("runtime_factor", "pad_s", "min_headroom_s", "min_decrease_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise SpecError(name, f"must be finite and >= 0, got {value!r}")
        if self.runtime_factor < 1.0:
            raise SpecError("runtime_factor", f"must be >= 1 (a margin), got {self.runtime_factor}")


def policy_time_limit_min(hint: RuntimeHint, policy: TimeLimitPolicy | None = None) -> int:
    """The policy's limit for a job that has not started: basis x factor + pad, whole minutes
    rounded up (what ``job_submit.lua`` may set for a job submitted without ``--time``)."""
    p = policy or TimeLimitPolicy()
    return max(1, math.ceil((hint.limit_basis_s * p.runtime_factor + p.pad_s) / 60.0 - 1e-9))


def propose_time_limit_min(
    hint: RuntimeHint,
    *,
    current_limit_s: float | None,
    elapsed_s: float,
    policy: TimeLimitPolicy | None = None,
) -> int | None:
    """The new time limit in minutes for a job, or ``None`` to leave it as it is.

    ``current_limit_s``: the job's limit now, seconds (``None``: unlimited); ``elapsed_s``: how
    long it has run (0 when pending). ``None`` when the job already ran as long as the basis
    (prediction refuted), or the policy's limit would not lower the current one by at least
    ``min_decrease_s``. Never above the current limit, never below elapsed + headroom.
    """
    p = policy or TimeLimitPolicy()
    elapsed = max(0.0, elapsed_s)
    if elapsed >= hint.limit_basis_s:
        return None
    floor_min = math.ceil((elapsed + p.min_headroom_s) / 60.0 - 1e-9)
    new_min = max(policy_time_limit_min(hint, p), floor_min)
    if current_limit_s is None:
        return new_min
    current_min = round(current_limit_s / 60.0)
    if current_min - new_min < max(1, math.ceil(p.min_decrease_s / 60.0 - 1e-9)):
        return None
    return new_min
