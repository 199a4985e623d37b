"""Calibration from observed runs: learn how far the model's step time is off per cluster, GPU
type, precision recipe, framework and its release (and model family), from runs that were
measured; apply
it to new predictions (pure; the CLI, the service and the benchmark call the same functions:
``observe_runs`` / ``fit_observed`` to learn, ``ObservedCalibration.apply`` / ``correct``).

Input: observed runs (``planner.calibration.observed_runs``: JSON lines, one run each,
``{"scenario": {<scenario format>}, "iteration_time_s": <measured s>}``, with optional
``tokens_per_s``, ``memory_per_gpu_bytes`` and ``cluster``).

What is learnt (``fit_observed``), in six parts:

1. **Compute and network factors per group.** The model's step is the sum of its
   ``breakdown_s`` terms; the compute terms ``C`` (``compute``, ``pp_bubble``, ``optimizer``) and
   the network terms ``N`` (the exposed ``tp/cp/ep/pp/dp`` communication) are those of the online
   split (``online_split.ModelSplit``). A run's step is ``f_c·C + f_n·N``; ``log f_c = u`` and
   ``log f_n = u + v`` are the sum of one deviation per level of ``LEVELS``: the global bias of
   the model, its bias on a GPU architecture (Ampere, Hopper, Blackwell), on a model family on
   that architecture (dense, MoE: the model errs differently on them, and differently per
   generation: Blackwell MoE runs 30 % too fast where dense ones are within 10 % and Hopper MoE
   within 10 %, so no family level is shared across architectures), on a family and
   architecture at a precision width (16, 8, 4 bits), on one GPU type with one recipe, on
   one cluster, GPU, recipe and framework (the key), and on one release of that framework
   (``training.framework_version``, such as the NeMo container ``25.11``): one stack's releases
   can differ by more than its GPUs do on young kernels (Megatron-Bridge's own archive,
   NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary-archive.md`` @ ``067f987df03b``:
   GB200 Qwen3-30B-A3B MXFP8 at one layout 23,766 tokens/s/GPU in container 25.11, 40,706 in
   26.06; Llama3-8B on 8 GB200 at one layout 31,357 in 25.09, 31,508 in 25.11). The
   shrinkage rule of a release: its log factor is its key's plus a deviation of prior sd
   ``tau_release`` (learnt as every level's), so its ``n`` runs of noise ``sigma`` move it
   from the key's by the share ``n·tau² / (n·tau² + sigma²)`` of their mean log ratio to the
   key's correction (the normal-normal posterior: 0.2 for one run at the prior's tau 0.05 and
   sigma 0.10, 0.9 for three runs once tau has grown to 0.2), and the key learns from every
   release's runs. A release never seen takes its key's
   correction (with ``tau_release`` more uncertainty); a run that states no release is its
   key's (no deviation of its own). Each
   deviation has a normal prior whose variance per level is learnt from the groups themselves,
   starting from ``ObservedParams.prior_log_sd`` (EM for variance components with
   ``prior_dof`` pseudo-groups at it); the posterior is found exactly on the tree of groups
   (``observed_fit``). A key seen through few runs stays near what its parents learnt: a new
   GPU type (B300) is predicted from its specs and what was learnt on the other parts of its
   architecture and precision width. The network factor is told apart where a group's runs
   expose different shares of communication; ``network_separated`` says where the data
   determine it at least as well as the prior does.
2. **A model effect for MoE models.** A MoE run's compute log factor ``u`` also gets the
   deviation of its model's shape, token dispatcher and routing mode
   (``observed_runs.model_label``: layers, widths, experts and top-k, the dispatcher, and
   whether a learnt router routes them dropless) on its GPU
   architecture, a group crossed with the tree (it spans GPU types, recipes and clusters;
   ``observed_fit``, crossed effects), of prior sd ``moe_model_prior_log_sd``
   learnt as the levels' are. The model errs on one MoE model alike on the GPU types of one
   generation: on Megatron-Bridge's 2025 runs GPT-OSS-120B's step is predicted 38-50 % short
   on B200, GB200 and GB300 and Qwen3-235B-A22B's in BF16 9 % short on GB200 and GB300, where
   the other Blackwell MoE runs are 4-40 % short; without the effect a GPU type's few runs of
   one model moved the other models' predictions on it by up to 30 points (the learning curve,
   ``benchmarks/accuracy/learning.py``, at k = 3: Blackwell MoE mean 12.7 -> 11.4 %, rows
   beyond 25 % 5 -> 1; Hopper MoE 15.2 -> 15.3 %; dense 5.7 % either way). Per architecture,
   as the model family is (``LEVELS``): on Hopper GPT-OSS-120B is predicted within 1 % by
   Automodel's run, and one effect for every architecture carried the Blackwell runs' 0.12 to
   it (5 -> 21 % at k = 3). Dense models get none: one effect shared by both families learnt
   a sd of 0.04 (dense models agree), and a dense one of their own took the dense mean at
   k = 3 from 5.8 to 5.6 % but the worst A100 row from 24 to 30 %, beyond the 25 % bound. A
   cluster effect crossed with the tree (one publisher's bias on all its GPUs) was measured too
   and left out: fitted to convergence it learnt a sd of 0.05 (the key level holds a cluster's
   bias per GPU type already, and Megatron-Bridge is the only publisher on Blackwell, so its
   bias there is the architecture's); it took Hopper MoE with the other groups seen from 18.1
   to 15.4 % but moved no MoE cell at k = 3 by more than 0.2 points. Per routing mode: a
   model's dropless runs err apart from its forced-balance or capacity runs
   (``observed_runs.model_label``); one effect for both modes left the dropless and forced
   runs of one key 0.07-0.17 apart in log ratio. Split, the learning curve at k = 3 went
   5.474 -> 5.464 % over all held-out rows (Hopper MoE 11.05 -> 10.99 %); the time split
   (calibrated on Megatron-Bridge 25.09, predicting 25.11) 12.31 -> 12.38 %, its Hopper MoE
   rows 17.73 -> 18.25 %: the Qwen3-235B and GPT-OSS-120B effects of the balanced runs no
   longer pool the dropless ones. A routing mode no run of the model used gets no effect
   (a new model's spread): lending it the model's other mode's effect made Hopper MoE at
   k = 1 12.52 -> 12.60 %. Per token dispatcher: all-to-all, flex (DeepEP) and all-gather run
   different exchange and permutation kernels (``observed_runs.model_label``), and NeMo 25.11
   runs Qwen3 and DeepSeek-V3 with the flex dispatcher on GB200/GB300 and all-to-all on
   B200 and H100; split, the learning curve at k = 3 went 5.428 -> 5.359 % over all held-out
   rows (Blackwell MoE 9.24 -> 8.37 %, with the other groups seen 11.59 -> 9.75 %; Hopper MoE
   10.98 -> 10.88 %), the time split 12.31 -> 12.16 % (``benchmarks/RESULTS.md``).
   What the effect multiplies (``_effect_seconds``): for a model routed dropless by a learnt
   router, the routed experts' seconds (``RunSample.routed_s``, the prediction's
   ``moe_routed_compute_s``), ``t = C·e^u + M·e^u·(e^c - 1) + N·e^(u+v)``: the model prices
   that routing by one busiest-rank imbalance factor (``planner.perf.moe_mlp.moe_imbalance``),
   and ModelZoo's Qwen3-235B-A22B long-context pairs need one factor of 1.61-1.65 on those
   seconds at every length from 16k to 128k tokens, whose share of the step falls with the
   length (``observed_fit``, crossed effects). For the other routing modes (forced balance,
   a capacity: the busiest rank's load is known to the model) and for a prediction that does
   not give the routed seconds, all the compute terms, ``t = C·e^(u+c) + N·e^(u+v)``. On the
   learning curve at k = 3 over the 251 held-out rows: an effect on the whole step, network
   included, 5.464 %; on the compute terms for every mode 5.441 % (Hopper MoE 10.99 ->
   11.11 %); on the routed seconds for every mode 5.472 % (Hopper MoE 11.38 %: the balanced
   and capacity runs of Qwen3-235B-A22B on H100 err with the length the other way, -5 % at
   16k to +7 % at 128k, not by their routed experts, and an effect on their routed seconds,
   large where those hold a small share, carried to Megatron-Bridge's 4k-token capacity run,
   18.3 -> 21.1 %); routed seconds for dropless models and the compute terms otherwise
   5.428 % (Blackwell MoE 9.77 -> 9.24 %, Hopper MoE 10.99 -> 10.98 %, at k = 10 11.00 ->
   10.90 %; rows beyond 25 % 4 -> 3; no cell worse by more than 0.04 point at k = 0-10).
3. **A residual model** on documented features (``residual.FEATURES``): ridge regression or
   nothing, chosen and scored by cross-validation over whole keys (``residual.ResidualModel``).
   The factors are fitted again with its correction as an offset (backfitting, two passes:
   Hastie & Tibshirani 1990, *Generalized Additive Models*, §4.3).
4. **A memory factor** per group (runs that give ``memory_per_gpu_bytes``), by the same tree
   with one factor.
5. **The cell rule** (``observed_transfer``; ``ObservedParams.cell_rule``): the tree's
   variances are learnt over every family and architecture, so on its own it lends one
   publisher's bias to another's runs where the cell's publishers disagree, and lets one run
   move a new key as far in a cell whose keys agree with the model as in one whose keys do not.
   Per model family on a GPU architecture the fit measures both on the cell's own runs and
   moves each key's compute and network factors to them: a key inherits the share of what the
   other runs predict for it that the leave-one-key-out predictions of its cell earn (the
   cross-validated calibration slope, 0 to 1, one for keys whose cluster has other keys in the
   cell and one for keys whose cluster has none, each partially pooled over the cells), and its
   own runs move it by the Bayes gain under the cell's spread of keys around those predictions.
   A key none of whose runs was seen takes its cell's slope times what its parents learnt. A
   group whose runs, the key's own aside, are all one other cluster's lends the key nothing
   (its deviation cannot be told from that publisher's bias): the key is predicted from the
   runs outside it, and the slopes are measured on those predictions
   (``observed_transfer.lent_level``). On the learning curve
   (``benchmarks/accuracy/learning.py``, ``benchmarks/RESULTS.md``) with the other groups seen,
   Hopper MoE went from 18.2 % to 14.3 % (prior 14.6 %) and dense A100 from 5.3 % to 4.8 %
   (prior 4.7 %); at k = 1 dense went from 6.4 % to 5.9 % (prior 5.5 %) and Hopper MoE from
   17.2 % to 14.8 %; at k = 3 dense went from 5.7 % to 5.6 % and MoE from 13.5 % to 13.6 %
   (Blackwell 11.4 -> 11.8 %: the cell's keys spread less around the slope's prediction than
   the tree assumed, so three runs of a key move it less).
6. **A local residual within keys** (``local_residual.LocalResidual``): the runs of one key
   still differ by configuration after parts 1-5 (llm_foundry's A100-80GB runs: fully
   recomputed 7B-30B models 5-13 % too slow, 125M ones 4 % too fast, 760M at micro-batch 48-96
   17-21 % too fast), so a prediction is moved by the kernel-weighted mean of its key's runs'
   residuals (centred on the key; Nadaraya-Watson with pseudo-runs of residual 0), the runs
   whose features (``residual.FEATURES``) are nearest weighing most, and stays at the key's
   factor when they are unlike it or few. A MoE run with a model effect is compared with its
   model's runs of the key only (the effect holds how the models differ, as for the noise).
   Bandwidth and pseudo-runs are chosen per model family by leave-one-run-out cross-validation
   within keys with the one-standard-error rule, or no term. On the learning curve
   (``benchmarks/accuracy/learning.py``) dense A100 went at k = 3 from 4.66 to 4.61 % and at
   k = 10 from 4.43 to 4.22 %, with every other run seen from 4.31 to 3.46 %; dense Hopper
   5.83 -> 5.76, 5.78 -> 5.44 and 5.60 -> 4.58 %; dense Blackwell at k = 3 5.33 -> 3.95 %; no
   MoE cell moved at k = 1-10 by more than 0.04 points (MoE Hopper with every other run seen
   13.82 -> 14.02 %: leaving out one of a long-context series keeps a weak MoE kernel that
   moves it 2 points the wrong way).

The run noise ``sigma`` (log-sd of a run around its key's factors, per model family) is the
pooled within-key root-mean-square deviation of the runs' log ratios (within key and model
for the MoE runs that have a model effect: how the models of one key differ is the effect's,
not noise), shrunk toward
``noise_log_sd`` with ``noise_dof`` pseudo-runs as the online calibration's spread is
(``planner.calibration.online``, step 4). The mean square, not the median absolute deviation
the online spread uses: it sets how far one run moves its key, and the model's errors have
heavy tails (on the published runs the within-key MAD gives 0.050 for dense models, the root
mean square 0.067). The cell rule (part 5) pools the same spread per family on one GPU
architecture instead: how far one run moves its key is a property of the cell's keys.

A run whose residual at the first tree fit is more than ``OUTLIER_SDS`` robust sds (the
pooled MAD) and a factor of ``OUTLIER_RATIO`` off the median of its key's 4 runs or more is
left out and the others fitted again (``ObservedCalibration.outliers``, each with
``outlier_reason``): one job that hung at 20 times its key's pace among 8 would otherwise set
every run's sigma near 0.7, and with a second such job the fit of the others moved the
within-key residual of the runs beside them by a factor of 0.66 to 2.5 (held-out error 0.43
against the model's 0.37; ``benchmarks/learning_outliers.py``).

Applying (``ObservedCalibration.apply``): the model's own fields are left as computed (the
``planner predict`` contract, as ``OnlineCalibration.apply`` leaves them) and
``calibrated_iteration_time_s`` (``f_c·C + f_n·N`` times the residual and local factors),
``calibrated_tokens_per_s``, ``calibrated_mfu``, ``calibrated_time_to_train_s``,
``calibrated_memory_per_gpu_bytes`` and a ``calibration`` object (``factor``, ``log_sd``,
``level``, ``num_jobs``, ``method: observed_runs``, ``components``, ``key``) are added.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypedDict

import numpy as np
from numpy.typing import NDArray

import planner.perf
from planner import __version__
from planner.calibration.local_residual import LocalResidual, LocalResidualJson
from planner.calibration.observed_fit import TreeFit, fit_tree
from planner.calibration.observed_runs import (
    FAMILIES,
    LEVELS,
    RELEASE_LEVEL,
    ObservedRun,
    RunKey,
    RunKeyJson,
    RunSample,
    indexed_samples_from_runs,
    is_dropless,
    read_observed_runs,
    recipe_of,
    routed_seconds,
    run_key,
    sample_of,
    samples_from_runs,
)
from planner.calibration.observed_transfer import (
    KEY_LEVEL,
    Members,
    TransferRule,
    fit_rule,
    lent_level,
    members_of,
    shifts,
)
from planner.calibration.online import OnlineCalibration
from planner.calibration.online_split import ModelSplit
from planner.calibration.online_types import CalibrationKey
from planner.calibration.residual import FEATURES, ResidualModel, ResidualModelJson, run_features
from planner.errors import CalibrationError, SpecError
from planner.perf.constants import CONSTANTS_FILE
from planner.specs.scenario import Scenario

__all__ = [
    "FORMAT",
    "LEVELS",
    "GroupJson",
    "KeySummaryJson",
    "MemoryGroupJson",
    "ModelEffect",
    "ModelEffectJson",
    "ObservedCalibration",
    "ObservedCalibrationJson",
    "ObservedParams",
    "ObservedParamsJson",
    "ObservedRun",
    "ObservedRunJson",
    "RunKey",
    "RunSample",
    "RunsFit",
    "cross_validated_errors",
    "far_off_lines",
    "fit_observed",
    "is_observed_calibration",
    "observe_runs",
    "outlier_reason",
    "read_observed_runs",
    "recipe_of",
    "run_key",
    "sample_of",
    "samples_from_runs",
]

FORMAT: Final = "planner-observed-runs/11"
"""The ``format`` of the calibration file (operator models of ``planner calibrate fit`` are
``planner-calibration/1``): what tells the two kinds apart. Version 8 keyed the MoE model
effects by model and routing mode (``observed_runs.model_label``); version 9 applies a
dropless-routed model's effect to the routed experts' seconds only (its runs carry
``routed_s``) and no model effect to the network terms; version 10 keys them by the token
dispatcher too; version 11 moves a key by what its runs say along their Jacobian
(``_runs_gain``: a version-10 key whose runs were mostly network time could hold a network
factor of hundreds). A file of an earlier version, whose effects were learnt on another part of the
step or under labels a prediction no longer finds, is refused with the command that learns it
again."""

Float = NDArray[np.float64]
Int = NDArray[np.int64]

OUTLIER_SDS: Final = 3.0
"""Robust log-sds off its key's median residual beyond which a run is left out of the fit
(``_far_off``): a run of normally spread noise lies beyond 3 sds with probability 0.27 %."""
OUTLIER_MIN_RUNS: Final = 4
"""Runs a key (noise group) needs before one of them can be left out as far off: of 2, neither
can be told the odd one; of 3, one run twice off the other two may be the model's error on
its configuration (the dev stack's DDP jobs beside two CPU hogs: the communication-bound one
of three was left out)."""
OUTLIER_RATIO: Final = 2.0
"""...and the factor it must be off by as well: the prior's worst error on the 364 published
runs is 44 % (``benchmarks/RESULTS.md``), so a run twice as slow or fast as its key says is
the run's (a hang, a stall, other hardware), not the model's error."""


# -- the JSON documents ---------------------------------------------------------------------


class ObservedParamsJson(TypedDict):
    """``ObservedParams.to_json``: its fields (``prior_log_sd`` as ``[compute, network]``
    pairs)."""

    prior_log_sd: list[list[float]]
    noise_log_sd: float
    noise_dof: float
    huber_k: float
    memory_prior_log_sd: list[float]
    memory_noise_log_sd: float
    residual_min_runs: int
    prior_dof: float
    moe_model_prior_log_sd: float
    cell_rule: bool


class KeySummaryJson(RunKeyJson):
    """One row of ``ObservedCalibration.summary``: the key, its runs, compute factor, network
    factor (None where not separated), memory factor (None without measured memory) and the
    uncorrected model's median ``|predicted / observed - 1|`` on its runs."""

    num_runs: int
    compute_factor: float
    network_factor: float | None
    memory_factor: float | None
    model_median_abs_error_ratio: float


