"""How an ETA estimate is stored: ``eta_to_dict`` gives what ``dataclasses.asdict`` gives
(nested dataclasses as dicts, tuples kept as tuples, non-finite floats as None) without
deep-copying its numbers and strings one by one."""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import pytest

from planner.forecast.eta import EtaEstimate
from planner.forecast.pauses import PauseForecast, PausePeriod
from planner.forecast.values import EtaMethod, Quantiles
from planner.service.loops.eta import eta_to_dict


def estimates() -> list[EtaEstimate]:
    running = EtaEstimate(
        method=EtaMethod.OBSERVED,
        step_time_s=Quantiles(p10=1.0, p50=1.2, p90=1.5),
        remaining_s=Quantiles(p10=100.0, p50=120.0, p90=150.0),
        completion_time_s=Quantiles(p10=1_800_000_100.0, p50=1_800_000_120.0, p90=1_800_000_150.0),
        progress_ratio=0.25,
        iteration=250,
        train_iters=1000,
        num_observations=12,
        prior_step_time_s=1.1,
        prior_log_sd=0.2,
        observed_step_time_s=math.inf,
        conflict_z=math.nan,
        pauses_s=30.0,
        pauses=PauseForecast(
            mean_s=30.0,
            var_s2=4.0,
            periods=(
                PausePeriod(
                    interval=100,
                    per_slot_s=10.0,
                    slots_seen=2,
                    slots_ahead=3,
                    source="history",
                    kind="checkpoint",
                ),
            ),
        ),
        model_remaining_s=Quantiles(p10=90.0, p50=110.0, p90=160.0),
        band_calibrated=True,
    )
    pending = EtaEstimate(
        method=EtaMethod.PRIOR,
        step_time_s=Quantiles(p10=2.0, p50=2.0, p90=2.0),
        remaining_s=Quantiles(p10=2000.0, p50=2000.0, p90=2000.0),
        completion_time_s=None,
        progress_ratio=None,
        iteration=None,
        train_iters=1000,
        num_observations=0,
    )
    return [running, pending]


def reference(eta: EtaEstimate) -> dict[str, Any]:
    """The conversion by ``dataclasses.asdict`` (how estimates were stored before), its
    non-finite top-level floats as None (the nested ones here are finite)."""
    made = dataclasses.asdict(eta)
    return {
        k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in made.items()
    }


@pytest.mark.parametrize("index", [0, 1])
def test_eta_to_dict_is_what_asdict_gives(index: int) -> None:
    eta = estimates()[index]
    made, expected = eta_to_dict(eta), reference(eta)
    assert made == expected
    assert repr(made) == repr(expected)  # the same types too (a tuple stays a tuple)
    if index == 0:
        assert made["observed_step_time_s"] is None
        assert made["conflict_z"] is None
        assert isinstance(made["pauses"], dict)
        assert isinstance(made["pauses"]["periods"], tuple)


def test_eta_to_dict_copies_no_leaf(monkeypatch: pytest.MonkeyPatch) -> None:
    copies = []
    deepcopy = copy.deepcopy

    def counted(value: Any, memo: Any = None) -> Any:
        copies.append(value)
        return deepcopy(value, memo)

    monkeypatch.setattr(copy, "deepcopy", counted)
    for eta in estimates():
        eta_to_dict(eta)
    assert copies == []
