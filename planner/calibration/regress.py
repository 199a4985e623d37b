"""Per-operator regressors chosen by cross-validation (scikit-learn estimator contract).

``OperatorRegressor`` predicts log time from log-shape features (``operator_features``). Its
``fit`` scores each candidate by k-fold cross-validated RMSE of log time (the folds and scores of
scikit-learn's ``cross_val_score`` over one seeded shuffled ``KFold``) and keeps the best,
refitted on all the data given; after ``fit`` it has ``selected_`` (candidate name),
``cv_rmse_`` (candidate -> CV RMSE, natural-log units) and ``estimator_``. The candidates are
small on purpose (Zhang et al. 2025 use random forests / XGBoost per operator):

* ``power_law``: ridge regression on the log features (time a power law of the dimensions);
* ``quadratic``: ridge on degree-2 polynomials of the log features (curvature: small shapes
  bound by launch overhead, large ones by throughput);
* ``boosting``: gradient-boosted trees (``GradientBoostingRegressor``);
* ``forest``: a random forest (``RandomForestRegressor``).

Every candidate is deterministic for a fixed ``random_state`` (``n_jobs=1``), so a fitted model
is persisted as *data*, its training samples and hyper-parameters, and refitted identically on
load (``planner.calibration.model``): no pickles.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor
from sklearn.linear_model import Ridge
from sklearn.metrics import mean_squared_error
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures, StandardScaler

from planner.calibration.ops import OP_DIMS, OpKey, OpKind, op_bytes, op_flops
from planner.errors import CalibrationError
from planner.search.budget import checkpoint

__all__ = [
    "CANDIDATES",
    "OperatorRegressor",
    "feature_names",
    "fit_stoppable",
    "operator_features",
]

FloatArray = NDArray[np.float64]

CANDIDATES: tuple[str, ...] = ("power_law", "quadratic", "boosting", "forest")


def _make(name: str, random_state: int) -> Any:
    if name == "power_law":
        return make_pipeline(StandardScaler(), Ridge(alpha=1e-3))
    if name == "quadratic":
        return make_pipeline(
            PolynomialFeatures(2, include_bias=False), StandardScaler(), Ridge(alpha=1e-1)
        )
    if name == "boosting":
        return GradientBoostingRegressor(
            n_estimators=150, max_depth=3, learning_rate=0.05, random_state=random_state
        )
    if name == "forest":
        return RandomForestRegressor(
            n_estimators=60, min_samples_leaf=2, random_state=random_state, n_jobs=1
        )
    raise CalibrationError(f"unknown regressor candidate {name!r}; use one of {CANDIDATES}")


def feature_names(key: OpKey | str) -> tuple[str, ...]:
    """Names of the columns ``operator_features`` returns for ``key``."""
    if isinstance(key, str):
        if key == "memory/pooled":
            return ("log2_elements",)
        key = OpKey.parse(key)
    dims = OP_DIMS[key.op]
    if key.op is OpKind.ATTENTION:
        dims = ("batch_heads", "seq", "head_dim")
    return (
        *(f"log2_{d}" for d in dims),
        "log2_flop",
        "log2_bytes",
        "log2_intensity",
        "dtype_bytes",
    )


def operator_features(
    key: OpKey, dims: dict[str, FloatArray], dtype_bytes: FloatArray | float
) -> FloatArray:
    """Feature matrix ``(num_rows, num_features)`` of calls of ``key`` (``feature_names``).

    ``dims`` maps each of ``OP_DIMS[key.op]`` to an array of sizes (broadcast together);
    attention's ``batch`` and ``heads`` enter as their product.
    """
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in dims.items()}
    flop = op_flops(key.op, key.pass_, arrays)
    nbytes = op_bytes(key.op, key.pass_, arrays, dtype_bytes)
    names = OP_DIMS[key.op]
    cols = [arrays[n] for n in names]
    if key.op is OpKind.ATTENTION:
        cols = [arrays["batch"] * arrays["heads"], arrays["seq"], arrays["head_dim"]]
    shape = np.broadcast(*cols, flop, nbytes, np.asarray(dtype_bytes)).shape
    out = [np.log2(np.broadcast_to(c, shape)) for c in cols]
    out.append(np.log2(np.broadcast_to(np.maximum(flop, 1.0), shape)))
    out.append(np.log2(np.broadcast_to(np.maximum(nbytes, 1.0), shape)))
    out.append(out[-2] - out[-1])
    out.append(np.broadcast_to(np.asarray(dtype_bytes, dtype=np.float64), shape))
    return np.stack([o.reshape(-1) for o in out], axis=1)


def _cv_rmse(
    candidates: tuple[str, ...], x: FloatArray, t: FloatArray, num_folds: int, random_state: int
) -> dict[str, float]:
    """Candidate -> k-fold cross-validated RMSE of ``t`` (scikit-learn's ``cross_val_score``).

    The folds are one shuffled ``KFold`` (seeded by ``random_state``) shared by all candidates.
    The RMSE pools the squared errors of every held-out row (each row is held out once), so the
    per-fold mean squared errors are weighted by fold size: sqrt(sum_k n_k * MSE_k / n).
    """
    folds = KFold(n_splits=num_folds, shuffle=True, random_state=random_state)
    splits = list(folds.split(x))
    sizes = np.array([len(test) for _, test in splits], dtype=np.float64)
    scores: dict[str, float] = {}
    for name in candidates:
        # cross_val_score's folds and scores, fitted here so a budget can stop each fit
        mse = []
        for train, test in splits:
            model = fit_stoppable(_make(name, random_state), x[train], t[train])
            mse.append(mean_squared_error(t[test], model.predict(x[test])))
        scores[name] = math.sqrt(float(sizes @ np.asarray(mse)) / float(sizes.sum()))
    return scores


def _stop_between_stages(_stage: int, _model: Any, _locals: Any) -> bool:
    """A ``GradientBoostingRegressor.fit`` monitor: raises when the caller's budget says stop
    (never stops the fit early otherwise, so the model is the one fitted without it)."""
    checkpoint()
    return False


def fit_stoppable(model: Any, x: FloatArray, t: FloatArray) -> Any:
    """``model.fit(x, t)`` that stops within one tree (or one boosting stage) when the
    caller's budget (``planner.search.budget``) says so, with the same fitted model: a random
    forest grows with ``warm_start`` one tree per call (scikit-learn draws each tree's seed as
    a single fit would), gradient boosting looks at the budget after each stage."""
    checkpoint()
    if isinstance(model, RandomForestRegressor):
        total = model.n_estimators
        model.set_params(warm_start=True)
        for grown in range(1, total + 1):
            model.set_params(n_estimators=grown)
            model.fit(x, t)
            checkpoint()
        model.set_params(warm_start=False)
        return model
    if isinstance(model, GradientBoostingRegressor):
        return model.fit(x, t, monitor=_stop_between_stages)
    model.fit(x, t)
    checkpoint()
    return model


class OperatorRegressor(RegressorMixin, BaseEstimator):  # type: ignore[misc]
    """Chooses among ``candidates`` by ``num_folds``-fold CV RMSE of log time (module docstring).

    ``fit(X, y)``: ``X`` features ``(n, f)``, ``y`` natural-log seconds ``(n,)``; needs
    ``n >= 2`` (below ``2 · num_folds`` rows the folds shrink; below 6 rows only
    ``power_law`` is tried, without CV). ``predict(X)`` returns log seconds.
    """

    def __init__(
        self,
        candidates: tuple[str, ...] = CANDIDATES,
        num_folds: int = 5,
        random_state: int = 0,
    ) -> None:
        self.candidates = candidates
        self.num_folds = num_folds
        self.random_state = random_state

    def fit(self, X: FloatArray, y: FloatArray) -> OperatorRegressor:  # noqa: N803
        """Select a candidate by CV and refit it on all of ``X, y``."""
        x = np.asarray(X, dtype=np.float64)
        t = np.asarray(y, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] != t.shape[0] or x.shape[0] < 2:
            raise CalibrationError(f"need >= 2 rows of features and targets, got {x.shape}")
        n = x.shape[0]
        scores: dict[str, float] = {}
        candidates = tuple(self.candidates) if n >= 6 else ("power_law",)
        if len(candidates) > 1:
            scores = _cv_rmse(candidates, x, t, min(self.num_folds, n // 2), self.random_state)
            best = min(candidates, key=lambda c: (scores[c], candidates.index(c)))
        else:
            best = candidates[0]
            scores[best] = math.nan
        self.cv_rmse_ = scores
        self.selected_ = best
        self.estimator_ = fit_stoppable(_make(best, self.random_state), x, t)
        self.n_features_in_ = x.shape[1]
        return self

    def predict(self, X: FloatArray) -> FloatArray:  # noqa: N803
        """Log seconds for each row of ``X``."""
        if not hasattr(self, "estimator_"):
            raise CalibrationError("OperatorRegressor is not fitted; call fit first")
        out: FloatArray = np.asarray(self.estimator_.predict(np.asarray(X, dtype=np.float64)))
        return out
