"""How much a key learns from the other runs and from its own, per model family on a GPU
architecture: the cell rule of the observed-runs calibration (``planner.calibration.observed``,
part 5 of its docstring; pure).

The tree of ``observed_fit`` gives every key (cluster, GPU type, recipe, framework) the
posterior of a nested normal model: what its parents learnt, moved by its own runs with the
gain ``n·tau² / (n·tau² + sigma²)``. Its variances are learnt per level over every family and
architecture, so a cell whose keys disagree lends its neighbours a bias they do not share
(Megatron-Bridge's Hopper MoE FP8 runs, 10-90 % slower than predicted, carried to other
publishers' BF16 runs that the model predicts within a few percent), and a cell whose keys
agree gives one run of a new key as much weight as a cell whose keys do not (a dense A100 key
of llm-foundry, whose runs are within 3 % of the model on average, moved by 60 % of one run's
7 % scatter). The rule measures both on the cell's own runs:

* **Transfer slope** (``TransferRule.slopes``): each key's runs are predicted by what the tree
  knows without that key (``TreeFit.left_out_mean`` at the key level: the exact
  leave-one-key-out mean of the linearised model), and the least-squares slope of the runs'
  log ratios on those predictions, weighted by the runs' precisions, within ``[0, 1]``, is how
  much of the prediction a key inherits: the cross-validated calibration slope of a prediction
  rule (van Houwelingen & le Cessie 1990, *Predictive value of statistical models*, Statistics
  in Medicine 9(11); Copas 1983, *Regression, prediction and shrinkage*, JRSS B 45(3)),
  never above 1 (learning never amplifies what it transfers). One slope per cell and kind of
  key: ``own`` where the key's cluster has other keys in the cell (a publisher's bias moving to
  its next GPU type or recipe), ``new`` where it has none (one publisher's bias lent to
  another). A cell's slope has the kind's slope pooled over every cell as its prior, worth the
  information of the kind's average key (partial pooling: one odd key, such as the one run of
  a new publisher, does not set its cell's slope alone); a cell without a key of a kind takes
  the pooled slope.
* **One publisher's runs alone in a group are not lent** (``lent_level``): runs of one other
  cluster that are alone in a group on the key's path (the key's own aside) cannot tell that
  cluster's bias from the group's deviation (the two are confounded: no second publisher ran
  there), so they lend the key nothing. A key is predicted from what the tree knows without its
  own runs (``TreeFit.left_out_mean`` at the key level) unless the runs its GPU type and recipe
  hold besides are one other cluster's; then from what the tree knows without that group,
  unless the runs its width holds besides are one other cluster's, and so on up. The slopes are
  measured on those predictions. A key that names no cluster is no other publisher's. On the
  published runs, with the H100 BF16 runs held out, the dense Hopper 16-bit width is
  torchtitan's 96 GB H100 alone, 18 % slower than predicted, which the tree and the slope lent
  to llm-foundry's and Megatron-LM's H100 BF16 runs (within 2 % of the model on average): on
  the learning curve dense Hopper with the other groups seen went from 8.6 % to 6.4 % (the
  model alone 6.5 %), at k = 1 from 7.3 % to 6.6 %, at k = 3 from 7.0 % to 6.5 %; Hopper MoE
  with the other groups seen from 13.1 % to 13.7 % (the model alone 15.4 %), at k = 1 from
  14.9 % to 14.3 % (``benchmarks/RESULTS.md``).
* **Own-run gain** (``TransferRule.key_var``): a key's runs move it from the sloped prediction
  by ``n·s² / (n·s² + sigma²)``, where ``s²`` is the cell's variance of a key's mean log
  ratio around its sloped prediction, by moments (a key of ``n`` Huber-weighted runs with mean
  deviation ``e`` contributes ``n·e² - sigma²``, summed over the cell's keys over their runs,
  at least 0: the ANOVA estimator of a variance component, Searle, Casella & McCulloch 1992,
  *Variance Components*, §3.6) and ``sigma`` the within-key spread of the key's cell: the
  pooled root-mean-square deviation of the runs of the cell's keys from their key's mean,
  shrunk toward the prior run noise as the tree's per-family noise is
  (``planner.calibration.observed``). Where a cell's keys repeat their runs more closely than
  the family's do on other architectures, one run says more of its key, and less where they
  scatter more: on the published runs 0.063 on dense A100, 0.074 on dense Hopper and 0.088
  on dense Blackwell, against 0.068 over dense; on the learning curve the total at k = 3 went
  from 6.26 % to 6.21 % and dense Blackwell from 5.78 % to 5.65 % (``benchmarks/RESULTS.md``).

Measured on the learning curve (``benchmarks/accuracy/learning.py``; ``benchmarks/RESULTS.md``):
Hopper MoE with the other groups seen 18.2 -> 14.3 % (the prior is 14.6 %) and at k = 1
17.2 -> 14.8 %, dense at k = 1 6.4 -> 5.9 %.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

from planner.calibration.observed_runs import LEVELS, RunKey

__all__ = [
    "KEY_LEVEL",
    "KINDS",
    "Members",
    "TransferRule",
    "fit_rule",
    "kinds_of",
    "lent_level",
    "members_of",
    "shifts",
]

Float = NDArray[np.float64]
Int = NDArray[np.int64]

KEY_LEVEL: Final = LEVELS.index("key")
"""The key level's index in ``LEVELS``: where the rule applies."""
KINDS: Final = ("own", "new")
"""A key whose cluster has other keys in its cell (``own``) or none (``new``)."""
_TINY: Final = 1e-12

