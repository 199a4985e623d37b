"""The progress history's statistics without numpy give numpy's values exactly: the median
of the recent pace and of its residuals, and the mean absolute deviation of the excesses."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from planner.forecast.history import MEAN_ABS_TO_SD, ProgressHistory, median, pairwise_sum
from planner.forecast.values import StepObservation

FINITE = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False)


@given(st.lists(FINITE, min_size=1, max_size=300))
def test_median_and_mean_equal_numpy(values: list[float]) -> None:
    assert median(values) == float(np.median(values))
    assert pairwise_sum(values) / len(values) == float(np.mean(values))


@given(st.lists(st.floats(), min_size=1, max_size=40))
def test_median_of_any_floats_equals_numpy(values: list[float]) -> None:
    expected = float(np.median(values))
    got = median(values)
    assert got == expected or (math.isnan(got) and math.isnan(expected))


@given(
    st.lists(
        st.tuples(
            st.floats(min_value=0.05, max_value=20.0),
            st.integers(min_value=1, max_value=50),
            st.one_of(st.none(), st.floats(min_value=0.05, max_value=20.0)),
        ),
        min_size=1,
        max_size=80,
    )
)
def test_history_noise_is_numpys(steps: list[tuple[float, int, float | None]]) -> None:
    history = ProgressHistory()
    iteration, time_s = 0, 1_800_000_000.25
    for step_s, num_iterations, logged_s in steps:
        iteration += num_iterations
        time_s += step_s * num_iterations
        history.observe(
            StepObservation(
                iteration=iteration,
                step_time_s=step_s,
                num_iterations=num_iterations,
                time_s=time_s,
                logged_step_time_s=logged_s,
            )
        )
    if history.recent:
        logs = np.array([r[0] for r in history.recent])
        assert history.level_s() == math.exp(float(np.median(logs)))
    if len(history.recent) >= 4:
        y = np.array([r[0] for r in history.recent])
        n = np.array([r[1] for r in history.recent])
        res = (y - np.median(y)) * np.sqrt(n)
        mad = 1.4826 * float(np.median(np.abs(res - np.median(res))))
        assert history.noise_log_sd() == max(mad, 0.01)
    if len(history.excess_s) >= 4:
        values = np.array(history.excess_s)
        spread = MEAN_ABS_TO_SD * float(np.mean(np.abs(values - np.median(values))))
        assert history._excess_sd(0.0) == max(0.05, spread)
