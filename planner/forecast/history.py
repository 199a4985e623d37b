"""A job's progress history: the pauses it made, its restarts and its recent steady pace;
pure, kept between reads as JSON (the service stores it on the job, the replay in memory).

Each wall-clock step observation (``planner.forecast.observations``) is, in order:

* **warm-up** when its interval starts within ``WARMUP_ITERATIONS`` (10) of the start of the run
  or of the last restart: the first iterations are slow (graph capture, allocator and NCCL
  warm-up, data loader start) and say nothing about the pace or the pauses;
* **a pause** when the interval took longer than its steady pace by more than its noise: the
  excess is a pause (evaluation, checkpoint, a stall) made after some iteration of the interval.
  The steady pace of the interval is the compute time the log printed for it times the recent
  wall-over-printed ratio when the log printed one (then the decision is made at once: the
  printed time follows a slower phase, a pause is not in it); else the median of the recent
  steady pace, and then only when the *next* interval is back to that pace (an interval that is
  slow and followed by another slow one is the start of a slower phase, not a pause: both are
  kept as steady);
* **steady** otherwise: it joins the recent pace (the last ``RECENT`` (32) steady intervals).

An interval is slow when its excess is above ``PAUSE_Z`` (5) noise sd and above
``PAUSE_MIN_RATIO`` of the interval's steady time (0.5 without a printed compute time, 0.1 with
one): a pause hidden in a long interval is then left in the pace, where it still counts at its
average rate. The noise depends on what the steady time is taken from:

* **with a printed compute time** the steady time follows the pace of the interval itself (a loaded
  host slows the printed time of the same iterations), so the noise is that of the interval's
  *excess over its printed time*: the robust sd (the mean absolute deviation from the median,
  scaled), in seconds, of the excesses of the recent steady intervals (``RECENT`` of them; at least
  ``EXCESS_FLOOR_S``), not the swings of the pace. When iterations are logged every N steps and the
  log prints whole seconds, that sd is the blur of the two ends of an interval (each end is the
  first line that printed its second: off by at most the time between two lines), measured, not
  assumed: a 3 s evaluation stands out of intervals whose excesses scatter by 0.3 s, whatever the
  pace does on a shared host (when the pace's own swings set the bar, an evaluation of a few seconds
  on a host whose pace swung 0.3-1.7 s per iteration was never seen);
* **without one**, the robust (MAD) per-iteration log-sd of the recent pace, as in
  ``planner.forecast.level``, plus the time resolution of the log (1 s when every time so far
  was a whole second).

Where the job's launch states when it pauses (``expected``: its evaluation and checkpoint
intervals, ``planner.forecast.arguments``), an interval that holds one of those moments (it
starts at or before a multiple of the interval and ends after it: the pause comes right after
that iteration) is expected to be slow, and the bar there is ``PAUSE_Z_EXPECTED`` (3) noise sd
instead of 5: a 2 s evaluation among intervals blurred by 0.4 s is counted where it was due,
while an unexpected stall still needs the higher bar.

A restart (``planner.forecast.observations.Restart``) is recorded with its overhead: the wall time
from the last point before it to the restart point (from the job's new start, when a requeued
job waited in the queue) plus the iterations done again at the recent pace.

**Phases.** A sustained change of the job's pace is a :class:`PhaseEvent`, noted from the ETA's
fit after each estimate (:meth:`ProgressHistory.note_phase`, called by the service and the
replay alike: ``planner.forecast.tracking``). The ETA follows the newest pace as soon as its
change-point search finds one (``planner.forecast.level``: a shift of 6 sd of the per-iteration
noise); an *event* asks more, because a shared host's load swings the pace for tens of seconds
at a time and an alert must not follow those swings: the shift must be at least
``PHASE_MIN_EFFECT`` (10 %) and ``PHASE_Z`` (4) times the sd of the difference of the two
stretches' mean paces under the pace's *long-run* noise (``pace_sd^2 (1/W_before +
1/W_after)``, ``W``: iterations; ``planner.forecast.level.long_run_sd``: the swings of a shared
host are in it, so they are not phases). Pauses are no phase (their intervals are left out of
the pace before the search), nor is a straggler (one rank slow: the service marks an event that
a flagged straggler explains). A later report of the same phase (its start revised by less than
``PHASE_REVISE_RATIO`` of it, the same way) updates the event: the start reported is the
latest, the iteration and time it was first seen stay.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, TypedDict

from planner.forecast.observations import Restart
from planner.forecast.stored import (
    integer,
    items,
    number,
    object_of,
    optional_integer,
    optional_real,
    real,
)
from planner.forecast.values import StepObservation

WARMUP_ITERATIONS: Final = 10
RECENT: Final = 32
PAUSE_Z: Final = 5.0
PAUSE_Z_EXPECTED: Final = 3.0
PAUSE_MIN_RATIO: Final = 0.5
PAUSE_MIN_RATIO_LOGGED: Final = 0.1
DEFAULT_LOG_SD: Final = 0.10
MAX_PAUSES: Final = 400
MAX_RESTARTS: Final = 100
MAX_PHASES: Final = 50
PHASE_MIN_EFFECT: Final = 0.10
PHASE_Z: Final = 4.0
PHASE_REVISE_RATIO: Final = 0.10
MEAN_ABS_TO_SD: Final = math.sqrt(math.pi / 2.0)
"""Mean absolute deviation to sd for the normal distribution."""
EXCESS_FLOOR_S: Final = 0.05
"""Least noise (s) of an interval's excess over its printed compute time."""
MIN_EXCESSES: Final = 4
"""Steady intervals needed before their excesses set the noise (the resolution stands in)."""


