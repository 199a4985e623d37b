"""What happened in a job's run besides its training steps, as ``GET /v1/jobs/{id}`` lists it
(``events``): its sustained changes of pace (phases), its pauses (evaluations, checkpoints,
stalls) and its restarts, from the progress history the ingest loop keeps
(``planner.forecast.history``), oldest first.

The three are told apart where they are found: a pause is an interval that took longer than
its steady pace and is left out of the pace (an evaluation or a checkpoint when its interval
holds a multiple of the interval the job's launch states for one, ``planner.forecast.arguments``);
a phase is a sustained change of the pace itself, searched for after the pauses are left out;
a phase that a flagged straggler rank explains says so (``explained_by``).
"""

from __future__ import annotations

from typing import Final

from planner.forecast.history import Pause, ProgressHistory
from planner.service.api.models import JobEvent
from planner.service.loops.eta import schedule_of
from planner.service.models import JobRow

MAX_EVENTS: Final = 200
"""Newest events listed."""


def _holds_multiple(pause: Pause, interval: int | None) -> bool:
    """The pause's interval holds a multiple of ``interval`` after which it was made."""
    if not interval:
        return False
    first = -(-max(pause.after_iteration, 1) // interval) * interval
    return first < max(pause.iteration, pause.after_iteration + 1)


def pause_kind(pause: Pause, eval_interval: int | None, save_interval: int | None) -> str:
    """``evaluation``, ``checkpoint``, ``evaluation and checkpoint`` or ``pause``."""
    kinds = [
        name
        for name, interval in (("evaluation", eval_interval), ("checkpoint", save_interval))
        if _holds_multiple(pause, interval)
    ]
    return " and ".join(kinds) or "pause"


def job_events(row: JobRow) -> list[JobEvent]:
    """The job's events, oldest first, the newest ``MAX_EVENTS`` (module docstring)."""
    if not row.progress_history:
        return []
    history = ProgressHistory.from_json(row.progress_history)
    schedule = schedule_of(row)
    eval_interval = None if schedule is None else schedule.eval_interval
    save_interval = None if schedule is None else schedule.save_interval
    events: list[JobEvent] = []
    for phase in history.phases:
        events.append(
            JobEvent(
                kind="phase",
                iteration=phase.start_iteration,
                time_s=phase.seen_time_s,
                seen_iteration=phase.seen_iteration,
                ratio=phase.ratio,
                explained_by=phase.explained_by,
                description=phase.description
                + (f" (explained by {phase.explained_by})" if phase.explained_by else ""),
            )
        )
    for pause in history.pauses:
        kind = pause_kind(pause, eval_interval, save_interval)
        events.append(
            JobEvent(
                kind=kind,
                iteration=pause.after_iteration,
                time_s=pause.time_s,
                until_iteration=pause.iteration,
                duration_s=pause.duration_s,
                description=f"{kind} of {pause.duration_s:.1f} s after iteration "
                f"{pause.after_iteration}"
                + (
                    f" (between iterations {pause.after_iteration} and {pause.iteration})"
                    if pause.iteration - pause.after_iteration > 1 and kind == "pause"
                    else ""
                ),
            )
        )
    for restart in history.restarts:
        events.append(
            JobEvent(
                kind="restart",
                iteration=restart.to_iteration,
                time_s=restart.time_s,
                from_iteration=restart.from_iteration,
                duration_s=restart.overhead_s,
                description=f"restarted from iteration {restart.from_iteration} back to "
                f"{restart.to_iteration} ({restart.overhead_s:.0f} s lost)",
            )
        )
    events.sort(key=lambda e: (e.time_s, e.iteration))
    return events[-MAX_EVENTS:]
