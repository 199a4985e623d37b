"""Accuracy as a learning curve: the held-out error of the prior and after k observed runs.

A planner in production meets a GPU type and recipe once and then sees every run on it. This
measures how fast the observed-runs calibration (``planner.calibration.observed``: the same
``sample_of``, ``fit_observed`` and ``ObservedCalibration.correct`` that ``planner calibrate
observe`` and ``planner predict --calibration`` use) learns, on the published runs of the
accuracy harness:

* **targets**: the held-out rows of every source (the declared calibration subset, on which the
  shipped constants were fitted, is never a target);
* **k = 0, prior**: the model as shipped;
* **k = 0, others seen**: calibrated on every other usable row except those on the target's GPU
  type and recipe (what it learns from other GPUs, recipes, clusters);
* **k = 1, 3, 10**: the same plus k runs drawn at random from the other rows of the target's
  family (dense or MoE) on its GPU type and recipe (all of them when there are fewer: the count
  is reported), ``DRAWS`` draws per target (``numpy.random.default_rng(SEED)``), their errors
  averaged: leave-one-out over the visible sources;
* **all seen**: calibrated on every other row (leave-one-out): the calibration once it has
  seen the target's key whole, to set against the floor;
* **floor**: the target corrected by the mean log ratio of every other run of its key (its
  cluster, GPU type, recipe, framework and family, all releases): what one factor per key
  reaches once it has seen all of them. A calibration that scales whole keys does about this
  well at best on average (shrinkage toward the key's parents can beat it on a row, not on the
  scatter within the key); a target whose key has no other run has none. Where a cell's floor
  is above its target, levels, variances and robust losses do not meet it: only telling the
  runs of one key apart does (the model, features of the run, or the observed-runs
  calibration's MoE model effect, which does it by model);
* **each cluster apart** (``cluster_curve``): the same targets as the service learns, from
  their own cluster's runs only (one calibration per cluster: ``planner.service.learning``);
* **time split**, where a source has releases (Megatron-Bridge's NeMo containers 25.09 and
  25.11; torchtitan's benchmarks of 2024-12 and 2025-06): calibrated on everything but the
  newest release of the source, each row of the newest release predicted.

Each publisher is its own cluster (its machines and stack): a source, or for a source that
gathers several publishers (``moe_h100_2025``: Automodel, Megatron-MoE-ModelZoo, Megatron-LM,
FlagPerf) each of them (``Case.cluster_of``). Errors are
``|predicted / measured - 1|`` of the iteration time, as in the accuracy table; families and
GPU generations as there (MoE: routed experts; generation: the catalog's architecture).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from benchmarks.accuracy.convert import Case, Dataset
from benchmarks.accuracy.evaluate import scenarios_of
from benchmarks.accuracy.report import is_moe_case
from planner.calibration.observed import (
    ObservedCalibration,
    RunSample,
    fit_observed,
    sample_of,
)
from planner.perf import predict_batch
from planner.scenario.documents import prediction_json

__all__ = [
    "BRIDGE",
    "DRAWS",
    "KS",
    "LEARNING_MARKERS",
    "LearningResult",
    "cluster_curve",
    "cluster_table",
    "learning_curve",
    "learning_rows_table",
    "learning_section",
    "learning_table",
    "release_of",
    "time_split_table",
]

BRIDGE: Final = "megatron_bridge_2025"
LEARNING_MARKERS: Final = (
    "<!-- learning-curve:begin (written by python -m benchmarks.accuracy --learning --results) -->",
    "<!-- learning-curve:end -->",
)
KS: Final = (1, 3, 10)
"""Observed runs on the target's GPU type and recipe."""
DRAWS: Final = 4
"""Random draws of the k runs per target."""
SEED: Final = 0
GENERATIONS: Final = {"ampere": "A100 (Ampere)", "hopper": "H100/H200 (Hopper)"}
TARGET_K0: Final = {"dense": 0.06, "MoE": 0.10}
TARGET_K0_BLACKWELL: Final = {"dense": 0.10, "MoE": 0.15}
TARGET_K3: Final = {"dense": 0.04, "MoE": 0.06}
TARGET_K3_ROW: Final = 0.25