def median(values: Sequence[float]) -> float:
    """The median of ``values`` (not empty), exactly as ``numpy.median`` gives it (the middle
    value, or the mean of the two middle ones; NaN when one is NaN), without numpy: a history
    asks for the medians of its 32 recent intervals for every interval it classifies, where
    numpy's fixed cost per call was most of the work (a service's first cycle reads the logs of
    thousands of jobs)."""
    if any(math.isnan(v) for v in values):
        return math.nan
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return (ordered[middle - 1] + ordered[middle]) / 2.0


def pairwise_sum(values: Sequence[float]) -> float:
    """The sum of ``values`` in the order numpy's pairwise summation adds float64 values (eight
    running sums per block of up to 128, halves beyond), so that ``pairwise_sum(v) / len(v)``
    equals ``numpy.mean(v)`` exactly."""
    n = len(values)
    if n < 8:
        total = 0.0
        for v in values:
            total += v
        return total
    if n > 128:
        half = n // 2
        half -= half % 8
        return pairwise_sum(values[:half]) + pairwise_sum(values[half:])
    sums = [float(v) for v in values[:8]]
    i = 8
    while i < n - n % 8:
        for j in range(8):
            sums[j] += values[i + j]
        i += 8
    total = ((sums[0] + sums[1]) + (sums[2] + sums[3])) + (
        (sums[4] + sums[5]) + (sums[6] + sums[7])
    )
    for v in values[i:]:
        total += v
    return total


@dataclass(frozen=True, slots=True, kw_only=True)
class Pause:
    """A pause of ``duration_s`` seconds beyond the steady pace, made after one of the
    iterations ``after_iteration .. iteration - 1`` (the interval that held it), seen at
    ``time_s`` (epoch s)."""

    after_iteration: int
    iteration: int
    duration_s: float
    time_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RestartRecord:
    """A restart from ``from_iteration`` back to ``to_iteration`` at ``time_s``; ``gap_s`` the
    wall time between the two points (from the job's new start when it waited in a queue),
    ``overhead_s`` the gap plus the iterations done again at the recent pace."""

    from_iteration: int
    to_iteration: int
    time_s: float
    gap_s: float
    overhead_s: float