Members = Mapping[tuple[str, ...], Mapping[str, frozenset[tuple[str, ...]]]]
"""Per group above the key level (``RunKey.path`` prefix, the root included): its clusters
and, for each, the groups one level down that hold the cluster's runs (``members_of``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TransferRule:
    """The rule of a fit (module docstring): ``slopes[(architecture, family, kind)]`` in
    ``[0, 1]``, ``pooled[kind]`` the slope over every cell (for a cell without a key of the
    kind), ``key_var[(architecture, family)]`` the variance (log², >= 0) of a key's mean
    around its sloped prediction."""

    slopes: dict[tuple[str, str, str], float]
    pooled: dict[str, float]
    key_var: dict[tuple[str, str], float]

    def slope(self, architecture: str, family: str, kind: str) -> float:
        """The transfer slope of a key of ``kind`` (``KINDS``) in the cell."""
        return self.slopes.get((architecture, family, kind), self.pooled.get(kind, 1.0))


def kinds_of(keys: Sequence[RunKey]) -> list[str]:
    """Each run's kind (``KINDS``): ``own`` when its cluster has another key in its cell."""
    members: dict[tuple[str, str, str], set[tuple[str, ...]]] = {}
    for k in keys:
        members.setdefault((k.architecture, k.family, k.cluster), set()).add(k.path()[KEY_LEVEL])
    return [
        "own" if len(members[(k.architecture, k.family, k.cluster)]) > 1 else "new" for k in keys
    ]


def members_of(keys: Sequence[RunKey]) -> Members:
    """``Members`` of the runs' ``keys``."""
    out: dict[tuple[str, ...], dict[str, set[tuple[str, ...]]]] = {}
    for k in set(keys):
        path = k.path()
        for level in range(KEY_LEVEL):
            out.setdefault(path[level], {}).setdefault(k.cluster, set()).add(path[level + 1])
    return {
        prefix: {c: frozenset(ks) for c, ks in clusters.items()} for prefix, clusters in out.items()
    }


def lent_level(key: RunKey, members: Members) -> int:
    """The level (``LEVELS`` index, at most ``KEY_LEVEL``) of the group on ``key``'s path
    whose left-out mean the key is predicted from (module docstring): from the key up, or from
    below its deepest group with runs for a key none of whose runs was seen, the walk climbs
    while the parent's runs outside the group reached, the key's own aside, are none or all
    one other cluster's. ``KEY_LEVEL``: what the tree knows without the key; 0: nothing (a
    correction of 1). A key that names no cluster is no other publisher: ``KEY_LEVEL``."""
    if not key.cluster:
        return KEY_LEVEL
    path = key.path()
    level = KEY_LEVEL
    while level > 0 and path[level - 1] not in members:
        level -= 1
    while level > 0:
        outside = {c for c, below in members[path[level - 1]].items() if below - {path[level]}}
        if len(outside) > 1 or key.cluster in outside:
            break
        level -= 1
    return level


def _slope(num: float, den: float) -> float:
    return float(min(max(num / den, 0.0), 1.0)) if den > _TINY else 1.0


