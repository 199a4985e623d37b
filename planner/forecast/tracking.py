"""A job's progress followed read by read: the one path from a log's progress records to what the
ETA estimator is given; pure, shared by the service and the replay.

The service's ingest loop (``planner.service.loops.progress``) and the replay of a finished log
(``planner.forecast.replay``, ``planner eta replay``) both apply a read of progress records with
:func:`follow`: the step-time rule of ``planner.forecast.observations`` (wall-clock progress), then,
record by record in log order, a restart to the history, the record's point to the history, its
observation to the history (``planner.forecast.history``: pauses, recent pace); after each estimate,
:func:`note_estimate` notes the phase it reports (a sustained change of pace is an event of the
history). The service keeps the mark and the history on the job's row and the observations in its
step samples; the replay keeps them in memory, the observations in an :class:`ObservationWindow`.
Both keep the same observations: one per iteration, the newest one of a re-run iteration replacing
the older (the iterations a job redoes after a restart from a checkpoint are its current pace), the
``OBSERVATION_WINDOW`` highest iterations. Given the same records, the same read times and the same
prior, schedule and cluster knowledge, the two make the same estimate at the same moment
(``tests/service/test_live_equals_replay.py`` replays recorded live sessions both ways, point by
point).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from planner.forecast.arguments import TrainingSchedule
from planner.forecast.eta import OBSERVATION_WINDOW, EtaEstimate
from planner.forecast.history import PhaseEvent, ProgressHistory
from planner.forecast.observations import ProgressMark, Restart, read_progress
from planner.forecast.values import StepObservation
from planner.specs.job import ProgressRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class Followed:
    """One record of a read as followed: its time (printed, else the read's time, epoch s), the
    step observation that ends at it (None: none) and the restart it is (None: none)."""

    record: ProgressRecord
    time_s: float
    observation: StepObservation | None
    restart: Restart | None


def follow(
    records: Sequence[ProgressRecord],
    *,
    read_time_s: float,
    mark: ProgressMark | None,
    history: ProgressHistory,
    start_time_s: float | None = None,
    schedule: TrainingSchedule | None = None,
) -> tuple[list[Followed], ProgressMark | None]:
    """Apply one read of ``records`` (one job, log order) read at ``read_time_s`` (epoch s):
    the step-time rule from ``mark`` (the mark the previous read left, None at the start),
    then each record's restart, point and observation to ``history`` (updated in place).
    ``start_time_s``: the job's start, when a scheduler gave one (a requeued job's restart
    overhead is measured from it); ``schedule``: the evaluation and checkpoint intervals the
    launch states (the history expects pauses there). Returns the records as followed and the
    new mark."""
    if schedule is not None:
        history.expect([i for i in (schedule.eval_interval, schedule.save_interval) if i])
    observations, restarts, new_mark = read_progress(
        records, read_time_s=read_time_s, previous=mark
    )
    out: list[Followed] = []
    for record, observation, restart in zip(records, observations, restarts, strict=True):
        time_s = record.timestamp_s if record.timestamp_s is not None else read_time_s
        if restart is not None:
            history.restart(restart, start_time_s=start_time_s)
        history.start(record.iteration, time_s)
        if observation is not None:
            history.observe(observation)
        out.append(Followed(record=record, time_s=time_s, observation=observation, restart=restart))
    return out, new_mark


def note_estimate(
    history: ProgressHistory, estimate: EtaEstimate, *, time_s: float
) -> PhaseEvent | None:
    """Note in ``history`` the phase ``estimate`` reports (``ProgressHistory.note_phase``),
    made at ``time_s`` (epoch s); returns a new phase event, None when there is none."""
    if estimate.iteration is None:
        return None
    return history.note_phase(
        start_iteration=estimate.phase_start_iteration,
        ratio=estimate.phase_ratio,
        z=estimate.phase_z,
        iteration=estimate.iteration,
        time_s=time_s,
    )


class ObservationWindow:
    """The observations one ETA uses, as the service's step samples keep them: one per
    iteration (the newest replaces an older one of the same iteration), the
    ``OBSERVATION_WINDOW`` highest iterations, in iteration order."""

    def __init__(self, size: int = OBSERVATION_WINDOW) -> None:
        self.size = size
        self._by_iteration: dict[int, StepObservation] = {}

    def add(self, observation: StepObservation) -> None:
        """Keep ``observation`` (replacing one of the same iteration)."""
        self._by_iteration[observation.iteration] = observation
        if len(self._by_iteration) > 2 * self.size:  # bound the memory of a long replay
            for iteration in sorted(self._by_iteration)[: -self.size]:
                del self._by_iteration[iteration]

    def __len__(self) -> int:
        return min(self.size, len(self._by_iteration))

    def observations(self) -> list[StepObservation]:
        """The kept observations, lowest iteration first."""
        return [self._by_iteration[i] for i in sorted(self._by_iteration)[-self.size :]]