class GroupJson(TypedDict):
    """One group of ``ObservedCalibrationJson.groups``: its level (of ``LEVELS``) and key
    prefix, the log factors, their (co)variances, its runs, whether the network factor was
    separated and the log factors predicted for it from the runs outside it."""

    level: str
    group: list[str]
    compute_log_factor: float
    network_log_factor: float
    left_out_compute_log_factor: float
    left_out_network_log_factor: float
    var_u: float
    cov_uv: float
    var_v: float
    num_runs: int
    network_separated: bool


class MemoryGroupJson(TypedDict):
    """One group of ``ObservedCalibrationJson.memory_groups``: level, key prefix, the memory
    log factor, its variance and runs."""

    level: str
    group: list[str]
    memory_log_factor: float
    var_u: float
    num_runs: int


class ModelEffectJson(TypedDict):
    """One entry of ``ObservedCalibrationJson.model_effects``: a GPU architecture and a MoE
    model's shape, token dispatcher and routing mode (``observed_runs.model_label``), its log
    factor, its
    posterior variance and runs."""

    architecture: str
    model: str
    log_factor: float
    var: float
    num_runs: int


class ObservedRunJson(RunKeyJson):
    """One run of ``ObservedCalibrationJson.runs``: its key, the model's compute and network
    terms, the routed experts' part of the compute terms (``RunSample.routed_s``; None: not
    given) and the observed step time (s), the residual features (``FEATURES``), the predicted
    and observed memory per GPU (bytes; observed None when not measured)."""

    compute_s: float
    network_s: float
    routed_s: float | None
    observed_s: float
    features: list[float]
    predicted_memory_bytes: float
    observed_memory_bytes: float | None


