"""Nested random effects of the compute and network factors, fitted exactly on a tree (pure).

The observed-runs calibration (``planner.calibration.observed``) gives every run ``i`` a
compute log factor ``u`` and a network log factor ``u + v`` that multiply the model's compute
terms ``C_i`` and network terms ``N_i`` (``online_split.ModelSplit``), so that

    log t_i = log(C_i·e^u + N_i·e^(u+v)) + r_i + e_i,      e_i ~ N(0, sigma²)

with ``r_i`` the residual model's offset. ``theta = (u, v)`` is the sum of one deviation per
level of a tree of groups (global -> GPU architecture -> model family on it -> its precision
bits -> GPU and recipe -> cluster, GPU, recipe and framework), each deviation
``N(0, diag(tau_u², tau_v²))`` of its level: a linear mixed model with nested random effects
(Henderson's mixed-model equations; Gelman et al., *Bayesian Data Analysis*, 3rd ed., 2013,
§5.5 and §15.2). A group
seen through few runs stays near its parent: the shrinkage toward the prior.

Fitting. The likelihood is linearised at the current estimate (Gauss-Newton): with ``q_i`` the
network share ``N_i·e^v / (C_i + N_i·e^v)`` (its compute terms as the crossed effects below
leave them), ``d log t_i / d(u, v) = (1, q_i)``. On a tree, the
posterior of a linear Gaussian model is found exactly by two passes of 2x2 information
messages (belief propagation on a tree; Pearl 1988, ch. 4; the Rauch-Tung-Striebel smoother is
the chain case): upward, every group sends its parent what its runs say about the parent's
cumulative effect (``Λ - Λ(Λ + T⁻¹)⁻¹Λ``, the Woodbury form, valid for singular ``Λ``);
downward, every group combines what its parent knows without it with its own runs. The result
is each group's cumulative ``(u, v)`` and its exact 2x2 posterior covariance, at O(runs +
groups) cost. Runs far from their group (beyond ``huber_k·sigma``) are down-weighted as in
``online_stats`` (Huber 1964, iteratively reweighted).

Crossed effects. Beside the tree, a run may belong to groups of other factors that cut across
it (``fit_tree``'s ``crossed``: the shape of a MoE model, run on several GPU types and
clusters), each group a deviation ``c`` of the compute log factor of a part ``M_i`` of the
run's compute terms (``crossed_s``: for a MoE model routed dropless by a learnt router its
routed experts' seconds, where the model errs per model; otherwise all of ``C_i``:
``planner.calibration.observed``, part 2), with prior ``N(0, tau_c²)``, its ``tau_c`` learnt
as the levels' are:

    t_i = C_i·e^u + M_i·e^u·(e^c - 1) + N_i·e^(u+v),    d log t_i / dc = M_i·e^(u+c) / t_i,

the crossed share ``s_i``. Megatron-MoE-ModelZoo's Qwen3-235B-A22B long-context runs on 256
H100 (yanring/Megatron-MoE-ModelZoo ``best_practice/qwen3/readme.md`` @ e8650517d6; the
``mz_qwen3_235b_longctx_*`` rows of ``moe_h100_2025``), dropless and force-balanced at each
sequence length, measure dropless/balanced step ratios of 1.245, 1.209, 1.150 and 1.089 at
16k, 32k, 64k and 128k tokens, where the model's routed experts, at one busiest-rank factor
for every length, give 1.052, 1.041, 1.030 and 1.018: the measured pairs need one factor of
1.61-1.65 on the routed experts' seconds at every length, while the share of the step those
seconds hold falls with the length as attention grows. An effect on the whole step learnt on
some lengths therefore mispredicts the others. They are fitted by backfitting (Hastie &
Tibshirani 1990, *Generalized Additive Models*, §4.3) inside the Gauss-Newton steps: the tree
from what the crossed effects leave, then each crossed group's posterior given the tree,
linearised at the current fit (the weighted regression on ``s_i`` of what the tree and the
other crossed factors leave, with its prior), a run beyond ``huber_k`` of its sd from its
group's fit down-weighted once more (one Huber step within the group: a MoE model's runs on
one GPU architecture include another publisher's 2.5x outlier of it, Megatron-Bridge's H100
Qwen3-30B-A3B in container 25.11, which otherwise set the model's effect for Automodel's run
of it: learning curve at k = 3, Automodel's row 22.7 -> 17.5 %, Hopper MoE 15.6 -> 15.3 %, the
other generations' cells at k = 3 unchanged). The tree goes first, so a crossed group keeps
only what the tree's groups cannot explain; on the published runs the effects stop moving by
the tenth step (fitted on all 364 rows of ``benchmarks/accuracy``: the largest MoE model
effect, GPT-OSS-120B on Blackwell, 0.079 after 10 steps, 0.078 after 80; Qwen3-235B-A22B on
Hopper -0.056 and -0.049).

Identification. ``v`` is learnt only where the network shares ``q_i`` of a group's runs differ
(the design ``(1, q_i)`` then has rank 2) or a run has no network terms; elsewhere the data
determine ``u + q·v`` and the prior, whose ``tau_v`` is smaller than ``tau_u`` at the lower
levels, puts the correction mostly into ``u``: a single factor for the whole step, as the
online calibration does when a job's split is not determined.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

__all__ = ["GN_ITERATIONS", "TreeFit", "fit_tree"]

Float = NDArray[np.float64]
Int = NDArray[np.int64]

GN_ITERATIONS: Final = 10
"""Gauss-Newton steps (each re-linearises the network share and re-weights the runs); the
model is linear in ``u`` and mildly non-linear in ``v``, so the steps stop moving by the
fourth."""
_TINY: Final = 1e-12
FIXED_VAR: Final = 1e-12
"""The prior variance of a fixed group's deviation (``fit_tree``'s ``fixed``): zero to the
fit's precision, finite so the two passes need no special case."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TreeFit:
    """Posterior of every group's cumulative ``(u, v)``.

    Per level ``l`` (0 = root): ``mean[l]`` shape ``(G_l, 2)``, ``cov[l]`` shape ``(G_l, 2, 2)``,
    ``info[l]`` the Fisher information of the group's own runs (subtree) about its cumulative
    effect, shape ``(G_l, 2, 2)``, and ``num_runs[l]`` shape ``(G_l,)``. ``residual`` shape
    ``(n,)``: each run's ``log t - log t_hat`` at the fit; ``weight`` its final Huber weight;
    ``prior_log_sd`` shape ``(L, 2)``: the levels' ``tau`` the fit ended with. Per crossed
    factor ``k`` (``fit_tree``'s ``crossed``): ``crossed_mean[k]`` and ``crossed_var[k]`` shape
    ``(G_k,)``, each group's posterior mean and variance of its deviation of ``u``, and
    ``crossed_log_sd[k]`` its learnt ``tau_c``. ``left_out_mean[l]`` shape ``(G_l, 2)``: each
    group's cumulative ``(u, v)`` predicted from every run but its own (its parent's posterior
    without it: the exact leave-one-group-out mean of the linearised model at the fit's
    weights and variances; the root's is zero).
    """

    mean: tuple[Float, ...]
    cov: tuple[Float, ...]
    info: tuple[Float, ...]
    num_runs: tuple[Int, ...]
    residual: Float
    weight: Float
    prior_log_sd: Float
    crossed_mean: tuple[Float, ...] = ()
    crossed_var: tuple[Float, ...] = ()
    crossed_log_sd: tuple[float, ...] = ()
    left_out_mean: tuple[Float, ...] = ()


