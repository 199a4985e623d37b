"""The local residual of the observed-runs calibration: how a key's error varies with the
configuration among its own runs (pure; data, no pickles).

After the key's compute and network factors, the residual model and the cell rule
(``planner.calibration.observed``), the runs of one key (cluster, GPU type, recipe, framework,
model family) still differ: on llm_foundry's A100-80GB runs the model is 5-13 % too slow on the
fully recomputed 7B-30B models, 4 % too fast on every 125M one and 17-21 % too fast on 760M at
micro-batch 48-96 (``benchmarks/RESULTS.md``, learning curve rows). One factor per key cannot
follow that, and a few runs of the key drawn at random move every configuration by the mean of
runs unlike it. ``LocalResidual`` lets the runs of a key most like the target weigh most:

    l(x) = sum_j w_j(x) r_j / (sum_j w_j(x) + lambda),
    w_j(x) = exp(-|z(x) - z(x_j)|² / (2 h²)),

over the key's runs ``j`` (for a MoE model with a model effect, that model's runs of the key:
``observed._local_group``) with log residuals ``r_j`` (``log observed - log calibrated`` without
this term, centred on their key's mean: the key's factor holds that mean, the term only how its
runs differ) and documented features ``x_j`` (``residual.FEATURES``, standardised by their
spread over every run: ``z``). That is the Nadaraya-Watson kernel-weighted average (Hastie,
Tibshirani & Friedman, *The Elements of Statistical Learning*, 2nd ed., 2009, §6.1-6.2) with
``lambda`` pseudo-runs of residual 0 in the denominator: the shrinkage of a normal mean toward
the prior 0 by the number of runs behind it, here the kernel's effective number (Gelman et al.,
*Bayesian Data Analysis*, 3rd ed., 2013, §5.4). A target unlike every seen run of its key gets
``l ≈ 0``, and a key of one run has a centred residual of 0: the key's factor as it is.

Per model family (the first element of the key), ``h`` and ``lambda`` are chosen by
leave-one-run-out cross-validation within keys (each run predicted from the other runs of its
key; a key of one run predicts nothing and is not scored), with the one-standard-error rule of
``residual.ResidualModel`` (ESL §7.10): among the grid's kernels, the one closest to no local
term (the smallest mean square of its held-out corrections) within one standard error of the
best (of the paired difference of their squared errors), and that one against ``none``, kept
only where it beats it by more than the standard error of their paired difference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np
from numpy.typing import NDArray

from planner.calibration.residual import FEATURES, beats_by_one_se, check_features
from planner.errors import CalibrationError

__all__ = ["LocalChoice", "LocalResidual", "LocalResidualJson"]

Float = NDArray[np.float64]
Key = tuple[str, ...]


class LocalKeyJson(TypedDict):
    """One key of ``LocalResidualJson.keys``: its group (``RunKey.path()`` at the key level),
    its runs' standardised features and centred log residuals."""

    group: list[str]
    features: list[list[float]]
    residuals: list[float]


class LocalChoiceJson(TypedDict):
    """One family of ``LocalResidualJson.families``: the ``selected`` candidate (``none`` or
    ``kernel``), its ``bandwidth`` and ``pseudo_runs``, the cross-validated mean squared log
    error of ``none`` and of the kernel (``cv_mse``) over ``num_scored`` runs."""

    family: str
    selected: str
    bandwidth: float
    pseudo_runs: float
    cv_mse: dict[str, float]
    num_scored: int


class LocalResidualJson(TypedDict):
    """``LocalResidual.to_json``: the ``features`` (``FEATURES``), the per-feature ``scale``,
    the grids, the choice per model family and per key of a family with a kernel its runs."""

    features: list[str]
    scale: list[float]
    bandwidths: list[float]
    pseudo_run_grid: list[float]
    families: list[LocalChoiceJson]
    keys: list[LocalKeyJson]


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalChoice:
    """What cross-validation chose for one model family (``LocalChoiceJson``)."""

    selected: str
    bandwidth: float
    pseudo_runs: float
    cv_mse: dict[str, float]
    num_scored: int