@dataclass(slots=True, kw_only=True)
class PhaseEvent:
    """A sustained change of pace (module docstring, "Phases"): the job's pace since
    ``start_iteration`` is ``ratio`` times its pace before (1.3: 30 % slower), first seen at
    ``seen_iteration`` and ``seen_time_s`` (epoch s); ``explained_by`` what explains it when
    something does (the service: a flagged straggler rank)."""

    start_iteration: int
    ratio: float
    seen_iteration: int
    seen_time_s: float
    explained_by: str | None = None

    @property
    def description(self) -> str:
        """``job slowed by 35 % since iteration 361`` (or ``sped up by``)."""
        change = abs(self.ratio - 1.0)
        verb = "slowed by" if self.ratio >= 1.0 else "sped up by"
        return f"job {verb} {100 * change:.0f} % since iteration {self.start_iteration}"


@dataclass(slots=True, kw_only=True)
class ProgressHistory:
    """What a job's progress has shown so far (see the module docstring); mutable, updated by
    :meth:`observe` and :meth:`restart`, saved with :meth:`to_json`.

    ``recent``: ``[log step time, iterations, time, end iteration]`` of the last steady
    intervals;
    ``wall_over_logged``: recent ratios of wall to printed compute time; ``excess_s``: the
    recent steady intervals' wall time beyond their printed compute time (s, after the
    ratio); ``pending``: a slow
    interval waiting for the next one (no printed compute time); ``first_iteration`` and
    ``first_time_s``: the first point; ``segment_start``: the iteration the current run of
    points started from (start or last restart); ``steady_iterations``: iterations seen in
    steady intervals; ``integer_times``: every observed time was a whole second;
    ``continues``: the job this one continues (a new job resuming the same run), if any;
    ``phases``: the sustained changes of pace seen (module docstring, "Phases");
    ``expected``: the iteration intervals at which the job's launch says it pauses.
    """

    recent: list[list[float]] = field(default_factory=list)
    wall_over_logged: list[float] = field(default_factory=list)
    excess_s: list[float] = field(default_factory=list)
    pauses: list[Pause] = field(default_factory=list)
    restarts: list[RestartRecord] = field(default_factory=list)
    pending: StepObservation | None = None
    first_iteration: int | None = None
    first_time_s: float | None = None
    segment_start: int | None = None
    steady_iterations: int = 0
    integer_times: bool = True
    continues: str | None = None
    phases: list[PhaseEvent] = field(default_factory=list)
    expected: list[int] = field(default_factory=list)

    # ------------------------------------------------------------------ updates

    def expect(self, intervals: list[int]) -> None:
        """The iteration intervals at which the job's launch says it pauses (evaluations,
        checkpoints); kept until changed."""
        self.expected = sorted({i for i in intervals if i > 0})

    def start(self, iteration: int, time_s: float) -> None:
        """Note the first point of the job (no-op once known)."""
        if self.first_iteration is None:
            self.first_iteration = iteration
            self.first_time_s = time_s
        if self.segment_start is None:
            self.segment_start = iteration

    def observe(self, obs: StepObservation) -> None:
        """Classify one step observation (in log order) and remember what it showed."""
        self.start(obs.iteration - obs.num_iterations, obs.time_s - obs.step_time_s)
        if not float(obs.time_s).is_integer():
            self.integer_times = False
        assert self.segment_start is not None
        if obs.iteration - obs.num_iterations < self.segment_start + WARMUP_ITERATIONS:
            return
        pending, self.pending = self.pending, None
        excess = self._excess(obs)
        if pending is not None:
            if excess is not None:  # slow again: a slower phase, not a pause
                self._steady(pending)
                self._steady(obs)
                return
            self._pause(pending, self._excess(pending, recompute=True) or 0.0)
            self._steady(obs)
            return
        if excess is None:
            self._steady(obs)
        elif obs.logged_step_time_s is not None:
            self._pause(obs, excess)
        else:
            self.pending = obs

    def restart(self, event: Restart, *, start_time_s: float | None = None) -> None:
        """Record a restart; ``start_time_s`` is the job's (new) start when the scheduler gave
        one (a requeued job: the gap is measured from it, not from before its wait)."""
        base = event.from_time_s if event.from_time_s is not None else event.time_s
        if start_time_s is not None and start_time_s > base:
            base = start_time_s
        gap = max(0.0, event.time_s - base)
        redo = max(0, event.from_iteration - event.to_iteration)
        level = self.level_s()
        overhead = gap + (redo * level if level is not None else 0.0)
        self.restarts.append(
            RestartRecord(
                from_iteration=event.from_iteration,
                to_iteration=event.to_iteration,
                time_s=event.time_s,
                gap_s=gap,
                overhead_s=overhead,
            )
        )
        del self.restarts[:-MAX_RESTARTS]
        self.segment_start = event.to_iteration
        self.pending = None

    def note_phase(
        self,
        *,
        start_iteration: int | None,
        ratio: float | None,
        z: float | None,
        iteration: int,
        time_s: float,
    ) -> PhaseEvent | None:
        """Note the phase an estimate reports (``start_iteration``, its pace ``ratio`` to the
        stretch before and ``z``: its shift in long-run sd, ``planner.forecast.level``) at
        ``iteration`` and ``time_s``; returns the new event when it is one (module docstring,
        "Phases"), None when it is none or revises one already noted."""
        if start_iteration is None or ratio is None or z is None or ratio <= 0:
            return None
        if abs(ratio - 1.0) < PHASE_MIN_EFFECT or abs(z) < PHASE_Z:
            return None
        for event in self.phases:
            same_way = (event.ratio > 1.0) == (ratio > 1.0)
            near = abs(start_iteration - event.start_iteration) <= max(
                1.0, PHASE_REVISE_RATIO * event.start_iteration
            )
            if same_way and near:
                event.start_iteration = start_iteration
                event.ratio = ratio
                return None
        event = PhaseEvent(
            start_iteration=start_iteration,
            ratio=ratio,
            seen_iteration=iteration,
            seen_time_s=time_s,
        )
        self.phases.append(event)
        del self.phases[:-MAX_PHASES]
        return event

    # ------------------------------------------------------------------ queries

    def level_s(self) -> float | None:
        """Median steady wall time per iteration of the recent intervals (None: none yet)."""
        if not self.recent:
            return None
        return math.exp(median([r[0] for r in self.recent]))

    def noise_log_sd(self) -> float:
        """Robust per-iteration log-sd of the recent pace (``DEFAULT_LOG_SD`` with < 4)."""
        if len(self.recent) < 4:
            return DEFAULT_LOG_SD
        centre = median([r[0] for r in self.recent])
        res = [(r[0] - centre) * math.sqrt(r[1]) for r in self.recent]
        res_centre = median(res)
        mad = 1.4826 * median([abs(v - res_centre) for v in res])
        return max(mad, 0.01)

    def excluded_iterations(self) -> set[int]:
        """End iterations of the intervals that are not steady pace: pauses and a pending one."""
        out = {p.iteration for p in self.pauses}
        if self.pending is not None:
            out.add(self.pending.iteration)
        return out

    def recent_observations(self) -> list[StepObservation]:
        """The recent steady pace as step observations (for a job that continues another's
        run and has none of its own yet)."""
        return [
            StepObservation(
                iteration=max(1, round(entry[3]) if len(entry) > 3 else k + 1),
                step_time_s=math.exp(entry[0]),
                num_iterations=max(1, round(entry[1])),
                time_s=entry[2],
            )
            for k, entry in enumerate(self.recent)
        ]

    # ------------------------------------------------------------------ internals

    def _reference(self, obs: StepObservation) -> float | None:
        if obs.logged_step_time_s is not None:
            ratio = median(self.wall_over_logged) if self.wall_over_logged else 1.0
            return obs.logged_step_time_s * max(1.0, ratio)
        if len(self.recent) < 3:
            return None
        return self.level_s()

    def _excess(self, obs: StepObservation, *, recompute: bool = False) -> float | None:
        """Seconds the interval took beyond its steady pace when it is slow, else None (with
        ``recompute``: the excess whatever its size)."""
        ref = self._reference(obs)
        if ref is None:
            return None
        n = obs.num_iterations
        excess = n * (obs.step_time_s - ref)
        if recompute:
            return max(0.0, excess)
        resolution = 1.0 if self.integer_times else 0.0
        z = PAUSE_Z_EXPECTED if self._due(obs) else PAUSE_Z
        if obs.logged_step_time_s is not None:
            threshold = max(z * self._excess_sd(resolution), PAUSE_MIN_RATIO_LOGGED * n * ref)
        else:
            noise = math.sqrt(n) * ref * self.noise_log_sd()
            threshold = max(z * noise, PAUSE_MIN_RATIO * n * ref) + resolution
        return excess if excess > threshold else None

    def _due(self, obs: StepObservation) -> bool:
        """The interval holds a moment the launch says the job pauses after (module
        docstring): a multiple of an expected interval in ``[start, end)``."""
        start = obs.iteration - obs.num_iterations
        return any(-(-max(start, 1) // every) * every < obs.iteration for every in self.expected)

    def _excess_sd(self, resolution_s: float) -> float:
        """Robust sd (s) of the recent steady intervals' excess over their printed compute
        time (module docstring); before ``MIN_EXCESSES`` of them, the resolution's (a
        uniform blur of each end: ``resolution / sqrt(6)``) or the floor."""
        if len(self.excess_s) < MIN_EXCESSES:
            return max(EXCESS_FLOOR_S, resolution_s / math.sqrt(6.0))
        values = self.excess_s
        centre = median(values)
        # the mean absolute deviation from the median, scaled to a normal sd: the median
        # absolute deviation collapses to 0 on the few values whole-second ends give
        spread = MEAN_ABS_TO_SD * (pairwise_sum([abs(v - centre) for v in values]) / len(values))
        return max(EXCESS_FLOOR_S, spread)

    def _steady(self, obs: StepObservation) -> None:
        self.recent.append(
            [math.log(obs.step_time_s), float(obs.num_iterations), obs.time_s, obs.iteration]
        )
        del self.recent[:-RECENT]
        if obs.logged_step_time_s is not None and obs.logged_step_time_s > 0:
            ref = self._reference(obs)
            if ref is not None:
                self.excess_s.append(obs.num_iterations * (obs.step_time_s - ref))
                del self.excess_s[:-RECENT]
            self.wall_over_logged.append(obs.step_time_s / obs.logged_step_time_s)
            del self.wall_over_logged[:-RECENT]
        self.steady_iterations += obs.num_iterations

    def _pause(self, obs: StepObservation, excess: float) -> None:
        self.pauses.append(
            Pause(
                after_iteration=obs.iteration - obs.num_iterations,
                iteration=obs.iteration,
                duration_s=excess,
                time_s=obs.time_s,
            )
        )
        del self.pauses[:-MAX_PAUSES]
        self.steady_iterations += obs.num_iterations

    # ------------------------------------------------------------------ JSON

    def to_json(self) -> dict[str, object]:
        """A JSON-safe dict of the history, a :class:`ProgressHistoryJson` (:meth:`from_json`
        reads it back); typed as the store's column (``JobRow.progress_history``) holds it."""
        pending = self.pending
        doc: ProgressHistoryJson = {
            "recent": [list(r) for r in self.recent],
            "wall_over_logged": list(self.wall_over_logged),
            "excess_s": list(self.excess_s),
            "pauses": [
                {
                    "after_iteration": p.after_iteration,
                    "iteration": p.iteration,
                    "duration_s": p.duration_s,
                    "time_s": p.time_s,
                }
                for p in self.pauses
            ],
            "restarts": [
                {
                    "from_iteration": r.from_iteration,
                    "to_iteration": r.to_iteration,
                    "time_s": r.time_s,
                    "gap_s": r.gap_s,
                    "overhead_s": r.overhead_s,
                }
                for r in self.restarts
            ],
            "pending": None
            if pending is None
            else {
                "iteration": pending.iteration,
                "step_time_s": pending.step_time_s,
                "num_iterations": pending.num_iterations,
                "time_s": pending.time_s,
                "logged_step_time_s": pending.logged_step_time_s,
            },
            "first_iteration": self.first_iteration,
            "first_time_s": self.first_time_s,
            "segment_start": self.segment_start,
            "steady_iterations": self.steady_iterations,
            "integer_times": self.integer_times,
            "continues": self.continues,
            "phases": [
                {
                    "start_iteration": p.start_iteration,
                    "ratio": p.ratio,
                    "seen_iteration": p.seen_iteration,
                    "seen_time_s": p.seen_time_s,
                    "explained_by": p.explained_by,
                }
                for p in self.phases
            ],
            "expected": list(self.expected),
        }
        return dict(doc)

    @classmethod
    def from_json(cls, doc: object) -> ProgressHistory:
        """The history a :meth:`to_json` dict holds; an empty one for None or a dict that does
        not read (a stored state from another version starts afresh)."""
        if not doc:
            return cls()
        try:
            stored = object_of(doc)
            pending = stored.get("pending")
            origin = RunOrigin.read(stored)
            return cls(
                recent=[[_number(v) for v in items(r)] for r in items(stored.get("recent", []))],
                wall_over_logged=[_number(v) for v in items(stored.get("wall_over_logged", []))],
                excess_s=[_number(v) for v in items(stored.get("excess_s", []))],
                pauses=[_pause(object_of(p)) for p in items(stored.get("pauses", []))],
                restarts=list(origin.restarts),
                pending=None if not pending else _observation(object_of(pending)),
                first_iteration=origin.first_iteration,
                first_time_s=origin.first_time_s,
                segment_start=optional_integer(stored.get("segment_start")),
                steady_iterations=int(number(stored.get("steady_iterations", 0))),
                integer_times=bool(stored.get("integer_times", True)),
                continues=origin.continues,
                phases=[_phase(object_of(p)) for p in items(stored.get("phases", []))],
                expected=[int(number(v)) for v in items(stored.get("expected", []))],
            )
        except (TypeError, ValueError, KeyError):
            return cls()


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOrigin:
    """Where the run a stored :class:`ProgressHistory` follows began: its first point
    (``first_iteration`` at ``first_time_s``, epoch s), the restarts it holds (at most
    ``MAX_RESTARTS``) and the job whose run it continues (``ProgressHistory.continues``).
    The fields of the history that say whether the job has its whole program ahead, read
    without the rest of it (recent pace, pauses, phases): the queue forecast asks this of
    every job it groups, where reading whole histories doubled the CPU of building its request
    at 10,000 jobs (a history of 400 pauses takes 0.76 ms to read whole)."""

    first_iteration: int | None = None
    first_time_s: float | None = None
    restarts: tuple[RestartRecord, ...] = ()
    continues: str | None = None

    @classmethod
    def from_json(cls, doc: object) -> RunOrigin:
        """The origin a :meth:`ProgressHistory.to_json` dict holds, its four fields read as
        :meth:`ProgressHistory.from_json` reads them; an empty one (no first point, restart or
        run continued) for None or a dict whose four fields do not read, as that history
        starts afresh. Only these fields are read: a dict whose other fields do not read
        (which ``ProgressHistory.from_json`` reads as an empty history) still gives its
        origin."""
        if not doc:
            return cls()
        try:
            return cls.read(object_of(doc))
        except (TypeError, ValueError, KeyError):
            return cls()

    @classmethod
    def read(cls, stored: Mapping[str, object]) -> RunOrigin:
        """The four fields of a stored history's dict (``ProgressHistory.from_json`` reads
        them here too); raises ``TypeError``/``ValueError``/``KeyError`` where one does not
        read."""
        return cls(
            first_iteration=optional_integer(stored.get("first_iteration")),
            first_time_s=optional_real(stored.get("first_time_s")),
            restarts=tuple(_restart(object_of(r)) for r in items(stored.get("restarts", []))),
            continues=_optional_text(stored.get("continues")),
        )


class PauseJson(TypedDict):
    """A :class:`Pause` as stored."""

    after_iteration: int
    iteration: int
    duration_s: float
    time_s: float


class RestartRecordJson(TypedDict):
    """A :class:`RestartRecord` as stored."""

    from_iteration: int
    to_iteration: int
    time_s: float
    gap_s: float
    overhead_s: float


class StepObservationJson(TypedDict):
    """A ``StepObservation`` as stored."""

    iteration: int
    step_time_s: float
    num_iterations: int
    time_s: float
    logged_step_time_s: float | None


class PhaseEventJson(TypedDict):
    """A :class:`PhaseEvent` as stored."""

    start_iteration: int
    ratio: float
    seen_iteration: int
    seen_time_s: float
    explained_by: str | None


class ProgressHistoryJson(TypedDict):
    """A :class:`ProgressHistory` as stored (its fields, in order)."""

    recent: list[list[float]]
    wall_over_logged: list[float]
    excess_s: list[float]
    pauses: list[PauseJson]
    restarts: list[RestartRecordJson]
    pending: StepObservationJson | None
    first_iteration: int | None
    first_time_s: float | None
    segment_start: int | None
    steady_iterations: int
    integer_times: bool
    continues: str | None
    phases: list[PhaseEventJson]
    expected: list[int]


def _pause(stored: Mapping[str, object]) -> Pause:
    return Pause(
        after_iteration=integer(stored["after_iteration"]),
        iteration=integer(stored["iteration"]),
        duration_s=real(stored["duration_s"]),
        time_s=real(stored["time_s"]),
    )


def _restart(stored: Mapping[str, object]) -> RestartRecord:
    return RestartRecord(
        from_iteration=integer(stored["from_iteration"]),
        to_iteration=integer(stored["to_iteration"]),
        time_s=real(stored["time_s"]),
        gap_s=real(stored["gap_s"]),
        overhead_s=real(stored["overhead_s"]),
    )


def _observation(stored: Mapping[str, object]) -> StepObservation:
    return StepObservation(
        iteration=integer(stored["iteration"]),
        step_time_s=real(stored["step_time_s"]),
        num_iterations=integer(stored.get("num_iterations", 1)),
        time_s=real(stored["time_s"]),
        logged_step_time_s=optional_real(stored.get("logged_step_time_s")),
    )


def _phase(stored: Mapping[str, object]) -> PhaseEvent:
    return PhaseEvent(
        start_iteration=integer(stored["start_iteration"]),
        ratio=real(stored["ratio"]),
        seen_iteration=integer(stored["seen_iteration"]),
        seen_time_s=real(stored["seen_time_s"]),
        explained_by=_optional_text(stored.get("explained_by")),
    )


def _number(value: object) -> float:
    """:func:`planner.forecast.stored.number` of a stored value, a float taken as it is
    without the abstract number check (a history holds about 200 of them, read a few times per
    job and cycle)."""
    return value if type(value) is float else number(value)


def _optional_text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"not text: {type(value).__name__}")