def _step(
    compute_s: Float, network_s: Float, crossed_s: Float, theta: Float, crossed: Float
) -> tuple[Float, Float, Float]:
    """Each run's log step ``log(C·e^u + M·e^u·(e^c - 1) + N·e^(u+v))`` at ``theta = (u, v)``
    (shape ``(n, 2)``) and crossed effects ``c`` (shape ``(n,)``), with the network share
    ``q = d log t / dv`` and the crossed share ``d log t / dc = M·e^(u+c) / t`` (module
    docstring; ``M`` = ``crossed_s``)."""
    compute = compute_s + crossed_s * np.expm1(crossed)
    network = network_s * np.exp(theta[:, 1])
    total = np.maximum(compute + network, _TINY)
    log_t: Float = theta[:, 0] + np.log(total)
    return log_t, network / total, crossed_s * np.exp(crossed) / total


def _inv(m: Float) -> Float:
    """Batched inverse of symmetric 2x2 matrices, shape ``(k, 2, 2)``."""
    a, b, d = m[:, 0, 0], m[:, 0, 1], m[:, 1, 1]
    det = np.maximum(a * d - b * b, _TINY)
    out = np.empty_like(m)
    out[:, 0, 0] = d / det
    out[:, 1, 1] = a / det
    out[:, 0, 1] = out[:, 1, 0] = -b / det
    return out