class CellSlopeJson(TypedDict):
    """One transfer slope of ``CellRuleJson``: its cell, kind (``observed_transfer.KINDS``)
    and slope."""

    architecture: str
    family: str
    kind: str
    slope: float


class CellKeyJson(TypedDict):
    """One cell's key spread of ``CellRuleJson``: log-sd of a key around its prediction."""

    architecture: str
    family: str
    key_log_sd: float


class CellRuleJson(TypedDict):
    """``ObservedCalibrationJson.cell_rule``: the transfer slopes per cell and kind, the
    pooled slope per kind and the cells' key spreads (``observed_transfer.TransferRule``)."""

    slopes: list[CellSlopeJson]
    pooled: dict[str, float]
    keys: list[CellKeyJson]


class ObservedCalibrationJson(TypedDict):
    """``ObservedCalibration.to_json``: ``format`` (``FORMAT``), the ``prior`` (what model it
    corrects), ``params``, ``levels``, per-family ``noise_log_sd``, the learnt
    ``level_log_sd`` pairs, ``num_runs``, the groups, the memory groups, the MoE models' effects
    with their learnt ``model_log_sd``, the cell rule (None: not applied), the residual model,
    the within-key local residual and the runs."""

    format: str
    prior: dict[str, str]
    params: ObservedParamsJson
    levels: list[str]
    noise_log_sd: dict[str, float]
    level_log_sd: list[list[float]]
    num_runs: int
    groups: list[GroupJson]
    memory_groups: list[MemoryGroupJson]
    model_effects: list[ModelEffectJson]
    model_log_sd: float
    cell_rule: CellRuleJson | None
    residual: ResidualModelJson
    local_residual: LocalResidualJson
    runs: list[ObservedRunJson]


