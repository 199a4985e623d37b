"""The residual model of the observed-runs calibration: what the per-group factors leave, as a
function of documented features of the run (scikit-learn estimator contract; pure).

After the nested compute and network factors (``planner.calibration.observed_fit``), a run's
log error may still follow its configuration across groups: the model's error grows with the
share of exposed communication, with the pipeline bubble, with the GPU count, or differs for
MoE or recomputed runs. ``ResidualModel`` learns ``log(observed / corrected)`` as a linear
function of ``FEATURES`` and is kept only where cross-validation says it helps:

* candidates: ``none`` (no correction) and ridge regression (Hoerl & Kennard 1970) on the
  standardised features for each penalty of ``alphas``; the penalty shrinks the coefficients
  toward 0, the prior, the more the fewer runs there are;
* each is scored by its cross-validated mean squared error over whole groups (``groups``: the
  runs' keys, ``GroupKFold`` with up to 5 folds): the residual model is what carries over to
  runs of other keys, so a trend that only fits the keys it saw is not kept; without groups,
  by leave-one-out (exact for ridge in one fit: Golub, Heath & Wahba 1979, scikit-learn's
  ``RidgeCV``);
* the simplest candidate within one standard error of the best is kept (the one-standard-error
  rule; Hastie, Tibshirani & Friedman, *The Elements of Statistical Learning*, 2nd ed., 2009,
  §7.10), and ``none`` below ``min_runs`` runs.

Features are clipped to the range seen in training before use, so a scenario far outside the
observed runs gets the correction of the nearest seen value, never an extrapolated one. The
fitted model is data (``to_json``): means, scales, ranges, coefficients; no pickles.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypedDict

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.linear_model import Ridge, RidgeCV
from sklearn.model_selection import GroupKFold

from planner.errors import CalibrationError
from planner.specs.scenario import Scenario

__all__ = [
    "FEATURES",
    "ResidualModel",
    "ResidualModelJson",
    "beats_by_one_se",
    "check_features",
    "run_features",
]

Float = NDArray[np.float64]

FEATURES: Final = (
    "network_share",
    "bubble_share",
    "optimizer_share",
    "log2_num_gpus",
    "log2_tokens_per_microbatch",
    "log2_seq_per_context_rank",
    "log2_hidden_per_tensor_rank",
    "moe",
    "low_precision",
    "recompute",
    "zero3",
)
"""The documented features of a run, in column order (``run_features``):

* ``network_share``: exposed communication (``tp/cp/ep/pp/dp_comm_exposed``) over the
  predicted step;
* ``bubble_share``: ``pp_bubble`` over the predicted step;
* ``optimizer_share``: ``optimizer`` over the predicted step;
* ``log2_num_gpus``: log2 of ``hardware.num_gpus``;
* ``log2_tokens_per_microbatch``: log2 of ``micro_batch_size · seq_length / context_parallel``,
  the rows of each rank's GEMMs;
* ``log2_seq_per_context_rank``: log2 of ``seq_length / context_parallel``, the tokens of one
  sequence on a rank (attention's cost per token grows with it, the GEMMs' does not: one
  token count at two sequence lengths is two configurations);
* ``log2_hidden_per_tensor_rank``: log2 of ``hidden_size / tensor_parallel``, their width;
* ``moe``: 1 with routed experts, else 0;
* ``low_precision``: 1 for fp8 / mxfp8 / nvfp4 GEMMs, else 0;
* ``recompute``: 0 none, 0.5 selective, 1 full;
* ``zero3``: 1 when the weights are sharded (ZeRO-3 / FSDP), else 0."""

_RECOMPUTE: Final = {"none": 0.0, "selective": 0.5, "full": 1.0}
_NETWORK: Final = (
    "tp_comm_exposed",
    "cp_comm_exposed",
    "ep_comm_exposed",
    "pp_comm_exposed",
    "dp_comm_exposed",
)


def run_features(scenario: Scenario, breakdown: Mapping[str, float]) -> tuple[float, ...]:
    """``FEATURES`` of one run: its parsed scenario and the model's ``breakdown_s`` (seconds).
    Raises ``CalibrationError`` when the breakdown's total is not positive."""
    total = sum(float(v) for v in breakdown.values())
    if not (math.isfinite(total) and total > 0):
        raise CalibrationError(f"breakdown_s sums to {total}, not a positive step time")
    model, par, hw = scenario.model, scenario.parallelism, scenario.hardware
    network = sum(float(breakdown.get(t, 0.0)) for t in _NETWORK)
    tokens = par.micro_batch_size * model.seq_length / par.context_parallel
    return (
        network / total,
        float(breakdown.get("pp_bubble", 0.0)) / total,
        float(breakdown.get("optimizer", 0.0)) / total,
        math.log2(hw.num_gpus),
        math.log2(max(tokens, 1.0)),
        math.log2(max(model.seq_length / par.context_parallel, 1.0)),
        math.log2(max(model.hidden_size / par.tensor_parallel, 1.0)),
        1.0 if model.num_experts > 0 else 0.0,
        0.0 if par.low_precision_recipe is None else 1.0,
        _RECOMPUTE[par.recompute.value],
        1.0 if par.zero_stage == 3 else 0.0,
    )


