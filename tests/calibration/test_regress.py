"""OperatorRegressor: scikit-learn contract, CV selection, determinism."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import KFold

from planner.calibration import OperatorRegressor
from planner.errors import CalibrationError


def _power_law(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(4, 12, size=(n, 3))
    y = 0.7 * x[:, 0] + 0.3 * x[:, 1] + 0.5 * x[:, 2] - 20 + rng.normal(0, 0.01, n)
    return x, y


def test_selects_power_law_on_power_law_data_and_predicts_held_out() -> None:
    x, y = _power_law(40, 0)
    reg = OperatorRegressor(candidates=("power_law", "forest"), num_folds=4).fit(x, y)
    assert reg.selected_ == "power_law"
    assert reg.cv_rmse_["power_law"] < reg.cv_rmse_["forest"]
    xt, yt = _power_law(10, 1)
    assert np.max(np.abs(reg.predict(xt) - yt)) < 0.05


def test_estimator_contract_and_determinism() -> None:
    reg = OperatorRegressor(candidates=("boosting",), random_state=3)
    assert reg.get_params() == {"candidates": ("boosting",), "num_folds": 5, "random_state": 3}
    x, y = _power_law(20, 2)
    a = clone(reg).fit(x, y).predict(x)
    b = clone(reg).fit(x, y).predict(x)
    assert np.array_equal(a, b)


def test_errors() -> None:
    with pytest.raises(CalibrationError, match="not fitted"):
        OperatorRegressor().predict(np.zeros((1, 3)))
    with pytest.raises(CalibrationError, match=">= 2 rows"):
        OperatorRegressor().fit(np.zeros((1, 3)), np.zeros(1))
    with pytest.raises(CalibrationError, match="unknown regressor candidate"):
        OperatorRegressor(candidates=("svm", "power_law")).fit(*_power_law(10, 0))


def test_cv_rmse_pools_every_held_out_row_over_seeded_folds() -> None:
    # 23 rows in 5 folds of 5,5,5,4,4 rows: a plain mean of per-fold scores would differ.
    x, y = _power_law(23, 4)
    reg = OperatorRegressor(candidates=("power_law", "quadratic"), random_state=7).fit(x, y)
    for name in ("power_law", "quadratic"):
        sq = 0.0
        for train, test in KFold(n_splits=5, shuffle=True, random_state=7).split(x):
            model = _unfitted(name).fit(x[train], y[train])
            sq += float(np.sum((model.predict(x[test]) - y[test]) ** 2))
        assert reg.cv_rmse_[name] == pytest.approx(math.sqrt(sq / len(y)), rel=1e-12)


def _unfitted(name: str) -> Any:
    """The candidate's scikit-learn estimator, unfitted (a one-candidate fit skips CV)."""
    return clone(OperatorRegressor(candidates=(name,)).fit(*_power_law(6, 0)).estimator_)
