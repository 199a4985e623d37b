"""The stored form of a job's progress history (``planner.forecast.history``): each record's
JSON TypedDict, which types ``ProgressHistory.to_json``, names the record's fields in order,
so that a field added to a record is stored (or this fails), and a history reads back as it
was saved."""

from __future__ import annotations

import dataclasses

import pytest

from planner.forecast.history import (
    Pause,
    PauseJson,
    PhaseEvent,
    PhaseEventJson,
    ProgressHistory,
    ProgressHistoryJson,
    RestartRecord,
    RestartRecordJson,
    StepObservationJson,
)
from planner.forecast.values import StepObservation

PAIRS = [
    (Pause, PauseJson),
    (RestartRecord, RestartRecordJson),
    (StepObservation, StepObservationJson),
    (PhaseEvent, PhaseEventJson),
    (ProgressHistory, ProgressHistoryJson),
]


@pytest.mark.parametrize(("record", "stored"), PAIRS, ids=lambda t: t.__name__)
def test_a_stored_record_names_the_record_fields_in_order(record: type, stored: type) -> None:
    assert list(stored.__annotations__) == [f.name for f in dataclasses.fields(record)]


def test_a_saved_history_with_every_record_reads_back_as_it_was() -> None:
    history = ProgressHistory(
        pauses=[Pause(after_iteration=10, iteration=12, duration_s=30.0, time_s=100.0)],
        restarts=[
            RestartRecord(
                from_iteration=50, to_iteration=40, time_s=200.0, gap_s=60.0, overhead_s=90.0
            )
        ],
        pending=StepObservation(
            iteration=60, step_time_s=1.5, num_iterations=2, time_s=300.0, logged_step_time_s=1.2
        ),
        phases=[
            PhaseEvent(
                start_iteration=20, ratio=1.3, seen_iteration=25, seen_time_s=150.0,
                explained_by="rank 3",
            )
        ],
        expected=[100],
    )  # fmt: skip
    saved = history.to_json()
    assert list(saved) == list(ProgressHistoryJson.__annotations__)
    assert ProgressHistory.from_json(saved) == history