def beats_by_one_se(reference: Float, candidate: Float) -> bool:
    """True when ``candidate``'s squared held-out errors beat ``reference``'s paired ones by
    more than one standard error of their mean difference (the one-standard-error rule, ESL
    §7.10); shapes ``(n,)``, ``n >= 2``."""
    diff = reference - candidate
    return float(diff.mean()) > float(diff.std(ddof=1) / math.sqrt(diff.size))


def check_features(names: Sequence[str], what: str) -> None:
    """Raise ``CalibrationError`` naming ``what`` and the fix when a stored model was fitted
    on other features than ``FEATURES``."""
    if list(names) != list(FEATURES):
        raise CalibrationError(
            f"{what}: fitted on features {list(names)}, this planner computes "
            f"{list(FEATURES)}; run `planner calibrate observe` again"
        )


class ResidualModelJson(TypedDict):
    """``ResidualModel.to_json``: the ``features`` it was fitted on (``FEATURES``), the
    ``selected`` candidate, its ridge ``alpha``, ``cv_mse`` by candidate, ``num_runs``, the
    per-feature ``mean``, ``scale``, ``low``, ``high`` and ``coef``, the ``intercept`` (log
    correction), and the hyper-parameters ``alphas`` and ``min_runs``."""

    features: list[str]
    selected: str
    alpha: float
    cv_mse: dict[str, float]
    num_runs: int
    mean: list[float]
    scale: list[float]
    low: list[float]
    high: list[float]
    coef: list[float]
    intercept: float
    alphas: list[float]
    min_runs: int