class LocalResidual:
    """Kernel-weighted residual within keys, chosen per model family by cross-validation
    (module docstring).

    ``fit(x, residuals, keys)``: ``x`` shape ``(n, len(FEATURES))``, ``residuals`` shape
    ``(n,)`` log residuals, ``keys`` one group per run (its first element the model family).
    Learnt: ``choices_`` (family -> ``LocalChoice``), ``scale_`` and per key of a family with
    a kernel its standardised features and centred residuals (``runs_``).
    ``predict_one(key, x)``: the log correction of one target."""

    def __init__(
        self,
        *,
        bandwidths: Sequence[float] = (0.25, 0.35, 0.5, 0.7, 1.0),
        pseudo_runs: Sequence[float] = (0.5, 1.0, 2.0, 4.0),
    ) -> None:
        self.bandwidths = tuple(float(b) for b in bandwidths)
        self.pseudo_runs = tuple(float(p) for p in pseudo_runs)
        self.choices_: dict[str, LocalChoice] = {}
        self.scale_ = np.ones(len(FEATURES))
        self.runs_: dict[Key, tuple[Float, Float]] = {}

    def fit(self, x: Float, residuals: Float, keys: Sequence[Key]) -> LocalResidual:
        """Choose and fit (module docstring). Raises ``CalibrationError`` for shapes that do
        not match ``FEATURES``."""
        x = np.asarray(x, dtype=np.float64)
        r = np.asarray(residuals, dtype=np.float64)
        n = r.shape[0]
        if x.ndim != 2 or x.shape != (n, len(FEATURES)) or len(keys) != n:
            raise CalibrationError(
                f"local residual: X must be (n, {len(FEATURES)}), residuals (n,) and one key "
                f"per run, got {x.shape}, {r.shape} and {len(keys)}"
            )
        spread = x.std(axis=0) if n else np.ones(len(FEATURES))
        self.scale_ = np.where(spread > 1e-9, spread, 1.0)
        z = x / self.scale_
        members: dict[Key, NDArray[np.int64]] = {}
        for i, key in enumerate(keys):
            members.setdefault(key, np.zeros(0, np.int64))
            members[key] = np.append(members[key], i)
        # a key's factor holds the mean of its runs: the local term learns how they differ
        centred = r.copy()
        for idx in members.values():
            centred[idx] -= centred[idx].mean()
        self.choices_ = {}
        self.runs_ = {}
        for family in sorted({key[0] for key in members}):
            blocks = [
                (centred[idx], _sq_distances(z[idx]))
                for key, idx in members.items()
                if key[0] == family and idx.size > 1
            ]
            choice = self._choose(blocks)
            self.choices_[family] = choice
            if choice.selected == "kernel":
                for key, idx in members.items():
                    if key[0] == family:
                        self.runs_[key] = (z[idx], centred[idx])
        return self

    def _choose(self, blocks: Sequence[tuple[Float, Float]]) -> LocalChoice:
        """The candidate of one family from its keys' centred residuals and squared distances
        (keys of two runs or more): leave-one-run-out within keys; among the kernels the one
        closest to no local term (the smallest mean square of its held-out corrections: a
        narrower kernel or more pseudo-runs) within one standard error of the best, then
        against ``none`` by the same rule."""
        y = np.concatenate([b for b, _ in blocks]) if blocks else np.zeros(0)
        none_errors = y * y
        cv_mse = {"none": float(none_errors.mean()) if y.size else 0.0}
        if y.size < 3:
            return LocalChoice(
                selected="none", bandwidth=0.0, pseudo_runs=0.0, cv_mse=cv_mse, num_scored=y.size
            )
        candidates = []
        for h in self.bandwidths:
            sums = [_loo_sums(d, b, h) for b, d in blocks]
            weighted = np.concatenate([ws for ws, _ in sums])
            total = np.concatenate([t for _, t in sums])
            for lam in self.pseudo_runs:
                local = weighted / (total + lam)
                candidates.append((float((local * local).mean()), h, lam, (y - local) ** 2))
        best = min(candidates, key=lambda c: float(c[3].mean()))
        within = [c for c in candidates if not beats_by_one_se(c[3], best[3])]
        _, h, lam, errors = min(within, key=lambda c: c[0])
        cv_mse["kernel"] = float(errors.mean())
        selected = "kernel" if beats_by_one_se(none_errors, errors) else "none"
        return LocalChoice(
            selected=selected,
            bandwidth=h if selected == "kernel" else 0.0,
            pseudo_runs=lam if selected == "kernel" else 0.0,
            cv_mse=cv_mse,
            num_scored=int(y.size),
        )

    def predict_one(self, key: Key, features: Sequence[float]) -> float:
        """The log correction of a target of ``key`` with ``features`` (``FEATURES``): 0 for a
        family without a kernel or a key without runs."""
        runs = self.runs_.get(key)
        if runs is None:
            return 0.0
        choice = self.choices_[key[0]]
        gap = runs[0] - np.asarray(features, dtype=np.float64) / self.scale_
        w = np.exp(np.einsum("ij,ij->i", gap, gap) * (-0.5 / choice.bandwidth**2))
        return float(w @ runs[1]) / (float(w.sum()) + choice.pseudo_runs)

    def to_json(self) -> LocalResidualJson:
        """The fitted term as data."""
        return {
            "features": list(FEATURES),
            "scale": [float(v) for v in self.scale_],
            "bandwidths": list(self.bandwidths),
            "pseudo_run_grid": list(self.pseudo_runs),
            "families": [
                {
                    "family": family,
                    "selected": c.selected,
                    "bandwidth": c.bandwidth,
                    "pseudo_runs": c.pseudo_runs,
                    "cv_mse": dict(c.cv_mse),
                    "num_scored": c.num_scored,
                }
                for family, c in sorted(self.choices_.items())
            ],
            "keys": [
                {
                    "group": list(key),
                    "features": [[float(v) for v in row] for row in z],
                    "residuals": [float(v) for v in r],
                }
                for key, (z, r) in sorted(self.runs_.items())
            ],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> LocalResidual:
        """Inverse of ``to_json``. Raises ``CalibrationError`` when malformed or fitted on
        other features."""
        try:
            check_features(doc["features"], "local residual")
            model = cls(bandwidths=doc["bandwidths"], pseudo_runs=doc["pseudo_run_grid"])
            model.scale_ = np.asarray(doc["scale"], dtype=np.float64)
            model.choices_ = {
                str(c["family"]): LocalChoice(
                    selected=str(c["selected"]),
                    bandwidth=float(c["bandwidth"]),
                    pseudo_runs=float(c["pseudo_runs"]),
                    cv_mse={str(k): float(v) for k, v in c["cv_mse"].items()},
                    num_scored=int(c["num_scored"]),
                )
                for c in doc["families"]
            }
            runs: dict[Key, tuple[Float, Float]] = {}
            for entry in doc["keys"]:
                z = np.asarray(entry["features"], dtype=np.float64).reshape(-1, len(FEATURES))
                r = np.asarray(entry["residuals"], dtype=np.float64)
                if z.shape[0] != r.shape[0] or not (np.isfinite(z).all() and np.isfinite(r).all()):
                    raise CalibrationError("local residual: a key's runs are malformed")
                runs[tuple(str(p) for p in entry["group"])] = (z, r)
            model.runs_ = runs
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CalibrationError(f"local residual: malformed ({exc!r})") from exc
        if model.scale_.shape != (len(FEATURES),) or not np.all(model.scale_ > 0):
            raise CalibrationError("local residual: scale must be positive numbers")
        for c in model.choices_.values():
            if c.selected not in ("none", "kernel"):
                raise CalibrationError(f"local residual: unknown selection {c.selected!r}")
            if c.selected == "kernel" and not (c.bandwidth > 0 and c.pseudo_runs > 0):
                raise CalibrationError("local residual: bandwidth and pseudo_runs must be > 0")
        for key in model.runs_:
            found = model.choices_.get(key[0] if key else "")
            if found is None or found.selected != "kernel":
                raise CalibrationError(f"local residual: runs of {list(key)} without a kernel")
        return model


def _sq_distances(z: Float) -> Float:
    """Squared Euclidean distances between the rows of ``z``, shape ``(m, m)`` (through the
    Gram matrix: memory ``m²``, not ``m²`` times the features)."""
    norms = np.einsum("ij,ij->i", z, z)
    out: Float = np.maximum(norms[:, None] + norms[None, :] - 2.0 * (z @ z.T), 0.0)
    return out


def _loo_sums(d2: Float, r: Float, h: float) -> tuple[Float, Float]:
    """For each run of one key (``d2``: their squared distances, ``r`` their residuals), the
    kernel-weighted sum of the other runs' residuals and the sum of their weights, shapes
    ``(m,)``: its held-out local term is the first over the second plus ``lambda``."""
    w = np.exp(-0.5 * d2 / (h * h))
    np.fill_diagonal(w, 0.0)
    return w @ r, w.sum(axis=1)