def _mv(m: Float, x: Float) -> Float:
    """Batched matrix-vector product, ``(k, 2, 2) @ (k, 2)``."""
    out: Float = np.einsum("kij,kj->ki", m, x)
    return out


def _mm(a: Float, b: Float) -> Float:
    out: Float = np.einsum("kij,kjl->kil", a, b)
    return out


def _scatter(index: Int, values: Float, size: int) -> Float:
    """Sum of ``values`` (shape ``(n, ...)``) per ``index`` into ``size`` rows."""
    out = np.zeros((size, *values.shape[1:]))
    np.add.at(out, index, values)
    return out


def _precision_of(var: Float) -> Float:
    """Diagonal prior precisions, shape ``(G, 2, 2)``, of per-group variances ``(G, 2)``."""
    out = np.zeros((var.shape[0], 2, 2))
    out[:, 0, 0] = 1.0 / var[:, 0]
    out[:, 1, 1] = 1.0 / var[:, 1]
    return out


def _posterior(
    parents: Sequence[Int],
    leaf_info: Float,
    leaf_vec: Float,
    prior_var: Sequence[Float],
) -> tuple[list[Float], list[Float], list[Float], list[Float], list[Float]]:
    """Exact posterior means and covariances of the cumulative effects on the tree, the
    subtrees' information, each group's posterior second moment of its own deviation
    ``E[delta²]`` (shape ``(G, 2)``, for the variance components) and its left-out mean
    (``TreeFit.left_out_mean``).

    ``parents[l]`` (l >= 1) maps level ``l``'s groups to level ``l - 1``'s; ``leaf_info`` /
    ``leaf_vec`` are the deepest level's information matrix and vector (shape ``(G, 2, 2)`` /
    ``(G, 2)``); ``prior_var[l]`` shape ``(G_l, 2)``: ``tau_u², tau_v²`` of each group's
    deviation."""
    depth = len(parents)
    info: list[Float] = [np.zeros(0)] * depth
    vec: list[Float] = [np.zeros(0)] * depth
    up_info: list[Float] = [np.zeros(0)] * depth
    up_vec: list[Float] = [np.zeros(0)] * depth
    info[-1], vec[-1] = leaf_info, leaf_vec
    for level in range(depth - 1, 0, -1):
        lam, eta = info[level], vec[level]
        prior_precision = _precision_of(prior_var[level])
        gain = _mm(lam, _inv(lam + prior_precision))  # Λ(Λ + T⁻¹)⁻¹
        up_info[level] = lam - _mm(gain, lam)
        up_vec[level] = eta - _mv(gain, eta)
        size = int(parents[level - 1].shape[0]) if level > 1 else 1
        info[level - 1] = _scatter(parents[level], up_info[level], size)
        vec[level - 1] = _scatter(parents[level], up_vec[level], size)
    root_precision = info[0] + _precision_of(prior_var[0])
    cov = [np.zeros(0)] * depth
    mean = [np.zeros(0)] * depth
    cov[0] = _inv(root_precision)
    mean[0] = _mv(cov[0], vec[0])
    second = [np.zeros(0)] * depth
    left_out = [np.zeros_like(mean[0])] * depth
    second[0] = mean[0] ** 2 + np.stack([cov[0][:, 0, 0], cov[0][:, 1, 1]], axis=1)
    for level in range(1, depth):
        parent = parents[level]
        # what the parent knows without this child, then widened by the child's deviation
        outside = _inv(cov[level - 1])[parent] - up_info[level]
        outside_vec = _mv(_inv(cov[level - 1]), mean[level - 1])[parent] - up_vec[level]
        outside_cov = _inv(outside)
        prior_mean = _mv(outside_cov, outside_vec)
        left_out[level] = prior_mean
        widened = outside_cov.copy()
        widened[:, 0, 0] += prior_var[level][:, 0]
        widened[:, 1, 1] += prior_var[level][:, 1]
        down = _inv(widened)
        precision = down + info[level]
        cov[level] = _inv(precision)
        mean[level] = _mv(cov[level], _mv(down, prior_mean) + vec[level])
        # the deviation delta = theta_child - theta_parent: given the parent, the child's
        # posterior is (T⁻¹ + Λ)⁻¹(T⁻¹·theta_parent + η), so Cov(child, parent) = A·Σ_parent
        # with A = (T⁻¹ + Λ)⁻¹T⁻¹
        prior_precision = _precision_of(prior_var[level])
        gain = _mm(_inv(prior_precision + info[level]), prior_precision)
        parent_cov = cov[level - 1][parent]
        cross = _mm(gain, parent_cov)
        var = cov[level] + parent_cov - cross - np.swapaxes(cross, 1, 2)
        delta = mean[level] - mean[level - 1][parent]
        second[level] = delta**2 + np.stack([var[:, 0, 0], var[:, 1, 1]], axis=1)
    return mean, cov, info, second, left_out