def release_of(case: Case) -> str:
    """The software release of a case: its own (Megatron-Bridge containers); torchtitan's
    benchmark documents by date (``titan2412_*``: 2024-12, the others: 2025-06); '' for
    sources of one release."""
    if case.release:
        return case.release
    if case.source == "torchtitan":
        return "2024-12" if case.config_id.startswith("titan2412") else "2025-06"
    return ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One target: its case, family (``dense``/``MoE``), generation, errors at k = 0 (prior),
    k = 0 with the other groups seen (``others``) and at each of ``KS`` (mean over draws), how
    many runs of its group there were to draw from, its ``floor`` (``key_floor``) and its error
    calibrated on every other row (``seen_all``)."""

    case: Case
    family: str
    generation: str
    prior: float
    others: float
    after: tuple[float, ...]
    pool: int
    floor: float = math.nan
    seen_all: float = math.nan


@dataclass(frozen=True, slots=True, kw_only=True)
class LearningResult:
    """Every target's ``Row`` and the time-split rows ``(case, family, generation, prior
    error, calibrated error, runs seen on its GPU type and recipe)``."""

    rows: list[Row]
    time_split: list[tuple[Case, str, str, float, float, int]]
    cluster_rows: list[Row] = field(default_factory=list)


def _family(case: Case) -> str:
    return "MoE" if is_moe_case(case) else "dense"


def _generation(architecture: str) -> str:
    return GENERATIONS.get(architecture, architecture.capitalize())


def _error(cal: ObservedCalibration, s: RunSample) -> float:
    found = cal.correct(s.key, s.compute_s, s.network_s, s.features, routed_s=s.routed_s)
    return abs(s.predicted_s * found.factor / s.observed_s - 1)


def key_floor(samples: Sequence[RunSample], target: int) -> float:
    """``|predicted · factor / measured - 1|`` of ``samples[target]`` with the factor
    ``exp(mean log(measured / predicted))`` of the other samples of its key (cluster, GPU,
    recipe, framework, family; any release): the module docstring's floor. NaN when its key
    has no other sample."""
    key = samples[target].key

    def same(s: RunSample) -> bool:
        k = s.key
        return (k.cluster, k.gpu, k.recipe, k.framework, k.family) == (
            key.cluster,
            key.gpu,
            key.recipe,
            key.framework,
            key.family,
        )

    logs = [
        math.log(s.observed_s / s.predicted_s)
        for i, s in enumerate(samples)
        if i != target and same(s)
    ]
    if not logs:
        return math.nan
    s = samples[target]
    return abs(s.predicted_s * math.exp(float(np.mean(logs))) / s.observed_s - 1)


def samples_of(cases: Sequence[Case]) -> list[RunSample]:
    """Every case as an observed run (cluster = its publisher: ``Case.cluster_of``)."""
    scenarios = scenarios_of(cases)
    predictions = predict_batch(scenarios)
    return [
        sample_of(
            scenario,
            prediction_json(prediction, None),
            case.measured_iteration_time_s,
            cluster=case.cluster_of,
        )
        for case, scenario, prediction in zip(cases, scenarios, predictions, strict=True)
    ]


def _after(
    rng: np.random.Generator,
    pool: Sequence[int],
    ks: Sequence[int],
    draws: int,
    error: Callable[[list[int]], float],
) -> tuple[float, ...]:
    """Per k of ``ks``: the mean over ``draws`` draws of ``error(chosen)``, ``chosen`` k indices
    of ``pool`` drawn by ``rng`` without replacement (all of them when fewer; none from an
    empty pool)."""
    after = []
    for k in ks:
        errors = []
        for _ in range(draws):
            size = min(k, len(pool))
            chosen = [int(i) for i in rng.choice(pool, size=size, replace=False)] if pool else []
            errors.append(error(chosen))
        after.append(float(np.mean(errors)))
    return tuple(after)


def learning_curve(
    dataset: Dataset, *, ks: Sequence[int] = KS, draws: int = DRAWS, seed: int = SEED
) -> LearningResult:
    """The learning curve and the time split of ``dataset`` (module docstring)."""
    cases = dataset.cases
    samples = samples_of(cases)
    group = [(s.key.gpu, s.key.recipe) for s in samples]
    family = [s.key.family for s in samples]
    rng = np.random.default_rng(seed)
    others_fit: dict[tuple[str, str], ObservedCalibration] = {}
    rows: list[Row] = []
    for t, (case, sample) in enumerate(zip(cases, samples, strict=True)):
        if case.calibration:
            continue
        mine = group[t]
        others = [s for s, g in zip(samples, group, strict=True) if g != mine]
        pool = [i for i, g in enumerate(group) if g == mine and family[i] == family[t] and i != t]
        if mine not in others_fit:
            others_fit[mine] = fit_observed(others)
        after = _after(
            rng,
            pool,
            ks,
            draws,
            lambda chosen, others=others, sample=sample: _error(
                fit_observed(others + [samples[i] for i in chosen]), sample
            ),
        )
        rows.append(
            Row(
                case=case,
                family=_family(case),
                generation=_generation(sample.key.architecture),
                prior=abs(sample.predicted_s / sample.observed_s - 1),
                others=_error(others_fit[mine], sample),
                after=after,
                pool=len(pool),
                floor=key_floor(samples, t),
                seen_all=_error(fit_observed(samples[:t] + samples[t + 1 :]), sample),
            )
        )
    return LearningResult(
        rows=rows,
        time_split=_time_split(cases, samples),
        cluster_rows=cluster_curve(cases, samples, ks=ks, draws=draws, seed=seed),
    )


def cluster_curve(
    cases: Sequence[Case],
    samples: Sequence[RunSample],
    *,
    ks: Sequence[int] = KS,
    draws: int = DRAWS,
    seed: int = SEED,
) -> list[Row]:
    """The learning curve as the service learns: one calibration per cluster
    (``planner.service.learning`` fits ``observed/<scheduler>/<cluster>`` from that cluster's
    finished jobs only). Per held-out target (``samples[i]`` is ``cases[i]``'s run): ``others``
    is the calibration of its cluster's runs on other GPU types and recipes (the model alone
    when there are none), ``after[j]`` the mean over ``draws`` draws with ``ks[j]`` of its
    cluster's runs of its family on its GPU type and recipe added, ``seen_all`` every other run
    of its cluster; ``pool`` how many such runs there were. No ``floor`` (the main curve's)."""
    group = [(s.key.gpu, s.key.recipe) for s in samples]
    family = [s.key.family for s in samples]
    rng = np.random.default_rng(seed)
    others_fit: dict[tuple[str, tuple[str, str]], ObservedCalibration] = {}
    rows: list[Row] = []
    for t, (case, sample) in enumerate(zip(cases, samples, strict=True)):
        if case.calibration:
            continue
        prior = abs(sample.predicted_s / sample.observed_s - 1)

        def error(seen: list[RunSample], sample: RunSample = sample, prior: float = prior) -> float:
            return _error(fit_observed(seen), sample) if seen else prior

        cluster = sample.key.cluster
        mine = [i for i, s in enumerate(samples) if s.key.cluster == cluster]
        others = [samples[i] for i in mine if group[i] != group[t]]
        pool = [i for i in mine if group[i] == group[t] and family[i] == family[t] and i != t]
        # the others' fit is the same for every target of one cluster and group
        if others and (cluster, group[t]) not in others_fit:
            others_fit[(cluster, group[t])] = fit_observed(others)
        after = _after(
            rng,
            pool,
            ks,
            draws,
            lambda chosen, others=others, error=error: error(others + [samples[i] for i in chosen]),
        )
        rows.append(
            Row(
                case=case,
                family=_family(case),
                generation=_generation(sample.key.architecture),
                prior=prior,
                others=_error(others_fit[(cluster, group[t])], sample) if others else prior,
                after=after,
                pool=len(pool),
                seen_all=error([samples[i] for i in mine if i != t]),
            )
        )
    return rows


def _time_split(
    cases: Sequence[Case], samples: Sequence[RunSample]
) -> list[tuple[Case, str, str, float, float, int]]:
    """Per source with releases: calibrate on all but its newest release, predict that."""
    out: list[tuple[Case, str, str, float, float, int]] = []
    releases: dict[str, set[str]] = {}
    for case in cases:
        if release_of(case):
            releases.setdefault(case.source, set()).add(release_of(case))
    for source, names in sorted(releases.items()):
        if len(names) < 2:
            continue
        newest = max(names)
        new = [i for i, c in enumerate(cases) if c.source == source and release_of(c) == newest]
        seen = [s for i, s in enumerate(samples) if i not in set(new)]
        cal = fit_observed(seen)
        for i in new:
            s = samples[i]
            runs = sum(1 for o in seen if (o.key.gpu, o.key.recipe) == (s.key.gpu, s.key.recipe))
            out.append(
                (
                    cases[i],
                    _family(cases[i]),
                    _generation(s.key.architecture),
                    abs(s.predicted_s / s.observed_s - 1),
                    _error(cal, s),
                    runs,
                )
            )
    return out


def _pct(x: float) -> str:
    return "–" if math.isnan(x) else f"{100 * x:.1f}"


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if values else math.nan


def _cells(families: Sequence[str]) -> list[tuple[str, str]]:
    order = ("A100 (Ampere)", "H100/H200 (Hopper)", "Blackwell")
    return [(f, g) for f in families for g in order]


def learning_table(result: LearningResult, ks: Sequence[int] = KS) -> str:
    """Markdown: per family and GPU generation, held-out rows and mean APE (%) at k = 0 (prior
    and others seen) and each k, the worst row at k = 3, calibrated on every other row, the
    floor (mean over the rows whose key has another run, their count in brackets) and the
    targets (``TARGET_*``)."""
    head = " | ".join(f"k = {k} mean APE %" for k in ks)
    lines = [
        f"| family | GPU generation | held-out rows | k = 0: prior mean APE % | k = 0: other "
        f"groups seen % | {head} | worst row at k = 3 % | all other rows seen % | floor: own "
        "key's other runs seen % (rows) | rows with < 10 runs to draw from "
        "| targets (k = 0 / k = 3 mean; no row beyond 25 % at k = 3) |",
        "| --- | --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in ks) + " | ---: | ---: "
        "| ---: | ---: | --- |",
    ]
    k3 = list(ks).index(3) if 3 in ks else None
    for family, generation in [*_cells(("dense", "MoE")), ("dense", "all"), ("MoE", "all")]:
        rows = [
            r for r in result.rows if r.family == family and generation in ("all", r.generation)
        ]
        if not rows:
            continue
        after = [_mean([r.after[j] for r in rows]) for j in range(len(ks))]
        worst = max(r.after[k3] for r in rows) if k3 is not None else math.nan
        blackwell = generation == "Blackwell"
        k0_target = (TARGET_K0_BLACKWELL if blackwell else TARGET_K0)[family]
        prior = _mean([r.prior for r in rows])
        verdict = "–"
        if k3 is not None:
            meets_k0 = prior <= k0_target
            meets_k3 = after[k3] <= TARGET_K3[family] and worst <= TARGET_K3_ROW
            verdict = (
                f"≤{100 * k0_target:.0f} / ≤{100 * TARGET_K3[family]:.0f}: "
                f"{'meets' if meets_k0 else 'misses'} / {'meets' if meets_k3 else 'misses'}"
            )
        label = f"**{generation}**" if generation == "all" else generation
        floors = [r.floor for r in rows if not math.isnan(r.floor)]
        lines.append(
            f"| {family} | {label} | {len(rows)} | {_pct(prior)} | "
            f"{_pct(_mean([r.others for r in rows]))} | "
            + " | ".join(_pct(a) for a in after)
            + f" | {_pct(worst)} | {_pct(_mean([r.seen_all for r in rows]))} | "
            f"{_pct(_mean(floors))} ({len(floors)}) | "
            f"{sum(1 for r in rows if r.pool < 10)} | {verdict} |"
        )
    return "\n".join(lines)


def cluster_table(result: LearningResult, ks: Sequence[int] = KS) -> str:
    """Markdown: ``result.cluster_rows`` (``cluster_curve``, the service's way) per family and
    GPU generation: held-out rows, mean APE (%) of the prior, with the cluster's other groups
    seen, at each k and with every other run of the cluster seen, the worst row at k = 3 (at
    the largest k when 3 is not among ``ks``) and the rows with fewer than 10 runs of their
    cluster to draw from."""
    head = " | ".join(f"k = {k} %" for k in ks)
    j = list(ks).index(3) if 3 in ks else len(ks) - 1
    lines = [
        f"| family | GPU generation | held-out rows | k = 0: prior % | k = 0: the cluster's "
        f"other groups seen % | {head} | worst row at k = {ks[j]} % | the cluster's other "
        "runs seen % | rows with < 10 of their cluster's runs to draw from |",
        "| --- | --- | ---: | ---: | ---: | "
        + " | ".join("---:" for _ in ks)
        + " | ---: | ---: | ---: |",
    ]
    for family, generation in [*_cells(("dense", "MoE")), ("dense", "all"), ("MoE", "all")]:
        rows = [
            r
            for r in result.cluster_rows
            if r.family == family and generation in ("all", r.generation)
        ]
        if not rows:
            continue
        label = f"**{generation}**" if generation == "all" else generation
        lines.append(
            f"| {family} | {label} | {len(rows)} | {_pct(_mean([r.prior for r in rows]))} | "
            f"{_pct(_mean([r.others for r in rows]))} | "
            + " | ".join(_pct(_mean([r.after[i] for r in rows])) for i in range(len(ks)))
            + f" | {_pct(max(r.after[j] for r in rows))} | "
            f"{_pct(_mean([r.seen_all for r in rows]))} | "
            f"{sum(1 for r in rows if r.pool < 10)} |"
        )
    return "\n".join(lines)


def learning_rows_table(result: LearningResult, ks: Sequence[int] = KS) -> str:
    """Markdown: every target of ``result``, worst at k = 3 first (at the largest k when 3 is
    not among ``ks``): its source, configuration, family, generation, APE (%) at k = 0 (prior
    and others seen) and each k, its floor (``key_floor``) and how many runs its pool held.
    Which rows the learning curve
    cannot correct, and which rows a drawn outlier of their pool drags up (a row worse at k = 3
    than with the other groups alone)."""
    head = " | ".join(f"k = {k} %" for k in ks)
    lines = [
        f"| source | configuration | family | GPU generation | k = 0: prior % | k = 0: other "
        f"groups seen % | {head} | all other rows seen % | floor % | runs in its pool |",
        "| --- | --- | --- | --- | ---: | ---: | "
        + " | ".join("---:" for _ in ks)
        + " | ---: | ---: | ---: |",
    ]
    j = list(ks).index(3) if 3 in ks else len(ks) - 1
    for r in sorted(result.rows, key=lambda r: (-r.after[j], r.case.source, r.case.config_id)):
        lines.append(
            f"| {r.case.source} | {r.case.config_id} | {r.family} | {r.generation} | "
            f"{_pct(r.prior)} | {_pct(r.others)} | "
            + " | ".join(_pct(a) for a in r.after)
            + f" | {_pct(r.seen_all)} | {_pct(r.floor)} | {r.pool} |"
        )
    return "\n".join(lines)


def time_split_table(result: LearningResult) -> str:
    """Markdown: per source, family and generation, the newest release's rows predicted by the
    prior and by the calibration learnt on the older releases (and everything else)."""
    lines = [
        "| source (newest release) | family | GPU generation | rows | runs seen on their GPU "
        "type and recipe (median) | prior mean APE % | calibrated mean APE % | calibrated "
        "max APE % |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    keys = sorted({(c.source, f, g) for c, f, g, *_ in result.time_split})
    for source, family, generation in keys:
        rows = [
            r
            for r in result.time_split
            if (r[0].source, r[1], r[2]) == (source, family, generation)
        ]
        newest = release_of(rows[0][0])
        lines.append(
            f"| {source} ({newest}) | {family} | {generation} | {len(rows)} | "
            f"{int(np.median([r[5] for r in rows]))} | {_pct(_mean([r[3] for r in rows]))} | "
            f"{_pct(_mean([r[4] for r in rows]))} | {_pct(max(r[4] for r in rows))} |"
        )
    return "\n".join(lines)


def learning_section(
    *, date: str, command: str, result: LearningResult, constants_note: str
) -> str:
    """The learning-curve section of RESULTS.md."""
    begin, end = LEARNING_MARKERS
    return "\n\n".join(
        [
            begin,
            "## Learning curve: held-out error after k observed runs (issue 24)",
            f"Measured {date} with `{command}` ({constants_note}; the learning curve always "
            "starts from the shipped constants). The observed-runs calibration "
            "(`planner calibrate observe`, `planner.calibration.observed`) learns from the "
            "published runs as a planner in production would from its jobs: each source is a "
            "cluster. Targets are the held-out rows; k = 0 prior: the model as shipped; k = 0 "
            "other groups seen: calibrated on every usable row except those on the target's GPU "
            "type and recipe; k = 1, 3, 10: plus k runs of its family drawn at random from the "
            f"others on its GPU type and recipe ({DRAWS} draws per target, all of them when "
            "fewer; "
            "`benchmarks/accuracy/learning.py`). Mean APE = mean |predicted - measured| / "
            "measured.",
            learning_table(result),
            "### Time split: calibrated on the older releases, predicting the newest",
            "Every other usable row of every source is seen too (runs on the row's GPU type and "
            "recipe: counted in the table).",
            time_split_table(result),
            "### As the service learns: each cluster's runs apart",
            "The service fits one calibration per cluster from that cluster's finished jobs "
            "(`observed/<scheduler>/<cluster>`, `planner.service.learning`); the table above "
            "fits every source at once. Here each target is predicted from its own source's "
            "runs only: k = 0 from its runs on other GPU types and recipes (the model alone "
            "where there are none), then k of its runs of the target's family on its GPU type "
            f"and recipe ({DRAWS} draws), and from every other run of the source "
            "(`cluster_curve`).",
            cluster_table(result),
            end,
        ]
    )