def fit_rule(
    keys: Sequence[RunKey],
    *,
    predicted: Float,
    log_ratio: Float,
    weight: Float,
    noise: Float,
) -> TransferRule:
    """The rule from the runs: ``predicted`` shape ``(n,)``, each run's log correction by what
    the tree knows without its key, or without the group its key is not lent by
    (``lent_level``), and its MoE model's effect; ``log_ratio`` shape ``(n,)``,
    log of observed over the model's step (less the residual model's offset); ``weight`` the
    runs' Huber weights and ``noise`` their within-key spread per cell (log-sd, module
    docstring), shape ``(n,)``."""
    kinds = kinds_of(keys)
    precision = weight / noise**2
    cells: dict[tuple[str, str, str], int] = {}
    cell = np.fromiter(
        (
            cells.setdefault((k.architecture, k.family, kind), len(cells))
            for k, kind in zip(keys, kinds, strict=True)
        ),
        np.int64,
        len(keys),
    )
    information = precision * predicted**2
    num = np.bincount(cell, weights=precision * log_ratio * predicted, minlength=len(cells))
    den = np.bincount(cell, weights=information, minlength=len(cells))
    pooled = {
        kind: _slope(
            float(sum(num[c] for name, c in cells.items() if name[2] == kind)),
            float(sum(den[c] for name, c in cells.items() if name[2] == kind)),
        )
        for kind in KINDS
    }
    ids: dict[tuple[str, ...], int] = {}
    key = np.fromiter((ids.setdefault(k.path()[KEY_LEVEL], len(ids)) for k in keys), np.int64)
    # the pooled slope of a kind is a cell's prior, worth the information of its average key
    key_information = np.bincount(key, weights=information, minlength=len(ids))
    key_kind = dict(zip(key.tolist(), kinds, strict=True))
    worth = {
        kind: float(np.mean([key_information[g] for g, k in key_kind.items() if k == kind] or 0.0))
        for kind in KINDS
    }
    slopes = {
        name: _slope(
            float(num[c]) + worth[name[2]] * pooled[name[2]], float(den[c]) + worth[name[2]]
        )
        for name, c in cells.items()
    }
    by_run = np.fromiter((slopes[name] for name in cells), np.float64, len(cells))[cell]
    deviation = log_ratio - by_run * predicted
    runs = np.bincount(key, weights=weight, minlength=len(ids))
    mean = np.bincount(key, weights=weight * deviation, minlength=len(ids)) / np.maximum(
        runs, _TINY
    )
    sigma2 = np.bincount(key, weights=noise**2, minlength=len(ids)) / np.bincount(
        key, minlength=len(ids)
    )
    cell_ids: dict[tuple[str, str], int] = {}
    key_cell = np.zeros(len(ids), dtype=np.int64)
    for k, g in zip(keys, key, strict=True):
        key_cell[g] = cell_ids.setdefault((k.architecture, k.family), len(cell_ids))
    spread = np.bincount(key_cell, weights=runs * mean**2 - sigma2, minlength=len(cell_ids))
    total = np.bincount(key_cell, weights=runs, minlength=len(cell_ids))
    key_var = {
        name: float(max(spread[c], 0.0) / max(total[c], _TINY)) for name, c in cell_ids.items()
    }
    return TransferRule(slopes=slopes, pooled=pooled, key_var=key_var)


def shifts(
    rule: TransferRule,
    keys: Sequence[RunKey],
    key_of_run: Int,
    *,
    mean: Float,
    left_out: Float,
    gain: Float,
    weight: Float,
    noise: Float,
) -> Float:
    """What the rule takes off each key group's cumulative ``(u, v)``, shape ``(G, 2)``: with
    ``mu`` its left-out mean (``left_out``, shape ``(G, 2)``: what the tree knows without it,
    or without the group it is not lent by, ``lent_level``), ``m`` its posterior (``mean``)
    and ``g`` the tree's gain on its own runs (``gain``, shape ``(G,)``: along their mean
    Jacobian, ``planner.calibration.observed._runs_gain``),
    its runs say ``mu + (m - mu) / g``, and the rule's mean is ``w·mu + k·((m - mu) / g +
    (1 - w)·mu)`` (``w`` its cell's slope, ``k`` the own-run gain; module docstring).
    ``key_of_run`` shape ``(n,)``: each run's key group; ``weight`` and ``noise`` the runs'
    Huber weights and within-key spread per cell (log-sd)."""
    size = mean.shape[0]
    runs = np.bincount(key_of_run, weights=weight, minlength=size)
    sigma2 = np.bincount(key_of_run, weights=noise**2, minlength=size) / np.maximum(
        np.bincount(key_of_run, minlength=size), 1
    )
    first: dict[int, tuple[RunKey, str]] = {}
    for k, kind, g in zip(keys, kinds_of(keys), key_of_run, strict=True):
        first.setdefault(int(g), (k, kind))
    out = np.zeros_like(mean)
    for g, (k, kind) in first.items():
        w = rule.slope(k.architecture, k.family, kind)
        tau2 = rule.key_var.get((k.architecture, k.family), 0.0)
        n = float(runs[g])
        own = n * tau2 / (n * tau2 + sigma2[g]) if n * tau2 + sigma2[g] > 0 else 0.0
        told = (mean[g] - left_out[g]) / gain[g] if gain[g] > 1e-6 else np.zeros(2)
        out[g] = mean[g] - (w * left_out[g] + own * (told + (1.0 - w) * left_out[g]))
    return out