def _huber(
    residual: Float, jac: Float, *, leaf_cov: Float, precision: Float, sigma2: Float, k: float
) -> Float:
    """Huber weights from each run's leave-one-out residual: its residual to its key's fit
    without it, over the predictive sd ``sqrt(J·Sigma_-i·J' + sigma²)`` (a lone run is judged
    against what its parents predict, not against a fit to itself)."""
    # h = J·Sigma·J' is the run's share of its own fit (leverage); leaving it out divides its
    # residual by (1 - precision·h) and gives the predictive variance h / (1 - precision·h)
    lever = np.einsum("ki,kij,kj->k", jac, leaf_cov, jac)
    keep = np.maximum(1.0 - precision * lever, 1e-6)
    deleted = residual / keep
    sd = np.sqrt(lever / keep + sigma2)
    out: Float = np.minimum(1.0, k * sd / np.maximum(np.abs(deleted), _TINY))
    return out


def fit_tree(
    parents: Sequence[Int],
    leaf_of_run: Int,
    *,
    compute_s: Float,
    network_s: Float,
    log_observed: Float,
    offset: Float,
    prior_log_sd: Float,
    noise_log_sd: Float,
    huber_k: float,
    prior_dof: float = 0.0,
    fixed: Sequence[NDArray[np.bool_]] | None = None,
    crossed: Sequence[Int] = (),
    crossed_prior_log_sd: Sequence[float] = (),
    crossed_s: Float | None = None,
) -> TreeFit:
    """Fit the nested compute/network factors (module docstring).

    ``parents``: per level ``l >= 1`` the parent of each group (``parents[0]`` is unused, an
    empty array); ``leaf_of_run`` shape ``(n,)``: each run's group at the deepest level;
    ``compute_s``, ``network_s`` shape ``(n,)``: the model's compute and network terms (s,
    compute > 0); ``log_observed`` shape ``(n,)``: log of the observed step time (s);
    ``offset`` shape ``(n,)``: the residual model's log correction; ``prior_log_sd`` shape
    ``(L, 2)``: ``tau_u, tau_v`` per level; ``noise_log_sd`` shape ``(n,)``: each run's sigma.
    ``prior_dof`` > 0 learns the variance components from the data: after each pass, level
    ``l``'s ``tau²`` becomes ``(prior_dof·tau0² + sum of E[delta²]) / (prior_dof + G_l)`` over
    its ``G_l`` groups (the EM update of a mixed model's variance components, Laird & Ware
    1982, with a scaled-inverse-chi² prior of ``prior_dof`` pseudo-groups at ``prior_log_sd``,
    BDA3 §3.3); 0 keeps ``prior_log_sd``.
    ``fixed``: per level, shape ``(G_l,)``, the groups whose deviation is zero (their prior
    variance is ``FIXED_VAR``): the group is its parent, as a run that states no release is
    its key; they are left out of the level's ``tau²``. None: no group is fixed.
    ``crossed``: per crossed factor, shape ``(n,)``, each run's group (``-1``: none of the
    factor's), with ``crossed_prior_log_sd`` its ``tau_c`` where the fit starts (module
    docstring; learnt as the levels' are when ``prior_dof`` > 0), multiplying ``crossed_s``
    (shape ``(n,)``, s, ``0 <= crossed_s <= compute_s``: the part of each run's compute terms
    the crossed effects scale, the MoE routed experts' seconds; None: all of ``compute_s``).
    Raises ``ValueError`` when the two do not have one entry per factor.
    """
    if len(crossed) != len(crossed_prior_log_sd):
        raise ValueError("crossed and crossed_prior_log_sd need one entry per crossed factor")
    depth = len(parents)
    prior0 = np.asarray(prior_log_sd, dtype=np.float64) ** 2
    prior_var = prior0.copy()
    num_leaves = int(leaf_of_run.max()) + 1 if leaf_of_run.size else 0
    if depth > 1 and parents[-1].shape[0] != num_leaves:
        num_leaves = int(parents[-1].shape[0])
    sizes = [int(parents[level].shape[0]) if level else 1 for level in range(depth)]
    if depth > 1:
        sizes[-1] = num_leaves
    free = [
        np.ones(size, dtype=bool) if fixed is None else ~np.asarray(fixed[level], dtype=bool)
        for level, size in enumerate(sizes)
    ]

    def group_var() -> list[Float]:
        """Each group's prior variances at the levels' current ``tau²``, shape ``(G_l, 2)``."""
        return [
            np.where(f[:, None], var, FIXED_VAR) for f, var in zip(free, prior_var, strict=True)
        ]

    sigma2 = np.asarray(noise_log_sd, dtype=np.float64) ** 2
    theta = np.zeros((leaf_of_run.shape[0], 2))
    weight = np.ones(leaf_of_run.shape[0])
    residual = np.zeros(leaf_of_run.shape[0])
    mean: list[Float] = []
    cov: list[Float] = []
    info: list[Float] = []
    left_out: list[Float] = []
    y = log_observed - offset
    routed = compute_s if crossed_s is None else crossed_s
    leaf_cov = np.zeros((leaf_of_run.shape[0], 2, 2))
    effects = _Crossed(
        leaf_of_run.shape[0], crossed, crossed_prior_log_sd, dof=prior_dof, huber_k=huber_k
    )

    def at(total: Float) -> tuple[Float, Float]:
        """Each run's residual and crossed share at the tree's current ``theta`` and crossed
        effects summing to ``total``."""
        log_t, _, share = _step(compute_s, network_s, routed, theta, total)
        return y - log_t, share

    for _ in range(GN_ITERATIONS):
        u, v = theta[:, 0], theta[:, 1]
        predicted, q, _ = _step(compute_s, network_s, routed, theta, effects.total())
        residual = y - predicted
        jac = np.stack([np.ones_like(q), q], axis=1)
        weight = _huber(
            residual, jac, leaf_cov=leaf_cov, precision=weight / sigma2, sigma2=sigma2, k=huber_k
        )
        pseudo = residual + u + q * v  # J·theta + residual: the linearised observation
        scale = weight / sigma2
        outer = jac[:, :, None] * jac[:, None, :] * scale[:, None, None]
        leaf_info = _scatter(leaf_of_run, outer, num_leaves)
        leaf_vec = _scatter(leaf_of_run, jac * (scale * pseudo)[:, None], num_leaves)
        mean, cov, info, second, left_out = _posterior(parents, leaf_info, leaf_vec, group_var())
        theta = mean[-1][leaf_of_run]
        leaf_cov = cov[-1][leaf_of_run]
        effects.update(at, scale)
        if prior_dof > 0:
            for level in range(depth):
                groups = int(free[level].sum())
                seen = second[level][free[level]].sum(axis=0)
                prior_var[level] = (prior_dof * prior0[level] + seen) / (prior_dof + groups)
    residual = at(effects.total())[0]
    counts: list[Int] = [np.bincount(leaf_of_run, minlength=num_leaves).astype(np.int64)]
    for level in range(depth - 1, 0, -1):
        size = int(parents[level - 1].shape[0]) if level > 1 else 1
        counts.insert(
            0, np.bincount(parents[level], weights=counts[0], minlength=size).astype(np.int64)
        )
    return TreeFit(
        mean=tuple(mean),
        cov=tuple(cov),
        info=tuple(info),
        num_runs=tuple(counts),
        residual=residual,
        weight=weight,
        prior_log_sd=np.sqrt(prior_var),
        crossed_mean=tuple(effects.mean),
        crossed_var=tuple(effects.var),
        crossed_log_sd=tuple(math.sqrt(t) for t in effects.tau2),
        left_out_mean=tuple(left_out),
    )