# -- hyper-parameters -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ObservedParams:
    """Hyper-parameters of ``fit_observed``.

    ``prior_log_sd``: per level of ``LEVELS``, the log-sd of a group's deviation from its
    parent, ``(compute, network extra)``, where the fit starts; ``prior_dof`` (2): pseudo-groups
    of it in each level's variance learnt from the data (0 keeps it). Sources: the model's
    held-out mean error per family is 5-25 % and its bias differs by family, GPU generation and
    precision (``benchmarks/RESULTS.md``, Megatron-Bridge's 2025 runs: Blackwell MoE 16-51 %
    too fast per GPU and recipe, Blackwell dense -11 to +11 %, H100 dense FP8 13 % too slow), so
    the global, architecture and family levels allow 0.15; one family and architecture at one
    width 0.10, one GPU type and recipe 0.08 beyond it; frameworks and clusters on one GPU differ
    by about ten percent (the online calibration's ``gpu_level_log_sd``), the network more (its
    fabric), 0.10 / 0.15.
    ``noise_log_sd`` (0.10) and ``noise_dof`` (4): the prior of a run's spread around its key
    (the online calibration's ``prior_spread_log_sd`` and ``prior_spread_dof``).
    ``huber_k``: down-weighting beyond ``huber_k`` sigmas (1.5, as online).
    ``memory_prior_log_sd`` / ``memory_noise_log_sd``: the same for the memory factor (the
    memory model is within 10 % of published peaks: ``benchmarks/RESULTS.md``).
    A release on its key (``tau_release``) 0.05 / 0.05: one framework's releases change the
    step by a few percent on mature paths (Megatron-Bridge's Llama3-8B on 8 GB200 at one
    layout: 31,357 tokens/s/GPU in container 25.09, 31,508 in 25.11) and by 1.7x on young MoE
    kernels (GB200 Qwen3-30B-A3B from 25.11 to 26.06), so it starts narrow and the EM update
    widens it where the releases of one key disagree (three runs of a release 80 % slower than
    twelve of another's take it to 0.24). Started at 0.15 it cost the dense Blackwell rows of
    the learning curve half a point at k = 3 (5.8 -> 6.3 %) and moved no MoE cell by more than
    0.6 (``benchmarks/RESULTS.md``).
    ``residual_min_runs``: fewer runs fit no residual model.
    ``moe_model_prior_log_sd`` (0.10, as a cluster's on one GPU): where the deviation of a MoE
    model's shape starts (module docstring, part 2); 0 fits none.
    ``cell_rule`` (True): how much a key inherits and how much its own runs move it are
    measured per family and architecture (module docstring, part 5;
    ``observed_transfer``); False keeps the tree's posterior."""

    prior_log_sd: tuple[tuple[float, float], ...] = (
        (0.15, 0.30),
        (0.15, 0.20),
        (0.15, 0.20),
        (0.10, 0.10),
        (0.08, 0.08),
        (0.10, 0.15),
        (0.05, 0.05),
    )
    noise_log_sd: float = 0.10
    noise_dof: float = 4.0
    huber_k: float = 1.5
    memory_prior_log_sd: tuple[float, ...] = (0.10, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05)
    memory_noise_log_sd: float = 0.05
    residual_min_runs: int = 12
    prior_dof: float = 2.0
    moe_model_prior_log_sd: float = 0.10
    cell_rule: bool = True

    def __post_init__(self) -> None:
        if len(self.prior_log_sd) != len(LEVELS) or len(self.memory_prior_log_sd) != len(LEVELS):
            raise SpecError("prior_log_sd", f"needs one entry per level of {LEVELS}")
        values = [v for pair in self.prior_log_sd for v in pair]
        values += [*self.memory_prior_log_sd, self.noise_log_sd, self.memory_noise_log_sd]
        values += [self.noise_dof, self.huber_k]
        if not all(isinstance(v, int | float) and math.isfinite(v) and v > 0 for v in values):
            raise SpecError("prior_log_sd", "every log-sd, noise_dof and huber_k must be > 0")
        if not (math.isfinite(self.prior_dof) and self.prior_dof >= 0):
            raise SpecError("prior_dof", f"must be finite and >= 0, got {self.prior_dof}")
        if not (math.isfinite(self.moe_model_prior_log_sd) and self.moe_model_prior_log_sd >= 0):
            raise SpecError(
                "moe_model_prior_log_sd",
                f"must be finite and >= 0 (0: no model effect), got {self.moe_model_prior_log_sd}",
            )
        if self.residual_min_runs < 3:
            raise SpecError("residual_min_runs", f"must be >= 3, got {self.residual_min_runs}")

    def to_json(self) -> ObservedParamsJson:
        """JSON-ready fields."""
        return {
            "prior_log_sd": [list(p) for p in self.prior_log_sd],
            "noise_log_sd": self.noise_log_sd,
            "noise_dof": self.noise_dof,
            "huber_k": self.huber_k,
            "memory_prior_log_sd": list(self.memory_prior_log_sd),
            "memory_noise_log_sd": self.memory_noise_log_sd,
            "residual_min_runs": self.residual_min_runs,
            "prior_dof": self.prior_dof,
            "moe_model_prior_log_sd": self.moe_model_prior_log_sd,
            "cell_rule": self.cell_rule,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ObservedParams:
        """Inverse of ``to_json``; raises ``SpecError`` when malformed."""
        try:
            return cls(
                prior_log_sd=tuple((float(a), float(b)) for a, b in doc["prior_log_sd"]),
                noise_log_sd=float(doc["noise_log_sd"]),
                noise_dof=float(doc["noise_dof"]),
                huber_k=float(doc["huber_k"]),
                memory_prior_log_sd=tuple(float(v) for v in doc["memory_prior_log_sd"]),
                memory_noise_log_sd=float(doc["memory_noise_log_sd"]),
                residual_min_runs=int(doc["residual_min_runs"]),
                prior_dof=float(doc["prior_dof"]),
                moe_model_prior_log_sd=float(doc["moe_model_prior_log_sd"]),
                cell_rule=bool(doc["cell_rule"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecError("params", f"malformed calibration parameters ({exc!r})") from exc


# -- the fitted calibration -----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupFactors:
    """A group's cumulative log factors with their posterior: ``u`` (compute), ``v``
    (network over compute), covariance entries ``var_u``, ``cov_uv``, ``var_v``; ``num_runs``
    behind it; ``network_separated``: its runs tell the network factor at least as well as the
    prior does (their information about ``v``, with ``u`` unknown, >= the prior precision of
    ``v`` at that level); ``left_out_u``, ``left_out_v``: the cumulative factors the tree
    predicts for it from every run outside it (``TreeFit.left_out_mean``), what a key this
    group does not lend to is predicted from (``observed_transfer.lent_level``)."""

    u: float
    v: float
    var_u: float
    cov_uv: float
    var_v: float
    num_runs: int
    network_separated: bool
    left_out_u: float = 0.0
    left_out_v: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryFactor:
    """A group's cumulative log memory factor ``u`` with its variance and run count."""

    u: float
    var_u: float
    num_runs: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelEffect:
    """A MoE model shape's deviation of the compute log factor on one GPU architecture:
    posterior mean ``u``, its variance and the runs behind it."""

    u: float
    var_u: float
    num_runs: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ObservedCorrection:
    """What ``ObservedCalibration.correct`` finds for one prediction: the ``compute_factor``,
    ``network_factor``, ``residual_factor`` and ``local_factor`` (the within-key term,
    ``local_residual``), the whole-step ``factor``, its ``log_sd``, the
    most specific ``level`` learnt from runs and their ``num_runs``, ``network_separated``."""

    compute_factor: float
    network_factor: float
    residual_factor: float
    factor: float
    local_factor: float
    log_sd: float
    level: str
    num_runs: int
    network_separated: bool


@dataclass(slots=True)
class ObservedCalibration:
    """A fitted observed-runs calibration (``fit_observed``; module docstring).

    ``groups[level][prefix]``: ``GroupFactors`` of every group with runs; ``memory`` the same
    for the memory factor; ``residual`` the residual model; ``noise_log_sd`` sigma per family;
    ``level_log_sd`` the learnt ``(tau_u, tau_v)`` of each level (what a group no run has seen
    may deviate by; empty: the parameters'); ``model_effects`` the effects of the MoE model
    shapes per ``(architecture, model shape)`` (module docstring, part 2) and ``model_log_sd``
    their learnt sd (what a MoE model no run has seen may deviate by; 0: no model effect);
    ``rule`` the cell rule (module docstring, part 5; None: the tree's posterior as it is) and
    ``clusters`` the ``(architecture, family, cluster)`` cells with runs (a key of a cluster
    not among them takes its cell's ``new`` slope); ``members`` each group's clusters and the
    groups below holding their runs (``observed_transfer.members_of``: with the rule, a key
    none of whose runs was seen is not predicted from one other cluster's runs alone in a
    group on its path);
    ``samples`` the runs it was fitted on (persisted, so it can be fitted again); ``local`` the
    within-key term (module docstring, part 6; ``local_residual.LocalResidual``);
    ``outliers`` the runs ``fit_observed`` was given and left out, far off their key (index
    among the runs given -> (step over its key's median, runs of the key); ``outlier_reason``),
    not persisted."""

    params: ObservedParams
    groups: list[dict[tuple[str, ...], GroupFactors]]
    memory: list[dict[tuple[str, ...], MemoryFactor]]
    residual: ResidualModel
    noise_log_sd: dict[str, float]
    samples: list[RunSample] = field(default_factory=list)
    prior: dict[str, str] = field(default_factory=dict)
    level_log_sd: tuple[tuple[float, float], ...] = ()
    model_effects: dict[tuple[str, str], ModelEffect] = field(default_factory=dict)
    model_log_sd: float = 0.0
    rule: TransferRule | None = None
    clusters: frozenset[tuple[str, str, str]] = frozenset()
    members: Members = field(default_factory=dict)
    local: LocalResidual = field(default_factory=LocalResidual)
    outliers: dict[int, tuple[float, int]] = field(default_factory=dict)

    @property
    def num_runs(self) -> int:
        """Runs behind the calibration."""
        return len(self.samples)

    def _factors(self, key: RunKey) -> tuple[GroupFactors | None, int, float, float]:
        """The deepest group of ``key``'s path with runs, its level index (a key that states no
        release is found at ``key``: it is its key's group), and the prior variances ``(u, v)``
        of the levels below it (none for the release of a key that states none). With the cell
        rule, a key none of whose runs was seen goes no deeper than the group it is predicted
        without (``observed_transfer.lent_level``), and takes that group's left-out factors
        (what the runs outside it predict) with its parent's posterior variance."""
        path = key.path()
        found: GroupFactors | None = None
        depth = -1
        stop = len(path)
        if self.rule is not None and path[KEY_LEVEL] not in self.groups[KEY_LEVEL]:
            stop = lent_level(key, self.members)
        for level, prefix in enumerate(path[:stop]):
            group = self.groups[level].get(prefix)
            if group is None:
                break
            found, depth = group, level
        unlent = self.groups[stop].get(path[stop]) if stop <= KEY_LEVEL else None
        if found is not None and unlent is not None and depth == stop - 1:
            # predicted from the runs outside the group that does not lend to it
            found = dataclasses.replace(found, u=unlent.left_out_u, v=unlent.left_out_v)
        below = [
            pair
            for level, pair in enumerate(self.level_log_sd or self.params.prior_log_sd)
            if level > depth and (level != RELEASE_LEVEL or key.states_release)
        ]
        if depth == RELEASE_LEVEL and not key.states_release:
            depth -= 1
        return found, depth, sum(a * a for a, _ in below), sum(b * b for _, b in below)

    def correct(
        self,
        key: RunKey,
        compute_s: float,
        network_s: float,
        features: Sequence[float],
        *,
        routed_s: float | None = None,
    ) -> ObservedCorrection:
        """The correction of a prediction with ``compute_s`` and ``network_s`` (s) and
        ``features`` (``residual.FEATURES``) on ``key``; ``routed_s``: the seconds of
        ``compute_s`` the MoE routed experts take, what a dropless-routed model's effect
        multiplies (``_effect_seconds``; None: all of ``compute_s``). ``compute_factor`` is the
        factor on the compute terms, the model effect included. Raises nothing."""
        found, depth, extra_u, extra_v = self._factors(key)
        if found is None:  # no run at all (an empty calibration)
            u = v = var_u = cov_uv = var_v = 0.0
            runs, separated = 0, False
        else:
            u, v = found.u, found.v
            var_u, cov_uv, var_v = found.var_u, found.cov_uv, found.var_v
            deepest = depth == len(LEVELS) - 1 or (
                depth == RELEASE_LEVEL - 1 and not key.states_release
            )
            runs, separated = found.num_runs, found.network_separated and deepest
        var_u += extra_u
        var_v += extra_v
        c = var_c = 0.0
        if self.model_log_sd > 0 and _has_model_effect(key):
            effect = self.model_effects.get((key.architecture, key.model))
            c = 0.0 if effect is None else effect.u
            var_c = self.model_log_sd**2 if effect is None else effect.var_u
        if self.rule is not None and depth < KEY_LEVEL:  # a key none of its runs was seen
            seen = (key.architecture, key.family, key.cluster) in self.clusters
            slope = self.rule.slope(key.architecture, key.family, "own" if seen else "new")
            u, v, c = slope * u, slope * v, slope * c
        # the seconds the model effect multiplies (module docstring, part 2)
        routed = _effect_seconds(key, compute_s, routed_s)
        compute = compute_s + routed * math.expm1(c)
        compute_factor = math.exp(u) * (compute / compute_s if compute_s > 0 else math.exp(c))
        network_factor = math.exp(u + v)
        residual = self.residual.predict_one(features)
        local = self.local.predict_one(_local_group(key, self.params), features)
        total = compute_s + network_s
        corrected = math.exp(u) * compute + network_factor * network_s
        share = network_factor * network_s / corrected if corrected > 0 else 0.0
        crossed = math.exp(u + c) * routed / corrected if corrected > 0 else 0.0
        noise = self.noise_log_sd.get(key.family, self.params.noise_log_sd)
        variance = var_u + 2 * share * cov_uv + share * share * var_v + noise * noise
        variance += crossed * crossed * var_c
        factor = corrected / total * math.exp(residual + local)
        return ObservedCorrection(
            compute_factor=compute_factor,
            network_factor=network_factor,
            residual_factor=math.exp(residual),
            local_factor=math.exp(local),
            factor=factor,
            log_sd=math.sqrt(max(variance, 0.0)),
            level=LEVELS[depth] if depth >= 0 else "none",
            num_runs=runs,
            network_separated=separated,
        )

    def memory_factor(self, key: RunKey) -> MemoryFactor | None:
        """The memory factor of ``key``'s deepest group with measured memory, None without."""
        found: MemoryFactor | None = None
        for level, prefix in enumerate(key.path()):
            group = self.memory[level].get(prefix)
            if group is None:
                break
            found = group
        return found

    def apply(
        self, prediction: Mapping[str, object], scenario: Scenario, *, cluster: str = ""
    ) -> dict[str, object]:
        """A copy of a ``planner predict`` object of ``scenario`` with the calibrated fields
        and the ``calibration`` object added (module docstring; the model's fields untouched).
        A prediction without ``breakdown_s`` or a positive ``iteration_time_s`` (an error
        line) is returned as it is."""
        step = prediction.get("iteration_time_s")
        breakdown = prediction.get("breakdown_s")
        if not isinstance(step, int | float) or not step > 0 or not isinstance(breakdown, Mapping):
            return dict(prediction)
        split = ModelSplit.from_breakdown(breakdown)
        if split is None:
            return dict(prediction)
        key = run_key(scenario, cluster)
        try:
            features = run_features(scenario, breakdown)
        except CalibrationError:  # a breakdown that does not add up: nothing to correct
            return dict(prediction)
        routed = routed_seconds(prediction.get("moe_routed_compute_s"), split.compute_s)
        found = self.correct(key, split.compute_s, split.network_s, features, routed_s=routed)
        factor = found.factor
        out = dict(prediction)
        out["calibrated_iteration_time_s"] = step * factor
        for name, scale in (
            ("tokens_per_s", 1.0 / factor),
            ("tokens_per_s_per_gpu", 1.0 / factor),
            ("mfu", 1.0 / factor),
            ("time_to_train_s", factor),
        ):
            value = prediction.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[f"calibrated_{name}"] = value * scale
        memory = self.memory_factor(key)
        value = prediction.get("memory_per_gpu_bytes")
        if memory is not None and isinstance(value, int | float):
            out["calibrated_memory_per_gpu_bytes"] = value * math.exp(memory.u)
        out["calibration"] = {
            "factor": factor,
            "log_sd": found.log_sd,
            "level": found.level,
            "num_jobs": found.num_runs,
            "method": "observed_runs",
            "components": {
                "compute": {"factor": found.compute_factor},
                "network": {
                    "factor": found.network_factor,
                    "separated": found.network_separated,
                },
                "residual": {"factor": found.residual_factor},
                "local": {"factor": found.local_factor},
            },
            "key": key.to_json(),
        }
        return out

    # -- reporting ------------------------------------------------------------------------------

    def summary(self) -> list[KeySummaryJson]:
        """One row per key with runs: the key, runs, compute and network factors (the latter
        None where not separated), memory factor, and the uncorrected model's median error on
        its runs (``model`` empty: a key's runs of every model are one row)."""
        rows: list[KeySummaryJson] = []
        by_key: dict[RunKey, list[RunSample]] = {}
        for sample in self.samples:
            # one row per key: its runs of every model together
            by_key.setdefault(dataclasses.replace(sample.key, model=""), []).append(sample)
        for key, samples in sorted(by_key.items(), key=lambda kv: kv[0].path()[-1]):
            group = self.groups[-1][key.path()[-1]]
            memory = self.memory_factor(key)
            errors = [abs(s.predicted_s / s.observed_s - 1) for s in samples]
            rows.append(
                {
                    **key.to_json(),
                    "num_runs": group.num_runs,
                    "compute_factor": math.exp(group.u),
                    "network_factor": math.exp(group.u + group.v)
                    if group.network_separated
                    else None,
                    "memory_factor": None if memory is None else math.exp(memory.u),
                    "model_median_abs_error_ratio": float(np.median(errors)),
                }
            )
        return rows

    # -- persistence ----------------------------------------------------------------------------

    def to_json(self) -> ObservedCalibrationJson:
        """The calibration as a JSON-ready document (``format``, what model it corrects,
        parameters, groups, residual model, runs)."""
        return {
            "format": FORMAT,
            "prior": dict(self.prior),
            "params": self.params.to_json(),
            "levels": list(LEVELS),
            "noise_log_sd": dict(self.noise_log_sd),
            "level_log_sd": [list(pair) for pair in self.level_log_sd],
            "num_runs": self.num_runs,
            "groups": [
                {
                    "level": LEVELS[level],
                    "group": list(prefix),
                    "compute_log_factor": g.u,
                    "network_log_factor": g.u + g.v,
                    "left_out_compute_log_factor": g.left_out_u,
                    "left_out_network_log_factor": g.left_out_u + g.left_out_v,
                    "var_u": g.var_u,
                    "cov_uv": g.cov_uv,
                    "var_v": g.var_v,
                    "num_runs": g.num_runs,
                    "network_separated": g.network_separated,
                }
                for level, groups in enumerate(self.groups)
                for prefix, g in sorted(groups.items())
            ],
            "memory_groups": [
                {
                    "level": LEVELS[level],
                    "group": list(prefix),
                    "memory_log_factor": m.u,
                    "var_u": m.var_u,
                    "num_runs": m.num_runs,
                }
                for level, groups in enumerate(self.memory)
                for prefix, m in sorted(groups.items())
            ],
            "model_effects": [
                {
                    "architecture": architecture,
                    "model": model,
                    "log_factor": e.u,
                    "var": e.var_u,
                    "num_runs": e.num_runs,
                }
                for (architecture, model), e in sorted(self.model_effects.items())
            ],
            "model_log_sd": self.model_log_sd,
            "cell_rule": None if self.rule is None else _rule_json(self.rule),
            "residual": self.residual.to_json(),
            "local_residual": self.local.to_json(),
            "runs": [
                {
                    **s.key.to_json(),
                    "compute_s": s.compute_s,
                    "network_s": s.network_s,
                    "routed_s": s.routed_s,
                    "observed_s": s.observed_s,
                    "features": list(s.features),
                    "predicted_memory_bytes": s.predicted_memory_bytes,
                    "observed_memory_bytes": s.observed_memory_bytes,
                }
                for s in self.samples
            ],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ObservedCalibration:
        """Inverse of ``to_json``. Raises ``CalibrationError`` naming what is wrong (another
        kind of file, another format version, a malformed entry)."""
        fmt = doc.get("format")
        if not is_observed_calibration(doc):
            raise CalibrationError(
                f"not an observed-runs calibration: format is {fmt!r}, need {FORMAT} "
                "(written by `planner calibrate observe`)"
            )
        if fmt != FORMAT:
            raise CalibrationError(
                f"format {fmt!r}: this planner reads {FORMAT}; run `planner calibrate observe` "
                "again"
            )
        try:
            params = ObservedParams.from_json(doc["params"])
            groups: list[dict[tuple[str, ...], GroupFactors]] = [{} for _ in LEVELS]
            for g in doc["groups"]:
                level = LEVELS.index(g["level"])
                groups[level][tuple(str(p) for p in g["group"])] = GroupFactors(
                    u=float(g["compute_log_factor"]),
                    v=float(g["network_log_factor"]) - float(g["compute_log_factor"]),
                    var_u=float(g["var_u"]),
                    cov_uv=float(g["cov_uv"]),
                    var_v=float(g["var_v"]),
                    num_runs=int(g["num_runs"]),
                    network_separated=bool(g["network_separated"]),
                    left_out_u=float(g["left_out_compute_log_factor"]),
                    left_out_v=float(g["left_out_network_log_factor"])
                    - float(g["left_out_compute_log_factor"]),
                )
            memory: list[dict[tuple[str, ...], MemoryFactor]] = [{} for _ in LEVELS]
            for m in doc.get("memory_groups", []):
                level = LEVELS.index(m["level"])
                memory[level][tuple(str(p) for p in m["group"])] = MemoryFactor(
                    u=float(m["memory_log_factor"]),
                    var_u=float(m["var_u"]),
                    num_runs=int(m["num_runs"]),
                )
            samples = [
                RunSample(
                    key=RunKey(
                        cluster=str(r["cluster"]),
                        gpu=str(r["gpu"]),
                        architecture=str(r["architecture"]),
                        recipe=str(r["recipe"]),
                        framework=str(r["framework"]),
                        release=str(r["release"]),
                        family=str(r["family"]),
                        model=str(r["model"]),
                    ),
                    compute_s=float(r["compute_s"]),
                    network_s=float(r["network_s"]),
                    observed_s=float(r["observed_s"]),
                    features=tuple(float(v) for v in r["features"]),
                    predicted_memory_bytes=float(r["predicted_memory_bytes"]),
                    observed_memory_bytes=None
                    if r.get("observed_memory_bytes") is None
                    else float(r["observed_memory_bytes"]),
                    routed_s=None if r.get("routed_s") is None else float(r["routed_s"]),
                )
                for r in doc.get("runs", [])
            ]
            noise = {str(k): float(v) for k, v in dict(doc["noise_log_sd"]).items()}
            level_log_sd = tuple((float(a), float(b)) for a, b in doc.get("level_log_sd", []))
            if level_log_sd and len(level_log_sd) != len(LEVELS):
                raise CalibrationError(f"level_log_sd: needs one pair per level of {LEVELS}")
            prior = {str(k): str(v) for k, v in dict(doc.get("prior", {})).items()}
            model_effects = {
                (str(e["architecture"]), str(e["model"])): ModelEffect(
                    u=float(e["log_factor"]), var_u=float(e["var"]), num_runs=int(e["num_runs"])
                )
                for e in doc["model_effects"]
            }
            model_log_sd = float(doc["model_log_sd"])
            rule = _rule_of(doc["cell_rule"])
            local = LocalResidual.from_json(doc["local_residual"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CalibrationError(f"malformed observed-runs calibration ({exc!r})") from exc
        except SpecError as exc:
            raise CalibrationError(f"malformed observed-runs calibration: {exc}") from exc
        values = list(noise.values()) + [
            x
            for level in groups
            for g in level.values()
            for x in (g.u, g.v, g.var_u, g.var_v, g.left_out_u, g.left_out_v)
        ]
        values += [model_log_sd, *(x for e in model_effects.values() for x in (e.u, e.var_u))]
        if rule is not None:
            values += [*rule.slopes.values(), *rule.pooled.values(), *rule.key_var.values()]
        if not all(math.isfinite(x) for x in values):
            raise CalibrationError("malformed observed-runs calibration: a value is not finite")
        return cls(
            params=params,
            groups=groups,
            memory=memory,
            residual=ResidualModel.from_json(doc["residual"]),
            local=local,
            noise_log_sd=noise,
            samples=samples,
            prior=prior,
            level_log_sd=level_log_sd,
            model_effects=model_effects,
            model_log_sd=model_log_sd,
            rule=rule,
            clusters=_clusters([s.key for s in samples]),
            members=members_of([s.key for s in samples]),
        )

    def stale_warnings(self) -> list[str]:
        """Why the corrections may not fit this planner's model (they were learnt against
        another version or other efficiency constants); empty when they match."""
        now = model_fingerprint()
        if not self.prior or self.prior == now:
            return []
        return [
            f"learnt against planner {self.prior.get('planner_version')} with efficiency "
            f"constants {self.prior.get('constants_sha256', '')[:12]}, this is planner "
            f"{now['planner_version']} with {now['constants_sha256'][:12]}: the corrections "
            "may be stale; run `planner calibrate observe` again"
        ]

    def dumps(self) -> str:
        """``to_json`` as JSON text."""
        return json.dumps(self.to_json(), indent=1, sort_keys=False) + "\n"


def _rule_json(rule: TransferRule) -> CellRuleJson:
    return {
        "slopes": [
            {"architecture": a, "family": f, "kind": kind, "slope": w}
            for (a, f, kind), w in sorted(rule.slopes.items())
        ],
        "pooled": dict(rule.pooled),
        "keys": [
            {"architecture": a, "family": f, "key_log_sd": math.sqrt(var)}
            for (a, f), var in sorted(rule.key_var.items())
        ],
    }


def _rule_of(doc: Any) -> TransferRule | None:
    """Inverse of ``_rule_json`` (None stays None); raises ``KeyError``, ``TypeError`` or
    ``ValueError`` when malformed."""
    if doc is None:
        return None
    return TransferRule(
        slopes={
            (str(e["architecture"]), str(e["family"]), str(e["kind"])): float(e["slope"])
            for e in doc["slopes"]
        },
        pooled={str(k): float(v) for k, v in dict(doc["pooled"]).items()},
        key_var={
            (str(e["architecture"]), str(e["family"])): float(e["key_log_sd"]) ** 2
            for e in doc["keys"]
        },
    )


def is_observed_calibration(doc: object) -> bool:
    """True when ``doc`` (a parsed JSON document) is an observed-runs calibration file, of
    this format version or another."""
    fmt = doc.get("format") if isinstance(doc, Mapping) else None
    return isinstance(fmt, str) and fmt.startswith(FORMAT.split("/")[0] + "/")


def model_fingerprint() -> dict[str, str]:
    """What model a calibration corrects: the planner version and the SHA-256 of the
    packaged efficiency constants (a calibration learnt against other constants is stale)."""
    path = Path(planner.perf.__file__).resolve().parent / CONSTANTS_FILE
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        digest = "unknown"
    return {"planner_version": __version__, "constants_sha256": digest}


# -- fitting --------------------------------------------------------------------------------


def _tree(keys: Sequence[RunKey]) -> tuple[list[Int], Int, list[list[tuple[str, ...]]]]:
    """The tree of groups of ``keys``: per level the parent of each group, each run's leaf,
    and each level's group prefixes in id order (at ``RELEASE_LEVEL`` the last element of a
    prefix is the release, ``""`` when not stated: ``_fixed``)."""
    index: list[dict[tuple[str, ...], int]] = [{} for _ in LEVELS]
    parents: list[list[int]] = [[] for _ in LEVELS]
    leaf = np.empty(len(keys), dtype=np.int64)
    for i, key in enumerate(keys):
        parent = 0
        for level, prefix in enumerate(key.path()):
            ids = index[level]
            if prefix not in ids:
                ids[prefix] = len(ids)
                parents[level].append(parent)
            parent = ids[prefix]
        leaf[i] = parent
    prefixes = [list(ids) for ids in index]
    return [np.asarray(p, dtype=np.int64) for p in parents], leaf, prefixes


def _fixed(prefixes: list[list[tuple[str, ...]]]) -> list[NDArray[np.bool_]]:
    """Per level, the groups with no deviation of their own: the release group of runs that
    state no release (``fit_tree``'s ``fixed``)."""
    return [
        np.fromiter(
            (level == RELEASE_LEVEL and prefix[-1] == "" for prefix in names), bool, len(names)
        )
        for level, names in enumerate(prefixes)
    ]


def _has_model_effect(key: RunKey) -> bool:
    """True for a MoE run whose model's shape is known: only those get a model effect (module
    docstring, part 2)."""
    return key.family == "moe" and key.model != ""


def _effect_seconds(key: RunKey, compute_s: float, routed_s: float | None) -> float:
    """The seconds of a prediction's compute terms ``compute_s`` its MoE model effect
    multiplies (module docstring, part 2): a model routed dropless by a learnt router
    (``observed_runs.is_dropless``), its routed experts' ``routed_s`` where the prediction
    gives them; otherwise all of ``compute_s``."""
    if routed_s is None or not is_dropless(key.model):
        return compute_s
    return min(max(routed_s, 0.0), compute_s)


def _model_groups(keys: Sequence[RunKey]) -> tuple[Int, list[tuple[str, str]]]:
    """Each run's MoE model group (``-1``: none, ``_has_model_effect``) and the groups'
    ``(architecture, model shape)`` in id order."""
    ids: dict[tuple[str, str], int] = {}
    index = np.fromiter(
        (
            ids.setdefault((k.architecture, k.model), len(ids)) if _has_model_effect(k) else -1
            for k in keys
        ),
        np.int64,
        len(keys),
    )
    return index, list(ids)


def _noise_group(key: RunKey, params: ObservedParams) -> tuple[str, ...]:
    """The runs whose spread is a run's noise: its key's (and release's), and for a MoE model
    with a model effect its model's runs of them only: the effect explains how the models of
    one key differ, so that is no run's noise."""
    group = key.path()[-1]
    if params.moe_model_prior_log_sd > 0 and _has_model_effect(key):
        return (*group, key.model)
    return group


def _local_group(key: RunKey, params: ObservedParams) -> tuple[str, ...]:
    """The runs among which the local residual (part 6) weighs: the key's (all releases),
    and for a MoE model with a model effect its model's runs of them only (the effect holds
    how the models of one key differ, as for the noise: ``_noise_group``)."""
    group = key.path()[KEY_LEVEL]
    if params.moe_model_prior_log_sd > 0 and _has_model_effect(key):
        return (*group, key.model)
    return group


def _noise_groups(
    keys: Sequence[RunKey], params: ObservedParams, *, per_cell: bool = False
) -> Iterator[tuple[Int, Int, int]]:
    """The runs pooled for one spread, per model family (``per_cell``: per family on one GPU
    architecture): ``(members, group, num_groups)``, ``members`` the runs' indices, ``group``
    each one's noise group (``_noise_group``) as an id in ``[0, num_groups)``."""
    pooled_over: dict[tuple[str, ...], list[int]] = {}
    for i, k in enumerate(keys):
        cell = (k.architecture, k.family) if per_cell else (k.family,)
        pooled_over.setdefault(cell, []).append(i)
    for indices in pooled_over.values():
        members = np.asarray(indices, dtype=np.int64)
        ids: dict[tuple[str, ...], int] = {}
        group = np.fromiter(
            (ids.setdefault(_noise_group(keys[i], params), len(ids)) for i in members),
            np.int64,
            members.size,
        )
        yield members, group, len(ids)


def _far_off_keys(
    keys: Sequence[RunKey], residual: Float, params: ObservedParams
) -> dict[int, tuple[float, int]]:
    """The runs far off their key (``_far_off`` of the first tree fit's log residuals
    ``residual``, shape ``(n,)``, the scale pooled per model family, over each run's noise
    group ``_noise_group``): index -> (measured step / what its group's median residual
    gives, runs in the group)."""
    out: dict[int, tuple[float, int]] = {}
    for members, group, num_groups in _noise_groups(keys, params):
        counts = np.bincount(group, minlength=num_groups)
        far = _far_off(residual[members], group, num_groups)
        for j, ratio in far.items():
            out[int(members[j])] = (ratio, int(counts[group[j]]))
    return out


def _noise(
    keys: Sequence[RunKey], log_ratio: Float, params: ObservedParams, *, per_cell: bool = False
) -> Float:
    """Each run's sigma: per model family (``per_cell``: per family on the run's GPU
    architecture, the cell rule's within-key spread), the pooled within-key root-mean-square
    deviation of the log ratios from their key's mean, shrunk toward ``noise_log_sd`` (module
    docstring). Shape ``(n,)``."""
    out = np.full(len(keys), params.noise_log_sd)
    for members, group, num_groups in _noise_groups(keys, params, per_cell=per_cell):
        y = log_ratio[members]
        counts = np.bincount(group, minlength=num_groups)
        means = np.bincount(group, weights=y, minlength=num_groups) / counts
        squares = float(((y - means[group]) ** 2).sum())
        dof = float(np.maximum(counts - 1, 0).sum())
        out[members] = math.sqrt(
            (params.noise_dof * params.noise_log_sd**2 + squares) / (params.noise_dof + dof)
        )
    return out


def _far_off(y: Float, group: Int, num_groups: int) -> dict[int, float]:
    """The log residuals ``y`` (shape ``(n,)``, group ids ``group`` in ``[0, num_groups)``)
    off their group's median by more than ``OUTLIER_SDS`` robust log-sds and a factor of
    ``OUTLIER_RATIO``, in groups of ``OUTLIER_MIN_RUNS`` runs or more:
    index -> exp(deviation), the run's step over what its group's median gives. The scale is
    the pooled median absolute deviation from the medians (times 1.4826, the normal's) over
    the groups of 2 runs or more."""
    medians = np.zeros(num_groups)
    for g in range(num_groups):
        medians[g] = np.median(y[group == g])
    deviation = y - medians[group]
    counts = np.bincount(group, minlength=num_groups)
    spread = np.abs(deviation[counts[group] > 1])
    scale = 1.4826 * float(np.median(spread)) if spread.size else 0.0
    bound = max(OUTLIER_SDS * scale, math.log(OUTLIER_RATIO))
    far = np.flatnonzero((counts[group] >= OUTLIER_MIN_RUNS) & (np.abs(deviation) > bound))
    return {int(i): math.exp(float(deviation[i])) for i in far}


def outlier_reason(ratio: float, num_runs: int) -> str:
    """Why a run far off its key (``ObservedCalibration.outliers``) is left out of the fit."""
    return (
        f"iteration_time_s: {ratio:.3g} times what the fit of its key's {num_runs} runs "
        "gives it (a job that hung or stalled, or ran on other hardware than its scenario "
        "says); left out of the fit"
    )


def _groups(
    fit: TreeFit, prefixes: list[list[tuple[str, ...]]]
) -> list[dict[tuple[str, ...], GroupFactors]]:
    out: list[dict[tuple[str, ...], GroupFactors]] = []
    for level, names in enumerate(prefixes):
        mean, cov, info = fit.mean[level], fit.cov[level], fit.info[level]
        # information about v with u unknown: the Schur complement of the 2x2 information
        info_v = info[:, 1, 1] - info[:, 0, 1] ** 2 / np.maximum(info[:, 0, 0], 1e-12)
        # a release group of runs that state none is its key: judged against the key's prior
        fixed = _fixed(prefixes)[level]
        prior_v = (
            np.where(fixed, fit.prior_log_sd[max(level - 1, 0)][1], fit.prior_log_sd[level][1]) ** 2
        )
        out.append(
            {
                prefix: GroupFactors(
                    u=float(mean[g, 0]),
                    v=float(mean[g, 1]),
                    var_u=float(cov[g, 0, 0]),
                    cov_uv=float(cov[g, 0, 1]),
                    var_v=float(cov[g, 1, 1]),
                    num_runs=int(fit.num_runs[level][g]),
                    network_separated=bool(info_v[g] * prior_v[g] >= 1.0),
                    left_out_u=float(fit.left_out_mean[level][g, 0]),
                    left_out_v=float(fit.left_out_mean[level][g, 1]),
                )
                for g, prefix in enumerate(names)
            }
        )
    return out


def fit_observed(
    samples: Sequence[RunSample], params: ObservedParams | None = None
) -> ObservedCalibration:
    """Learn the calibration from ``samples`` (module docstring), leaving out the runs far off
    their key (``ObservedCalibration.outliers``). With no sample, the result corrects nothing
    (factor 1 with the prior's uncertainty). Raises ``CalibrationError`` for a sample with a
    non-positive time."""
    params = params or ObservedParams()
    for s in samples:
        if not (s.compute_s > 0 and s.network_s >= 0 and s.observed_s > 0):
            raise CalibrationError(
                f"run on {s.key.gpu}: compute_s, observed_s must be > 0 and network_s >= 0"
            )
        if s.routed_s is not None and not 0 <= s.routed_s <= s.compute_s:
            raise CalibrationError(f"run on {s.key.gpu}: routed_s must be in [0, compute_s]")
    return _fit(samples, params, far_off=True)


def _fit(
    samples: Sequence[RunSample], params: ObservedParams, *, far_off: bool
) -> ObservedCalibration:
    """``fit_observed`` of runs already checked; ``far_off``: look for runs far off their
    key at the first tree fit and, finding some, fit the others instead (once)."""
    keys = [s.key for s in samples]
    compute = np.fromiter((s.compute_s for s in samples), np.float64, len(samples))
    network = np.fromiter((s.network_s for s in samples), np.float64, len(samples))
    routed = np.fromiter(
        (_effect_seconds(s.key, s.compute_s, s.routed_s) for s in samples),
        np.float64,
        len(samples),
    )
    observed = np.log(np.fromiter((s.observed_s for s in samples), np.float64, len(samples)))
    features = np.asarray([s.features for s in samples], dtype=np.float64).reshape(
        len(samples), len(FEATURES)
    )
    residual = ResidualModel(min_runs=params.residual_min_runs)
    if not samples:
        residual.fit(features, np.zeros(0))
        return ObservedCalibration(
            params=params,
            groups=[{} for _ in LEVELS],
            memory=[{} for _ in LEVELS],
            residual=residual,
            noise_log_sd={},
            prior=model_fingerprint(),
            model_log_sd=params.moe_model_prior_log_sd,
        )
    parents, leaf, prefixes = _tree(keys)
    model_log_ratio = observed - np.log(compute + network)  # log observed / the model's step
    noise = _noise(keys, model_log_ratio, params)
    members = members_of(keys)
    prior = np.asarray(params.prior_log_sd, dtype=np.float64)
    offset = np.zeros(len(samples))
    models, model_names = _model_groups(keys)
    with_models = params.moe_model_prior_log_sd > 0 and bool(model_names)

    def tree(offset: Float) -> TreeFit:
        return fit_tree(
            parents,
            leaf,
            compute_s=compute,
            network_s=network,
            log_observed=observed,
            offset=offset,
            prior_log_sd=prior,
            noise_log_sd=noise,
            huber_k=params.huber_k,
            prior_dof=params.prior_dof,
            fixed=_fixed(prefixes),
            crossed=[models] if with_models else [],
            crossed_prior_log_sd=[params.moe_model_prior_log_sd] if with_models else [],
            crossed_s=routed,
        )

    first = tree(offset)
    outliers = _far_off_keys(keys, first.residual, params) if far_off else {}
    if outliers:
        calibration = _fit(
            [s for i, s in enumerate(samples) if i not in outliers], params, far_off=False
        )
        calibration.outliers = outliers
        return calibration
    residual.fit(features, first.residual, groups=leaf)
    fitted = first
    if residual.selected_ != "none":
        offset = residual.predict(features)
        fitted = tree(offset)
    groups = _groups(fitted, prefixes)
    rule = None
    if params.cell_rule:
        crossed = np.zeros(len(samples))
        if with_models:
            crossed = np.where(models >= 0, fitted.crossed_mean[0][np.maximum(models, 0)], 0.0)
        rule = _apply_cell_rule(
            groups,
            fitted,
            keys,
            members,
            prefixes=prefixes,
            parents=parents,
            leaf=leaf,
            compute=compute,
            network=network,
            routed=routed,
            log_ratio=model_log_ratio - offset,
            crossed=crossed,
            noise=_noise(keys, model_log_ratio, params, per_cell=True),
        )
    calibration = ObservedCalibration(
        params=params,
        groups=groups,
        memory=_memory(samples, params),
        residual=residual,
        noise_log_sd={
            family: float(noise[i])
            for family in FAMILIES
            for i in [next((j for j, k in enumerate(keys) if k.family == family), -1)]
            if i >= 0
        },
        samples=list(samples),
        prior=model_fingerprint(),
        level_log_sd=tuple((float(a), float(b)) for a, b in fitted.prior_log_sd),
        model_effects={
            name: ModelEffect(
                u=float(fitted.crossed_mean[0][j]),
                var_u=float(fitted.crossed_var[0][j]),
                num_runs=int((models == j).sum()),
            )
            for j, name in enumerate(model_names)
        }
        if with_models
        else {},
        model_log_sd=fitted.crossed_log_sd[0] if with_models else params.moe_model_prior_log_sd,
        rule=rule,
        clusters=_clusters(keys),
        members=members,
    )
    calibration.local = _local(calibration, samples, features, observed)
    return calibration


def _local(
    calibration: ObservedCalibration, samples: Sequence[RunSample], features: Float, observed: Float
) -> LocalResidual:
    """The local residual (``local_residual``) of the runs' log residuals to ``calibration``
    (without one), per key; ``observed`` shape ``(n,)`` the log observed step (s)."""
    corrected = np.fromiter(
        (math.log(s.predicted_s) + math.log(_correct(calibration, s).factor) for s in samples),
        np.float64,
        len(samples),
    )
    return LocalResidual().fit(
        features, observed - corrected, [_local_group(s.key, calibration.params) for s in samples]
    )


def _correct(calibration: ObservedCalibration, s: RunSample) -> ObservedCorrection:
    """``calibration``'s correction of the run ``s``'s prediction."""
    return calibration.correct(s.key, s.compute_s, s.network_s, s.features, routed_s=s.routed_s)


def _clusters(keys: Sequence[RunKey]) -> frozenset[tuple[str, str, str]]:
    """The ``(architecture, family, cluster)`` cells of ``keys``."""
    return frozenset((k.architecture, k.family, k.cluster) for k in keys)


def _apply_cell_rule(
    groups: list[dict[tuple[str, ...], GroupFactors]],
    fitted: TreeFit,
    keys: Sequence[RunKey],
    members: Members,
    *,
    prefixes: list[list[tuple[str, ...]]],
    parents: list[Int],
    leaf: Int,
    compute: Float,
    network: Float,
    routed: Float,
    log_ratio: Float,
    crossed: Float,
    noise: Float,
) -> TransferRule:
    """Learn the cell rule (``observed_transfer``) from the fit and move the key groups and
    their releases by it, in place; the rule. ``members``: ``members_of(keys)``; ``routed``
    the seconds of ``compute`` each run's model effect ``crossed`` multiplies."""
    group_of_run = {len(LEVELS) - 1: leaf}
    for level in range(len(LEVELS) - 1, 0, -1):
        group_of_run[level - 1] = parents[level][group_of_run[level]]
    key_of_run = group_of_run[KEY_LEVEL]
    # what the tree knows without the key, or without the group it is not lent by
    lent = np.fromiter((lent_level(k, members) for k in keys), np.int64, len(keys))
    at_run = np.stack(
        [fitted.left_out_mean[level][group_of_run[level][i]] for i, level in enumerate(lent)]
    )
    left = np.zeros_like(fitted.left_out_mean[KEY_LEVEL])
    left[key_of_run] = at_run
    total = compute + network
    scaled = compute + routed * np.expm1(crossed)
    predicted = np.log(scaled * np.exp(at_run[:, 0]) + network * np.exp(at_run.sum(axis=1)))
    predicted = predicted - np.log(total)
    rule = fit_rule(
        keys, predicted=predicted, log_ratio=log_ratio, weight=fitted.weight, noise=noise
    )
    shift = shifts(
        rule,
        keys,
        key_of_run,
        mean=fitted.mean[KEY_LEVEL],
        left_out=left,
        gain=_runs_gain(
            fitted,
            KEY_LEVEL,
            group_of_run=key_of_run,
            share=_network_share(fitted, leaf, scaled, network),
        ),
        weight=fitted.weight,
        noise=noise,
    )
    # a group below the key moves with it by the share its own runs do not hold: its prior
    # mean is its parent's, weighted by one minus its gain on its own runs
    for level in range(KEY_LEVEL, len(LEVELS)):
        if level > KEY_LEVEL:
            # a group with no deviation of its own (a run's unstated release) is its parent
            kept = np.where(_fixed(prefixes)[level], 1.0, 1.0 - _own_gain(fitted, level))
            shift = shift[parents[level]] * kept[:, None]
        for g, prefix in enumerate(prefixes[level]):
            found = groups[level][prefix]
            du, dv = shift[g]
            groups[level][prefix] = dataclasses.replace(
                found, u=found.u - float(du), v=found.v - float(dv)
            )
    return rule


def _network_share(fitted: TreeFit, leaf: Int, compute: Float, network: Float) -> Float:
    """Each run's network share ``q = N·e^v / (C + N·e^v)`` at the fit's ``v`` of its leaf
    group (``d log t / dv``: the second entry of its Jacobian), shape ``(n,)``; ``compute``
    its compute terms with the model effect applied (s)."""
    grown = network * np.exp(fitted.mean[-1][leaf][:, 1])
    share: Float = grown / np.maximum(compute + grown, 1e-300)
    return share


def _runs_gain(fitted: TreeFit, level: int, *, group_of_run: Int, share: Float) -> Float:
    """Each group's gain on its own runs along what they measure, shape ``(G_l,)``, in
    ``[0, 1]``: with ``G = Sigma·Lambda`` (the share of its runs' deviation its posterior
    takes) and ``j = (1, q)`` the mean Jacobian of its runs (``q`` their network share,
    ``share``, Huber-weighted), ``j'·G·j / j'·j``. Dividing the posterior's deviation from the
    left-out mean by it gives back what the runs say along ``j`` (exactly for runs of one
    share: ``Lambda`` is then ``lambda·j·j'``), split between ``u`` and ``v`` as the posterior
    splits it. The compute entry ``G_uu`` alone (``_own_gain``) is that gain only for runs
    without network time: for a key whose runs are mostly network (DeepSpeed ZeRO-3 at 1,536
    GPUs, network share 0.7) the posterior puts most of their deviation on ``v``, ``G_uu``
    falls to 0.05, and dividing by it multiplied the key's network factor by e^6 (a fit of
    three runs within 40 % of the model predicting a fourth 700 times slower)."""
    size = fitted.mean[level].shape[0]
    weight = fitted.weight
    total = np.maximum(np.bincount(group_of_run, weights=weight, minlength=size), 1e-300)
    q = np.bincount(group_of_run, weights=weight * share, minlength=size) / total
    j = np.stack([np.ones(size), q], axis=1)
    g = np.einsum("gik,gkj->gij", fitted.cov[level], fitted.info[level])
    gain: Float = np.einsum("gi,gij,gj->g", j, g, j) / np.einsum("gi,gi->g", j, j)
    return np.clip(gain, 0.0, 1.0)


def _own_gain(fitted: TreeFit, level: int) -> Float:
    """Each group's gain on its own runs at ``level``: ``(Sigma·Lambda)_uu``, the share of
    their log ratio its compute factor takes (0 to 1), shape ``(G_l,)``."""
    gain: Float = np.einsum("gj,gj->g", fitted.cov[level][:, 0, :], fitted.info[level][:, :, 0])
    return np.clip(gain, 0.0, 1.0)


def _memory(
    samples: Sequence[RunSample], params: ObservedParams
) -> list[dict[tuple[str, ...], MemoryFactor]]:
    """The memory factor per group, from the runs that measured their peak (the tree with the
    model's peak as the only term)."""
    measured = [s for s in samples if s.observed_memory_bytes is not None]
    out: list[dict[tuple[str, ...], MemoryFactor]] = [{} for _ in LEVELS]
    if not measured:
        return out
    parents, leaf, prefixes = _tree([s.key for s in measured])
    predicted = np.fromiter((s.predicted_memory_bytes for s in measured), np.float64)
    observed = np.fromiter((s.observed_memory_bytes or 0.0 for s in measured), np.float64)
    prior = np.asarray([(sd, sd) for sd in params.memory_prior_log_sd], dtype=np.float64)
    fit = fit_tree(
        parents,
        leaf,
        compute_s=predicted,
        network_s=np.zeros_like(predicted),
        log_observed=np.log(observed),
        offset=np.zeros_like(predicted),
        prior_log_sd=prior,
        noise_log_sd=np.full(len(measured), params.memory_noise_log_sd),
        huber_k=params.huber_k,
        fixed=_fixed(prefixes),
    )
    for level, names in enumerate(prefixes):
        for g, prefix in enumerate(names):
            out[level][prefix] = MemoryFactor(
                u=float(fit.mean[level][g, 0]),
                var_u=float(fit.cov[level][g, 0, 0]),
                num_runs=int(fit.num_runs[level][g]),
            )
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RunsFit:
    """What ``observe_runs`` learnt from runs: the ``calibration``, the ``samples`` it was
    given, for each sample the index of its run among the runs given (``indices``), one
    error line per run that cannot be used (``errors``) and one per run the fit left out, far
    off its key (``far_off``, ``far_off_lines``)."""

    calibration: ObservedCalibration
    samples: list[RunSample]
    indices: list[int]
    errors: list[str]
    far_off: list[str]


def observe_runs(runs: Sequence[ObservedRun], params: ObservedParams | None = None) -> RunsFit:
    """Parse, predict (one ``predict_batch``) and learn from ``runs`` (``fit_observed``, which
    the accuracy benchmark calls on its samples): the one entry point of ``planner calibrate
    observe`` and the service's learning. Raises ``CalibrationError`` for what
    ``fit_observed`` refuses; a run that cannot be used is an error line, not an exception."""
    samples, indices, errors = indexed_samples_from_runs(runs)
    calibration = fit_observed(samples, params)
    far_off = far_off_lines(calibration, [runs[i] for i in indices])
    return RunsFit(
        calibration=calibration, samples=samples, indices=indices, errors=errors, far_off=far_off
    )


def far_off_lines(calibration: ObservedCalibration, runs: Sequence[ObservedRun]) -> list[str]:
    """One line per run ``fit_observed`` left out, far off its key
    (``ObservedCalibration.outliers``; ``runs`` the runs of the samples it was given, in their
    order): where the run was read and why."""
    return [
        f"{runs[i].source}:{runs[i].line}: {outlier_reason(ratio, num)}"
        for i, (ratio, num) in sorted(calibration.outliers.items())
    ]


def cross_validated_errors(
    samples: Sequence[RunSample],
    params: ObservedParams | None = None,
    *,
    folds: int = 5,
    seed: int = 0,
    online_jobs: Sequence[tuple[int, float]] | None = None,
) -> dict[str, float | int]:
    """Held-out error of the calibration on its own runs: ``folds``-fold cross-validation
    (runs shuffled by ``numpy.random.default_rng(seed)``), each fold predicted by a
    calibration fitted on the others. Returns ``num_runs``, ``prior_mean_abs_error_ratio``
    (the uncorrected model) and ``calibrated_mean_abs_error_ratio`` (mean
    ``|predicted / observed - 1|``); fewer than two runs give the prior's error for both.

    With ``online_jobs`` (per sample, its job's ``(num_iterations, time_s)``: iterations
    behind its mean step, epoch s it was seen), also ``online_mean_abs_error_ratio``: the same
    folds predicted by the online calibration (``planner.calibration.online``, default
    hyper-parameters, as the service's) that observed the other folds' runs, each under its
    ``(cluster, gpu, framework)`` key; a run it has no correction for counts with the model's
    error (the online calibration then leaves the prediction as it is). Raises ``SpecError``
    when ``online_jobs`` does not give one entry per sample."""
    n = len(samples)
    if online_jobs is not None and len(online_jobs) != n:
        raise SpecError("online_jobs", f"needs one (num_iterations, time_s) per run, got {n}")
    prior = [abs(s.predicted_s / s.observed_s - 1) for s in samples]
    if n < 2:
        mean = float(np.mean(prior)) if prior else math.nan
        out: dict[str, float | int] = {
            "num_runs": n,
            "prior_mean_abs_error_ratio": mean,
            "calibrated_mean_abs_error_ratio": mean,
        }
        if online_jobs is not None:
            out["online_mean_abs_error_ratio"] = mean
        return out
    order = np.random.default_rng(seed).permutation(n)
    parts = np.array_split(order, min(folds, n))
    calibrated = np.empty(n)
    online = np.asarray(prior, dtype=np.float64)
    for part in parts:
        held = {int(i) for i in part}
        seen = [i for i in range(n) if i not in held]
        cal = fit_observed([samples[i] for i in seen], params)
        for i in held:
            s = samples[i]
            found = _correct(cal, s)
            calibrated[i] = abs(s.predicted_s * found.factor / s.observed_s - 1)
        if online_jobs is not None:
            online[sorted(held)] = _online_errors(samples, online_jobs, seen, sorted(held))
    out = {
        "num_runs": n,
        "prior_mean_abs_error_ratio": float(np.mean(prior)),
        "calibrated_mean_abs_error_ratio": float(calibrated.mean()),
    }
    if online_jobs is not None:
        out["online_mean_abs_error_ratio"] = float(online.mean())
    return out


def _online_key(key: RunKey) -> CalibrationKey:
    return CalibrationKey(scheduler="", cluster=key.cluster, gpu=key.gpu, framework=key.framework)


def _online_errors(
    samples: Sequence[RunSample],
    jobs: Sequence[tuple[int, float]],
    seen: Sequence[int],
    held: Sequence[int],
) -> list[float]:
    """``|corrected / observed - 1|`` of the ``held`` runs by an online calibration that
    observed the ``seen`` runs (``cross_validated_errors``)."""
    online = OnlineCalibration()
    for i in seen:
        s = samples[i]
        iterations, time_s = jobs[i]
        online.observe(
            _online_key(s.key),
            str(i),
            predicted_step_s=s.predicted_s,
            observed_step_s=s.observed_s,
            num_iterations=max(int(iterations), 1),
            time_s=float(time_s),
        )
    errors = []
    for i in held:
        s = samples[i]
        factor = online.correction(_online_key(s.key)).factor
        errors.append(abs(s.predicted_s * factor / s.observed_s - 1))
    return errors
