"""A device calibration: fitted operator models, collective curves, held-out errors; as JSON.

``fit_calibration(op_samples, collective_samples)`` fits one ``OperatorRegressor`` per sampled
operator and pass (``"gemm/fwd"``, ``"attention/bwd"``, ...), plus ``"memory/pooled"``: every
streaming memory-bound sample (norms, activations, residual add) against the elements it
moves, the model the engine's ``memory_bytes_per_s`` query needs because it does not say which
op is asking. For each model it quotes the error on *held-out* samples: a
``test_fraction`` of the samples (seeded) is set aside, the candidate is chosen by CV on the
rest and fitted there, the held-out times are predicted; then the chosen candidate is refitted
on all samples. The alpha-beta collective curves come from ``fit_collectives``.

Persistence (``Calibration.to_json`` / ``Calibration.from_json``) stores data, not pickles: each
model's training samples (shape, dtype, median time), its hyper-parameters and the chosen
candidate; loading refits deterministically and checks the refit against predictions stored at
fit time (``CalibrationError`` if they differ, e.g. after a scikit-learn change).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np
import sklearn
from numpy.typing import NDArray

from planner.calibration.collectives import CollectiveModel, CollectiveSample, fit_collectives
from planner.calibration.ops import MEMORY_BOUND_OPS, OP_DIMS, STREAMING_OPS, OpKey, OpKind, Pass
from planner.calibration.regress import (
    CANDIDATES,
    OperatorRegressor,
    feature_names,
    operator_features,
)
from planner.calibration.samples import OpSample
from planner.errors import CalibrationError

__all__ = [
    "FORMAT",
    "MEMORY_MODEL",
    "Calibration",
    "CalibrationJson",
    "FittedOperator",
    "FittedOperatorJson",
    "HeldOutError",
    "HeldOutErrorJson",
    "fit_calibration",
]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

FORMAT = "planner-calibration/1"
MEMORY_MODEL = "memory/pooled"
"""Name of the pooled memory-bound model (module docstring)."""

DOMAIN_MARGIN_LOG2 = 0.1
"""A query counts as inside the sampled domain up to 2^0.1 - 1 = 7 % beyond each feature's
sampled range."""

_CHECK_TOLERANCE = 1e-6

MIN_SAMPLES = 4
"""Fewer samples than this: the operator is skipped (its queries fall back)."""


def _json_float(value: float) -> float | None:
    """``value``, or None for NaN (JSON has no NaN)."""
    return None if math.isnan(value) else value


class HeldOutErrorJson(TypedDict):
    """``HeldOutError.to_dict``: its fields, NaN as None."""

    mape: float | None
    median_ape: float | None
    max_ape: float | None
    num_test: int
    num_train: int


class RegressorParamsJson(TypedDict):
    """The hyper-parameters of an ``OperatorRegressor`` in ``RegressorJson``."""

    candidates: list[str]
    num_folds: int
    random_state: int


RegressorJson = TypedDict(
    "RegressorJson",
    {
        "class": str,
        "params": RegressorParamsJson,
        "selected": str,
        "cv_rmse_log": dict[str, float | None],
    },
)
"""The regressor of ``FittedOperatorJson``: its class name, hyper-parameters, the selected
candidate and each candidate's cross-validated RMSE of log time (None: NaN)."""


class SamplesJson(TypedDict):
    """The training samples of ``FittedOperatorJson``: column names and one row per sample."""

    columns: list[str]
    rows: list[list[float]]


class FittedOperatorJson(TypedDict):
    """``FittedOperator.to_dict`` (module docstring): name, feature names, regressor, held-out
    error, dtypes, the sampled ``[low, high]`` of each feature, samples and the predictions
    stored to check a refit (log seconds)."""

    name: str
    features: list[str]
    regressor: RegressorJson
    held_out: HeldOutErrorJson
    dtypes: list[str]
    domain: dict[str, list[float]]
    samples: SamplesJson
    check_log_time: list[float]