class ResidualModel(BaseEstimator, RegressorMixin):  # type: ignore[misc]
    """Ridge or nothing on ``FEATURES``, chosen by cross-validated error (module docstring).

    ``fit(X, y, groups=None)``: ``X`` shape ``(n, len(FEATURES))``, ``y`` shape ``(n,)`` log
    residuals, ``groups`` shape ``(n,)`` the runs' group ids (folds keep a group together).
    Learnt: ``selected_`` (``none`` or ``ridge``), ``cv_mse_`` (candidate -> cross-validated
    mean squared log error), ``alpha_``, ``mean_``, ``scale_``, ``low_``, ``high_``, ``coef_``,
    ``intercept_``, ``num_runs_``. ``predict(X)`` shape ``(n,)``: log corrections.
    """

    def __init__(
        self,
        *,
        alphas: Sequence[float] = (1.0, 3.0, 10.0, 30.0, 100.0, 300.0),
        min_runs: int = 12,
    ) -> None:
        self.alphas = alphas
        self.min_runs = min_runs

    def fit(self, x: Float, y: Float, groups: NDArray[np.int64] | None = None) -> ResidualModel:
        """Choose and fit (module docstring). Raises ``CalibrationError`` for shapes that do
        not match ``FEATURES``."""
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != len(FEATURES) or x.shape[0] != y.shape[0]:
            raise CalibrationError(
                f"residual model: X must be (n, {len(FEATURES)}) and y (n,), got "
                f"{x.shape} and {y.shape}"
            )
        n = y.shape[0]
        self.num_runs_ = n
        self.low_ = x.min(axis=0) if n else np.zeros(len(FEATURES))
        self.high_ = x.max(axis=0) if n else np.zeros(len(FEATURES))
        self.mean_ = x.mean(axis=0) if n else np.zeros(len(FEATURES))
        spread = x.std(axis=0) if n else np.ones(len(FEATURES))
        self.scale_ = np.where(spread > 1e-9, spread, 1.0)
        self.coef_ = np.zeros(len(FEATURES))
        self.intercept_ = 0.0
        self.alpha_ = 0.0
        none_errors = y * y
        self.cv_mse_: dict[str, float] = {"none": float(none_errors.mean()) if n else 0.0}
        self.selected_ = "none"
        if n < max(self.min_runs, 3):
            return self
        z = (x - self.mean_) / self.scale_
        errors = self._cv_errors(z, y, groups)  # (n, len(alphas)) squared held-out errors
        best = int(np.argmin(errors.mean(axis=0)))
        ridge_errors = errors[:, best]
        self.cv_mse_["ridge"] = float(ridge_errors.mean())
        # one-standard-error rule: keep ``none`` unless ridge beats it by more than the SE of
        # the paired difference of their leave-one-out errors
        if beats_by_one_se(none_errors, ridge_errors):
            ridge = Ridge(alpha=float(self.alphas[best])).fit(z, y)
            self.selected_ = "ridge"
            self.alpha_ = float(self.alphas[best])
            self.coef_ = np.asarray(ridge.coef_, dtype=np.float64) / self.scale_
            self.intercept_ = float(ridge.intercept_) - float(self.coef_ @ self.mean_)
        return self

    def _cv_errors(self, z: Float, y: Float, groups: NDArray[np.int64] | None) -> Float:
        """Squared held-out errors of ridge at each alpha, shape ``(n, len(alphas))``: over
        whole groups when there are at least 3, else leave-one-out."""
        distinct = 0 if groups is None else np.unique(groups).size
        if groups is None or distinct < 3:
            ridge = RidgeCV(alphas=tuple(self.alphas), store_cv_results=True).fit(z, y)
            out: Float = np.asarray(ridge.cv_results_, dtype=np.float64)
            return out
        errors = np.empty((y.shape[0], len(self.alphas)))
        for train, test in GroupKFold(n_splits=min(5, distinct)).split(z, y, groups):
            for j, alpha in enumerate(self.alphas):
                fitted = Ridge(alpha=float(alpha)).fit(z[train], y[train])
                errors[test, j] = (y[test] - fitted.predict(z[test])) ** 2
        return errors

    def predict(self, x: Float) -> Float:
        """Log corrections, shape ``(n,)``, features clipped to the training range."""
        clipped = np.clip(np.asarray(x, dtype=np.float64), self.low_, self.high_)
        out: Float = clipped @ self.coef_ + self.intercept_
        return out

    def predict_one(self, features: Sequence[float]) -> float:
        """``predict`` of one run, in plain Python (no array set-up: for one prediction)."""
        if self.selected_ == "none":
            return 0.0
        total = self.intercept_
        for value, low, high, coef in zip(features, self.low_, self.high_, self.coef_, strict=True):
            total += coef * min(max(value, low), high)
        return float(total)

    def to_json(self) -> ResidualModelJson:
        """The fitted model as data."""
        return {
            "features": list(FEATURES),
            "selected": self.selected_,
            "alpha": self.alpha_,
            "cv_mse": dict(self.cv_mse_),
            "num_runs": self.num_runs_,
            "mean": [float(v) for v in self.mean_],
            "scale": [float(v) for v in self.scale_],
            "low": [float(v) for v in self.low_],
            "high": [float(v) for v in self.high_],
            "coef": [float(v) for v in self.coef_],
            "intercept": self.intercept_,
            "alphas": [float(a) for a in self.alphas],
            "min_runs": self.min_runs,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ResidualModel:
        """Inverse of ``to_json``. Raises ``CalibrationError`` when malformed or fitted on
        other features."""
        try:
            check_features(doc["features"], "residual model")
            model = cls(alphas=tuple(doc["alphas"]), min_runs=int(doc["min_runs"]))
            model.selected_ = str(doc["selected"])
            model.alpha_ = float(doc["alpha"])
            model.cv_mse_ = {str(k): float(v) for k, v in doc["cv_mse"].items()}
            model.num_runs_ = int(doc["num_runs"])
            for name in ("mean", "scale", "low", "high", "coef"):
                values = np.asarray(doc[name], dtype=np.float64)
                if values.shape != (len(FEATURES),) or not np.all(np.isfinite(values)):
                    raise CalibrationError(f"residual model: {name} must be finite numbers")
                setattr(model, f"{name}_", values)
            model.intercept_ = float(doc["intercept"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CalibrationError(f"residual model: malformed ({exc!r})") from exc
        if model.selected_ not in ("none", "ridge"):
            raise CalibrationError(f"residual model: unknown selection {model.selected_!r}")
        return model
