"""Robust random-effects estimates of many groups of log ratios at once (vectorized, pure).

The statistics behind ``planner.calibration.online`` (its module docstring, steps 1-5): per
group, a weighted median of the jobs' log ratios refined by a Huber M-estimate (Huber 1964),
iteratively reweighted; the between-job spread ``tau`` from the weighted MAD (Rousseeuw & Croux
1993) shrunk toward a prior as with a scaled-inverse-chi^2 prior (Gelman et al., *Bayesian Data
Analysis*, 3rd ed., 2013, §3.3); the standard error of the location from the final weights.
One pass over all groups: two sorts, no Python loop over groups.
"""

from __future__ import annotations

from typing import Final

import numpy as np
from numpy.typing import NDArray

from planner.forecast.eta import MAD_TO_SD

__all__ = ["HUBER_ITERATIONS", "Float", "Int", "group_estimates", "weighted_median"]

HUBER_ITERATIONS: Final = 8
"""IRLS steps of the Huber estimate, started from the weighted median (a fixed count keeps the
vectorized pass branch-free; each step moves the estimate less, Huber 1981 §7.8)."""
_MIN_WEIGHT: Final = 1e-300

Float = NDArray[np.float64]
Int = NDArray[np.int64]


def group_estimates(
    group: Int,
    y: Float,
    n: Float,
    t: Float,
    *,
    num_groups: int,
    half_life_s: float,
    iterations_half_weight: float,
    prior_spread_log_sd: float,
    prior_spread_dof: float,
    huber_k: float,
) -> tuple[Float, Float, Float, Int, Float]:
    """Robust random-effects estimates for many groups at once (module docstring, steps 1-5).

    Inputs, shape ``(J,)`` for ``J`` jobs: ``group`` ids in ``[0, num_groups)`` (every id present),
    log ratios ``y``, iteration counts ``n`` (>= 1), times ``t`` (epoch s). Returns arrays of shape
    ``(num_groups,)``: mean log ratio ``mu``, spread ``tau``, standard error ``se``, job count and
    newest time. Cost O(J log J): two sorts, no Python loop over groups.
    """
    count = np.bincount(group, minlength=num_groups).astype(np.int64)
    latest = np.full(num_groups, -np.inf)
    np.maximum.at(latest, group, t)
    decay = np.power(0.5, (latest[group] - t) / half_life_s)
    saturation = n / (n + iterations_half_weight)
    a = np.maximum(decay * saturation, _MIN_WEIGHT)

    median = weighted_median(group, y, a, num_groups)
    sum_a = np.bincount(group, weights=a, minlength=num_groups)
    sum_a2 = np.bincount(group, weights=a * a, minlength=num_groups)
    m_eff = sum_a * sum_a / sum_a2
    mad = MAD_TO_SD * weighted_median(group, np.abs(y - median[group]), a, num_groups)
    dof = np.maximum(m_eff - 1.0, 0.0)
    tau = np.sqrt(
        (prior_spread_dof * prior_spread_log_sd**2 + dof * mad * mad) / (prior_spread_dof + dof)
    )

    sd_job = tau[group] / np.sqrt(saturation)
    mu = median
    w = a
    for _ in range(HUBER_ITERATIONS):
        residual = np.abs(y - mu[group])
        huber = np.minimum(1.0, huber_k * sd_job / np.maximum(residual, 1e-300))
        w = a * huber
        mu = np.bincount(group, weights=w * y, minlength=num_groups) / np.bincount(
            group, weights=w, minlength=num_groups
        )
    sum_w = np.bincount(group, weights=w, minlength=num_groups)
    var_num = np.bincount(group, weights=w * w * sd_job * sd_job, minlength=num_groups)
    se = np.sqrt(var_num) / sum_w
    return mu, tau, se, count, latest


def weighted_median(group: Int, values: Float, weights: Float, num_groups: int) -> Float:
    """Per-group weighted median, interpolated between the midpoints of the cumulative weights
    (two equal weights give the mean; one value gives itself). ``weights`` > 0."""
    order = np.lexsort((values, group))
    g = group[order]
    v = values[order]
    w = weights[order]
    cum = np.cumsum(w)
    mid = cum - 0.5 * w  # strictly increasing
    starts = np.searchsorted(g, np.arange(num_groups), side="left")
    ends = np.searchsorted(g, np.arange(num_groups), side="right") - 1
    before = cum[starts] - w[starts]
    total = cum[ends] - before
    target = before + 0.5 * total
    j = np.clip(np.searchsorted(mid, target, side="left"), starts, ends)
    prev = np.maximum(j - 1, starts)
    span = mid[j] - mid[prev]
    inside = (j > starts) & (mid[j] >= target) & (span > 0)
    frac = np.where(inside, (target - mid[prev]) / np.where(span > 0, span, 1.0), 1.0)
    result: Float = v[prev] + frac * (v[j] - v[prev])
    return result