class CalibrationJson(TypedDict):
    """``Calibration.to_dict``, the ``FORMAT`` document: the sampling run's ``device``
    metadata, the scikit-learn version, the seed and test fraction, the measured peaks, the
    operator models, the collective curves (``CollectiveModel.to_dict``) and the skipped
    operators with their reasons."""

    format: str
    device: dict[str, object]
    sklearn_version: str
    random_state: int
    test_fraction: float
    measured: dict[str, float]
    operators: list[FittedOperatorJson]
    collectives: list[dict[str, object]]
    skipped: dict[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldOutError:
    """Absolute relative error of predicted vs measured time on held-out samples.

    NaN when too few samples to hold any out (``num_test`` 0).
    """

    mape: float
    median_ape: float
    max_ape: float
    num_test: int
    num_train: int

    def to_dict(self) -> HeldOutErrorJson:
        """Plain JSON (NaN as null)."""
        return {
            "mape": _json_float(self.mape),
            "median_ape": _json_float(self.median_ape),
            "max_ape": _json_float(self.max_ape),
            "num_test": self.num_test,
            "num_train": self.num_train,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HeldOutError:
        """Inverse of ``to_dict``."""

        def f(name: str) -> float:
            v = d.get(name)
            return math.nan if v is None else float(v)

        return cls(
            mape=f("mape"),
            median_ape=f("median_ape"),
            max_ape=f("max_ape"),
            num_test=int(d.get("num_test") or 0),
            num_train=int(d.get("num_train") or 0),
        )


def _ape(pred_log: FloatArray, t: FloatArray) -> FloatArray:
    out: FloatArray = np.abs(np.exp(pred_log) - t) / t
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class FittedOperator:
    """One fitted operator model and the data it was fitted on.

    ``columns``/``rows``: the training samples (``OP_DIMS`` of the op, ``dtype_bytes``,
    ``time_median_s``; the pooled memory model: ``elements``, ``time_median_s``);
    ``domain_low``/``domain_high``: per-feature sampled range (``feature_names``).
    """

    name: str
    regressor: OperatorRegressor
    columns: tuple[str, ...]
    rows: tuple[tuple[float, ...], ...]
    dtypes: tuple[str, ...]
    domain_low: tuple[float, ...]
    domain_high: tuple[float, ...]
    held_out: HeldOutError
    check_log_time: tuple[float, ...] = ()

    @property
    def feature_names(self) -> tuple[str, ...]:
        """Names of the regressor's input columns."""
        return feature_names(self.name)

    def features(
        self, dims: Mapping[str, FloatArray | float], dtype_bytes: FloatArray | float
    ) -> FloatArray:
        """Feature rows for calls of this op (``dims``: ``OP_DIMS``; pooled: ``elements``;
        ``dtype_bytes`` one per row or one for all)."""
        arrays = {k: np.asarray(v, dtype=np.float64) for k, v in dims.items()}
        if self.name == MEMORY_MODEL:
            return np.log2(np.maximum(arrays["elements"], 1.0)).reshape(-1, 1)
        return operator_features(OpKey.parse(self.name), arrays, dtype_bytes)

    def in_domain(self, x: FloatArray) -> BoolArray:
        """Rows of feature matrix ``x`` inside the sampled range (within the margin)."""
        lo = np.asarray(self.domain_low) - DOMAIN_MARGIN_LOG2
        hi = np.asarray(self.domain_high) + DOMAIN_MARGIN_LOG2
        out: BoolArray = np.all((x >= lo) & (x <= hi), axis=1)
        return out

    def predict_time_s(self, x: FloatArray) -> FloatArray:
        """Predicted seconds per call for feature rows ``x``."""
        out: FloatArray = np.exp(self.regressor.predict(x))
        return out

    def _training(self) -> tuple[FloatArray, FloatArray]:
        data = np.asarray(self.rows, dtype=np.float64)
        cols = {c: data[:, i] for i, c in enumerate(self.columns)}
        t = cols.pop("time_median_s")
        dtype_bytes = cols.pop("dtype_bytes", np.full(data.shape[0], 4.0))
        return self.features(cols, dtype_bytes), np.log(t)

    def to_dict(self) -> FittedOperatorJson:
        """Plain-JSON form: samples, hyper-parameters, selection, domain, held-out error."""
        reg = self.regressor
        return {
            "name": self.name,
            "features": list(self.feature_names),
            "regressor": {
                "class": "OperatorRegressor",
                "params": {
                    "candidates": list(reg.candidates),
                    "num_folds": reg.num_folds,
                    "random_state": reg.random_state,
                },
                "selected": reg.selected_,
                "cv_rmse_log": {k: _json_float(v) for k, v in reg.cv_rmse_.items()},
            },
            "held_out": self.held_out.to_dict(),
            "dtypes": list(self.dtypes),
            "domain": {
                n: [lo, hi]
                for n, lo, hi in zip(
                    self.feature_names, self.domain_low, self.domain_high, strict=True
                )
            },
            "samples": {"columns": list(self.columns), "rows": [list(r) for r in self.rows]},
            "check_log_time": list(self.check_log_time),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FittedOperator:
        """Refit from the stored samples and check the refit (module docstring)."""
        try:
            name = str(d["name"])
            reg_d = d["regressor"]
            params = reg_d["params"]
            regressor = OperatorRegressor(
                candidates=(str(reg_d["selected"]),),
                num_folds=int(params["num_folds"]),
                random_state=int(params["random_state"]),
            )
            domain = d["domain"]
            names = feature_names(name)
            op = cls(
                name=name,
                regressor=regressor,
                columns=tuple(str(c) for c in d["samples"]["columns"]),
                rows=tuple(tuple(float(v) for v in r) for r in d["samples"]["rows"]),
                dtypes=tuple(str(x) for x in d.get("dtypes", ())),
                domain_low=tuple(float(domain[n][0]) for n in names),
                domain_high=tuple(float(domain[n][1]) for n in names),
                held_out=HeldOutError.from_dict(d.get("held_out", {})),
                check_log_time=tuple(float(v) for v in d.get("check_log_time", ())),
            )
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise CalibrationError(f"malformed operator model: {exc!r}") from None
        x, y = op._training()
        regressor.fit(x, y)
        # the stored (multi-candidate) selection, restored for show/describe
        regressor.candidates = tuple(str(c) for c in params["candidates"])
        regressor.cv_rmse_ = {
            str(k): (math.nan if v is None else float(v))
            for k, v in reg_d.get("cv_rmse_log", {}).items()
        }
        if op.check_log_time:
            got = regressor.predict(x[: len(op.check_log_time)])
            if not np.allclose(got, op.check_log_time, atol=_CHECK_TOLERANCE, rtol=0.0):
                raise CalibrationError(
                    f"{name}: refitting the stored samples did not reproduce the stored "
                    f"predictions (scikit-learn {sklearn.__version__}); refit with "
                    "`planner calibrate fit`"
                )
        return op


def _fit_one(
    name: str,
    columns: tuple[str, ...],
    rows: list[tuple[float, ...]],
    dtypes: tuple[str, ...],
    *,
    random_state: int,
    test_fraction: float,
    candidates: tuple[str, ...],
) -> FittedOperator:
    blank = OperatorRegressor(candidates=candidates, random_state=random_state)
    proto = FittedOperator(
        name=name,
        regressor=blank,
        columns=columns,
        rows=tuple(rows),
        dtypes=dtypes,
        domain_low=(),
        domain_high=(),
        held_out=HeldOutError(
            mape=math.nan, median_ape=math.nan, max_ape=math.nan, num_test=0, num_train=0
        ),
    )
    x, y = proto._training()
    n = x.shape[0]
    rng = np.random.default_rng(random_state)
    order = rng.permutation(n)
    num_test = round(n * test_fraction) if n >= 8 else 0
    test, train = order[:num_test], order[num_test:]
    if num_test:
        probe = OperatorRegressor(candidates=candidates, random_state=random_state)
        probe.fit(x[train], y[train])
        ape = _ape(probe.predict(x[test]), np.exp(y[test]))
        held = HeldOutError(
            mape=float(np.mean(ape)),
            median_ape=float(np.median(ape)),
            max_ape=float(np.max(ape)),
            num_test=int(num_test),
            num_train=int(train.size),
        )
    else:
        held = proto.held_out
    if num_test:  # refit on all samples the candidate the held-out estimate was made with
        final = OperatorRegressor(candidates=(probe.selected_,), random_state=random_state)
        final.fit(x, y)
        final.candidates = candidates
        final.cv_rmse_ = probe.cv_rmse_
    else:
        final = OperatorRegressor(candidates=candidates, random_state=random_state).fit(x, y)
    return FittedOperator(
        name=name,
        regressor=final,
        columns=columns,
        rows=tuple(rows),
        dtypes=dtypes,
        domain_low=tuple(float(v) for v in x.min(axis=0)),
        domain_high=tuple(float(v) for v in x.max(axis=0)),
        held_out=held,
        check_log_time=tuple(float(v) for v in final.predict(x[: min(n, 8)])),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """Everything fitted for one device (module docstring).

    ``device`` is the sampling run's metadata (device, device_name, torch/CUDA versions, host,
    threads, dates); ``measured`` the device's achieved peaks read off the samples:
    ``peak_flop_per_s`` (fastest GEMM), ``memory_bandwidth_bytes_per_s`` (median bandwidth
    of the largest quarter of the streaming add/activation samples: beyond the caches),
    ``kernel_min_time_s`` (fastest memory-bound op call); ``skipped`` maps operators that
    could not be fitted to the reason.
    """

    device: Mapping[str, Any]
    operators: Mapping[str, FittedOperator]
    collectives: tuple[CollectiveModel, ...] = ()
    measured: Mapping[str, float] = field(default_factory=dict)
    skipped: Mapping[str, str] = field(default_factory=dict)
    random_state: int = 0
    test_fraction: float = 0.25

    def operator(self, name: str) -> FittedOperator | None:
        """The model of ``name`` (``"gemm/fwd"``, ``MEMORY_MODEL``), None if not fitted."""
        return self.operators.get(name)

    def collective(
        self, collective: str, num_ranks: int | None = None, tier: str | None = None
    ) -> CollectiveModel | None:
        """The curve of ``collective`` (smallest group / first tier when not given)."""
        hits = [
            c
            for c in self.collectives
            if c.collective == collective
            and (num_ranks is None or c.num_ranks == num_ranks)
            and (tier is None or c.tier == tier)
        ]
        return min(hits, key=lambda c: (c.num_ranks, c.tier)) if hits else None

    def to_dict(self) -> CalibrationJson:
        """The JSON document (``FORMAT``)."""
        return {
            "format": FORMAT,
            "device": dict(self.device),
            "sklearn_version": sklearn.__version__,
            "random_state": self.random_state,
            "test_fraction": self.test_fraction,
            "measured": dict(self.measured),
            "operators": [op.to_dict() for op in self.operators.values()],
            "collectives": [c.to_dict() for c in self.collectives],
            "skipped": dict(self.skipped),
        }

    def to_json(self) -> str:
        """``to_dict`` as indented JSON text."""
        return json.dumps(self.to_dict(), indent=1) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        """Load (and refit) a calibration document; ``CalibrationError`` when malformed."""
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            got = data.get("format") if isinstance(data, Mapping) else type(data).__name__
            raise CalibrationError(f"not a calibration document: format is {got!r}, need {FORMAT}")
        ops = [FittedOperator.from_dict(d) for d in data.get("operators", [])]
        try:
            return cls(
                device=dict(data.get("device", {})),
                operators={op.name: op for op in ops},
                collectives=tuple(
                    CollectiveModel.from_dict(c) for c in data.get("collectives", [])
                ),
                measured={str(k): float(v) for k, v in data.get("measured", {}).items()},
                skipped={str(k): str(v) for k, v in data.get("skipped", {}).items()},
                random_state=int(data.get("random_state", 0)),
                test_fraction=float(data.get("test_fraction", 0.25)),
            )
        except (TypeError, ValueError) as exc:
            raise CalibrationError(f"malformed calibration document: {exc}") from None

    @classmethod
    def from_json(cls, text: str, *, source: str = "<calibration>") -> Calibration:
        """Parse and load a calibration JSON text."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CalibrationError(f"{source}: not JSON ({exc.msg}, line {exc.lineno})") from None
        except (ValueError, RecursionError) as exc:  # 5,000-digit numbers, absurd nesting
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:80]
            raise CalibrationError(f"{source}: not a calibration ({reason})") from None
        try:
            return cls.from_dict(data)
        except CalibrationError as exc:
            raise CalibrationError(f"{source}: {exc}") from None


def _measured(samples: Sequence[OpSample]) -> dict[str, float]:
    out: dict[str, float] = {}
    gemm = [s for s in samples if s.op is OpKind.GEMM]
    if gemm:
        out["peak_flop_per_s"] = max(s.flop / s.time_median_s for s in gemm)
    stream = sorted(
        (
            s
            for s in samples
            if s.op in (OpKind.ADD, OpKind.GELU, OpKind.SILU) and s.pass_ is Pass.FORWARD
        ),
        key=lambda s: s.bytes,
    )
    if stream:  # the largest quarter: tensors beyond the caches stream from main memory / HBM
        big = stream[len(stream) - max(1, len(stream) // 4) :]
        out["memory_bandwidth_bytes_per_s"] = float(
            np.median([s.bytes / s.time_median_s for s in big])
        )
    mem = [s for s in samples if s.op in MEMORY_BOUND_OPS]
    if mem:
        out["kernel_min_time_s"] = min(s.time_median_s for s in mem)
    return out


def fit_calibration(
    op_samples: Sequence[OpSample],
    collective_samples: Sequence[CollectiveSample] = (),
    *,
    metadata: Mapping[str, object] | None = None,
    random_state: int = 0,
    test_fraction: float = 0.25,
    candidates: tuple[str, ...] | None = None,
) -> Calibration:
    """Fit every operator of ``op_samples`` and every collective curve (module docstring).

    Samples must come from one device (``CalibrationError`` when rows name different devices
    or device names). Operators with fewer than ``MIN_SAMPLES`` samples are skipped and listed
    in ``Calibration.skipped``; ``metadata`` (the run's ``run.json``) is kept as
    ``Calibration.device``.
    """
    cands = candidates or CANDIDATES
    if not op_samples and not collective_samples:
        raise CalibrationError("no samples to fit; run `planner calibrate sample` first")
    devices = {(s.device, s.device_name) for s in op_samples}
    if len(devices) > 1:
        raise CalibrationError(
            f"samples come from {len(devices)} devices {sorted(devices)}; fit one device at a time"
        )
    groups: dict[OpKey, list[OpSample]] = {}
    for s in op_samples:
        groups.setdefault(s.key, []).append(s)
    operators: dict[str, FittedOperator] = {}
    skipped: dict[str, str] = {}
    for key in sorted(groups, key=str):
        rows_s = groups[key]
        if len(rows_s) < MIN_SAMPLES:
            skipped[str(key)] = f"{len(rows_s)} samples, need {MIN_SAMPLES}"
            continue
        dims = OP_DIMS[key.op]
        cols = (*dims, "dtype_bytes", "time_median_s")
        rows = [(*(float(s.dims[d]) for d in dims), s.dtype_bytes, s.time_median_s) for s in rows_s]
        dtypes = tuple(sorted({s.dtype for s in rows_s}))
        operators[str(key)] = _fit_one(
            str(key),
            cols,
            rows,
            dtypes,
            random_state=random_state,
            test_fraction=test_fraction,
            candidates=cands,
        )
    mem = [s for s in op_samples if s.op in STREAMING_OPS]
    if len(mem) >= MIN_SAMPLES:
        rows = [(s.bytes / s.dtype_bytes, s.time_median_s) for s in mem]
        operators[MEMORY_MODEL] = _fit_one(
            MEMORY_MODEL,
            ("elements", "time_median_s"),
            rows,
            tuple(sorted({s.dtype for s in mem})),
            random_state=random_state,
            test_fraction=test_fraction,
            candidates=cands,
        )
    elif op_samples:
        skipped[MEMORY_MODEL] = f"{len(mem)} memory-bound samples, need {MIN_SAMPLES}"
    device: dict[str, object] = dict(metadata or {})
    if op_samples:
        first = op_samples[0]
        for k in ("device", "device_name", "torch_version", "cuda_version", "hostname"):
            device.setdefault(k, getattr(first, k))
        device.setdefault("num_threads", first.num_threads)
        stamps = sorted(s.timestamp for s in op_samples if s.timestamp)
        if stamps:
            device.setdefault("sampled_from", stamps[0])
            device.setdefault("sampled_to", stamps[-1])
    return Calibration(
        device=device,
        operators=operators,
        collectives=tuple(fit_collectives(collective_samples)),
        measured=_measured(op_samples),
        skipped=skipped,
        random_state=random_state,
        test_fraction=test_fraction,
    )