class _Crossed:
    """The crossed effects of ``fit_tree`` (module docstring): per factor, each run's group
    (``-1``: none), the groups' posterior means and variances and the factor's ``tau_c²``;
    ``huber_k`` as the runs'."""

    def __init__(
        self,
        runs: int,
        crossed: Sequence[Int],
        prior_log_sd: Sequence[float],
        *,
        dof: float,
        huber_k: float,
    ) -> None:
        self.runs = runs
        self.huber_k = huber_k
        self.index = [np.asarray(f, dtype=np.int64) for f in crossed]
        self.member = [f >= 0 for f in self.index]
        self.slot = [np.where(m, f, 0) for f, m in zip(self.index, self.member, strict=True)]
        self.tau0 = [float(sd) ** 2 for sd in prior_log_sd]
        self.tau2 = list(self.tau0)
        self.dof = dof
        self.mean = [np.zeros(int(f.max()) + 1 if f.size else 0) for f in self.index]
        self.var = [np.full(m.shape[0], t) for m, t in zip(self.mean, self.tau0, strict=True)]

    def total(self) -> Float:
        """Each run's sum of its groups' means over the factors, shape ``(n,)``."""
        out = np.zeros(self.runs)
        for mean, slot, member in zip(self.mean, self.slot, self.member, strict=True):
            out = out + np.where(member, mean[slot], 0.0)
        return out

    def update(self, at: Callable[[Float], tuple[Float, Float]], precision: Float) -> None:
        """One backfitting pass over the factors, each linearised where the others left it:
        ``at(total)`` gives each run's residual and crossed share ``s`` (``d log t / dc``)
        with the crossed effects summing to ``total`` (shape ``(n,)`` each); a factor's group
        is the weighted regression through the origin of ``residual + s·c_own`` on ``s``
        with its prior (the normal posterior; ``s = 1`` is the mean of what the others
        leave), with the runs' ``precision`` (Huber weight over sigma², shape ``(n,)``), each
        run down-weighted again beyond ``huber_k`` of its sd from its group's fit; then its
        ``tau_c²`` (EM)."""
        for k, (slot, member) in enumerate(zip(self.slot, self.member, strict=True)):
            size = self.mean[k].shape[0]
            residual, share = at(self.total())
            share = np.where(member, share, 0.0)
            partial = residual + share * self.mean[k][slot]
            weight = np.where(member, precision, 0.0)
            info = np.bincount(slot, weights=weight * share**2, minlength=size) + 1.0 / self.tau2[k]
            self.mean[k] = (
                np.bincount(slot, weights=weight * share * partial, minlength=size) / info
            )
            # Huber within the group (one step from its weighted fit): a run far from its
            # group's other runs is mostly its key's, which the tree has taken, so the rest
            # of it would otherwise land on the group whole
            spread = 1.0 / np.sqrt(np.maximum(precision, _TINY))
            far = np.abs(partial - share * self.mean[k][slot])
            weight = weight * np.minimum(1.0, self.huber_k * spread / np.maximum(far, _TINY))
            info = np.bincount(slot, weights=weight * share**2, minlength=size) + 1.0 / self.tau2[k]
            self.mean[k] = (
                np.bincount(slot, weights=weight * share * partial, minlength=size) / info
            )
            self.var[k] = 1.0 / info
            if self.dof > 0 and size:
                seen = float((self.mean[k] ** 2 + self.var[k]).sum())
                self.tau2[k] = (self.dof * self.tau0[k] + seen) / (self.dof + size)
