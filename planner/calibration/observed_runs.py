"""Observed runs: reading them, their calibration keys, and what the fit sees of each (pure).

A run is one JSON line, ``{"scenario": {<scenario format>}, "iteration_time_s": <measured
s>}``; ``tokens_per_s`` (global, tokens/s) may stand in for the time (``global_batch_size ·
seq_length / tokens_per_s``) and, with it, must agree within 2 %; ``memory_per_gpu_bytes`` (the
measured peak per GPU) and ``cluster`` (default ``""``) are optional. The scenario is parsed
as ``planner predict`` parses it, so the key's names are the normalised ones (``H100-SXM`` is
``h100-sxm``), and predicted once (``predict_batch``) into a ``RunSample``: the model's compute
and network terms (``online_split.ModelSplit``), the residual features
(``residual.run_features``) and its peak memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypedDict

from planner.calibration.online_split import ModelSplit
from planner.calibration.residual import run_features
from planner.errors import CalibrationError, SpecError
from planner.perf.step import predict_batch
from planner.scenario.documents import prediction_json
from planner.scenario.loading import load_json_lines
from planner.scenario.parse import parse_scenario
from planner.specs.model import ModelSpec
from planner.specs.parallelism import Fp8Recipe, ParallelismSpec
from planner.specs.scenario import Scenario

__all__ = [
    "DROPLESS",
    "FAMILIES",
    "LEVELS",
    "RELEASE_LEVEL",
    "RUN_FIELDS",
    "ObservedRun",
    "RunKey",
    "RunKeyJson",
    "RunSample",
    "indexed_samples_from_runs",
    "is_dropless",
    "model_label",
    "model_shape",
    "read_observed_runs",
    "recipe_of",
    "routed_seconds",
    "run_document",
    "run_key",
    "run_of",
    "sample_of",
    "samples_from_runs",
]

LEVELS: Final = (
    "global",
    "architecture",
    "family",
    "architecture_bits",
    "gpu_recipe",
    "key",
    "release",
)
"""The levels of the tree of groups, from the root to the release: every run, a GPU
architecture, a model family on that architecture, its precision width, one GPU type and
recipe, the key (cluster, GPU, recipe, framework), the framework's release on that key
(``training.framework_version``; a run that states none is its key's, with no deviation of
its own: ``RunKey.states_release``).
The family splits below the architecture, not above it: the model's bias on a family differs
by generation (on Megatron-Bridge's 2025 runs MoE is predicted 30 % too fast on Blackwell and
5-10 % on Hopper, dense within a few percent on both; ``benchmarks/RESULTS.md``), so a family
level shared by every architecture carried Blackwell's MoE bias into Hopper's MoE predictions
(held-out MoE-on-H100 error 16.6 % with the model alone, 19.8 % once the other groups were
learnt; 16.3 % with this order)."""
RELEASE_LEVEL: Final = LEVELS.index("release")
"""The release level's index in ``LEVELS``."""
FAMILIES: Final = ("dense", "moe")
RUN_FIELDS: Final = frozenset(
    {"scenario", "iteration_time_s", "tokens_per_s", "memory_per_gpu_bytes", "cluster"}
)
DROPLESS: Final = "-dropless"
"""The suffix ``model_label`` gives a model routed dropless by a learnt router."""
TOKENS_AGREEMENT: Final = 0.02
"""How far ``tokens_per_s`` and ``iteration_time_s`` of one run may disagree."""


# -- keys -----------------------------------------------------------------------------------


def recipe_of(parallelism: ParallelismSpec) -> str:
    """The precision recipe of a layout: ``bf16``, ``fp16``, ``fp8-delayed``,
    ``fp8-tensorwise``, ``fp8-blockwise``, ``mxfp8`` or ``nvfp4`` (an ``fp8`` layout with the
    ``mxfp8`` recipe is ``mxfp8``: the same GEMMs)."""
    recipe = parallelism.low_precision_recipe
    if recipe is None:
        return parallelism.precision.value
    if recipe in (Fp8Recipe.MXFP8, Fp8Recipe.NVFP4):
        return recipe.value
    return f"fp8-{recipe.value}"


def _bits(recipe: str) -> str:
    if recipe in ("bf16", "fp16"):
        return "16"
    return "4" if recipe == "nvfp4" else "8"


class RunKeyJson(TypedDict):
    """``RunKey.to_json``: the key's fields."""

    cluster: str
    gpu: str
    architecture: str
    recipe: str
    framework: str
    release: str
    family: str
    model: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunKey:
    """What the factors are kept per: ``cluster`` (as the user names it), ``gpu`` (catalog key)
    and its ``architecture``, ``recipe`` (``recipe_of``), ``framework`` and its ``release``
    (``training.framework_version``; ``""``: not stated), all as the scenario parser normalises
    them, the model ``family`` (``dense`` or ``moe``: routed experts) and the ``model``'s shape,
    token dispatcher and routing mode (``model_label``; ``""``: not known, no model effect)."""

    cluster: str
    gpu: str
    architecture: str
    recipe: str
    framework: str
    release: str = ""
    family: str
    model: str = ""

    @property
    def states_release(self) -> bool:
        """True when the run states its framework's release: only then does the release level
        deviate from the key (``LEVELS``)."""
        return self.release != ""

    def path(self) -> tuple[tuple[str, ...], ...]:
        """The group of this key at each of ``LEVELS``."""
        family, architecture = self.family, self.architecture
        return (
            (),
            (architecture,),
            (architecture, family),
            (architecture, family, _bits(self.recipe)),
            (family, self.gpu, self.recipe),
            (family, self.cluster, self.gpu, self.recipe, self.framework),
            (family, self.cluster, self.gpu, self.recipe, self.framework, self.release),
        )

    def to_json(self) -> RunKeyJson:
        """JSON-ready fields."""
        return {
            "cluster": self.cluster,
            "gpu": self.gpu,
            "architecture": self.architecture,
            "recipe": self.recipe,
            "framework": self.framework,
            "release": self.release,
            "family": self.family,
            "model": self.model,
        }


def run_key(scenario: Scenario, cluster: str = "") -> RunKey:
    """The key of a parsed scenario on ``cluster``."""
    return RunKey(
        cluster=cluster,
        gpu=scenario.hardware.gpu.key,
        architecture=scenario.hardware.gpu.architecture,
        recipe=recipe_of(scenario.parallelism),
        framework=scenario.training.framework.value,
        release=scenario.training.framework_version or "",
        family="moe" if scenario.model.num_experts > 0 else "dense",
        model=model_label(scenario.model),
    )


def model_shape(model: ModelSpec) -> str:
    """The shape of a model that its runs share on every GPU and cluster: layers, hidden
    size, attention heads, FFN width, vocabulary, routed experts x top-k and expert width, as
    ``L94-h4096-a64-f12288-v151936-e128x8-m1536`` (Qwen3-235B-A22B). Sequence length, batch
    and layout are the run's, not the model's."""
    return (
        f"L{model.num_layers}-h{model.hidden_size}-a{model.num_attention_heads}"
        f"-f{model.ffn_hidden_size}-v{model.vocab_size}"
        f"-e{model.num_experts}x{model.moe_router_topk}-m{model.moe_ffn_hidden_size}"
    )


def model_label(model: ModelSpec) -> str:
    """What a MoE model effect is kept per: ``model_shape``, its token dispatcher
    (``model.moe_token_dispatcher_type``) and, with ``-dropless`` last, whether a learnt router
    routes the experts dropless, as ``L94-h4096-a64-f12288-v151936-e128x8-m1536-flex-dropless``;
    a dense model's label is its shape.

    The dispatcher: each runs its own kernels for the exchange and the permutation, which the
    model prices by a form of its own (``planner.perf.moe_mlp``, ``planner.perf.expert``) and
    the runs measure apart. Megatron-Core's all-to-all dispatcher permutes with ``permute`` /
    ``unpermute`` around NCCL all-to-alls; its flex dispatcher runs DeepEP's fused
    ``fused_dispatch`` / ``fused_combine`` and permutes what arrives (``_DeepepManager``); its
    all-gather dispatcher, up to core_r0.9.0, moves the tokens with ``torch.gather`` over
    expanded index maps and ``scatter`` / ``scatter_add`` into zero-filled buffers
    (NVIDIA/Megatron-LM ``megatron/core/transformer/moe/token_dispatcher.py`` @ core_v0.6.0
    ``cac60ce4c8``, core_v0.14.0 ``23e00ed096``). Megatron-Bridge v0.2.0 (NeMo 25.11) runs
    Qwen3 and DeepSeek-V3 with the flex dispatcher on GB200 and GB300 and all-to-all on B200
    and H100 (``scripts/performance/configs/{qwen3,deepseek}/workload_base_configs.py``), so
    one effect per model carried the GB200/GB300 runs' error to the B200 ones.

    Dropless: no ``moe_expert_capacity_factor``, neither ``moe_router_force_load_balancing``
    nor ``moe_router_round_robin``. Only there does the busiest expert rank's load follow the
    router, which the model represents by one imbalance factor (``planner.perf.moe_mlp``);
    forced or round-robin balance gives every expert its even share and a capacity caps it,
    both known to the model. So the model errs on the two routing modes of one model apart:
    Megatron-MoE-ModelZoo's Qwen3-235B-A22B long-context table on 256 H100
    (yanring/Megatron-MoE-ModelZoo ``best_practice/qwen3/readme.md`` @ e8650517d6; the
    ``mz_qwen3_235b_longctx_*`` rows of ``moe_h100_2025``) runs each sequence length both
    ways (forced balance 295, dropless 237 TFLOP/s/GPU at 16k tokens), and the model's log
    ratio (measured over predicted) on each dropless run is 0.07-0.17 above the forced-balance
    run of the same length."""
    if model.num_experts <= 0:
        return model_shape(model)
    label = f"{model_shape(model)}-{model.moe_token_dispatcher_type.value}"
    dropless = (
        model.moe_expert_capacity_factor is None
        and not model.moe_router_force_load_balancing
        and not model.moe_router_round_robin
    )
    return f"{label}{DROPLESS}" if dropless else label


def is_dropless(label: str) -> bool:
    """True for a ``model_label`` of a model routed dropless by a learnt router."""
    return label.endswith(DROPLESS)


# -- runs -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ObservedRun:
    """One measured run: its scenario ``document``, measured ``iteration_time_s`` (s), optional
    measured peak ``memory_per_gpu_bytes``, the ``cluster`` it ran on, the ``source`` file and
    its ``line`` there (1-based; 0 when not read from a file)."""

    document: Mapping[str, Any]
    iteration_time_s: float | None
    tokens_per_s: float | None = None
    memory_per_gpu_bytes: float | None = None
    cluster: str = ""
    source: str = ""
    line: int = 0


def _positive(doc: Mapping[str, Any], name: str) -> float | None:
    value = doc.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(name, f"must be a number > 0, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise SpecError(name, f"must be a finite number > 0, got {value!r}")
    return float(value)


def run_of(doc: object, source: str, line: int = 0) -> ObservedRun:
    """One run document (a JSON line: ``RUN_FIELDS``) as an ``ObservedRun`` read from
    ``source`` at ``line``; raises ``SpecError`` naming the field (a step time that is zero,
    negative, NaN or not a number, an unknown field, a scenario that is not an object)."""
    if not isinstance(doc, Mapping):
        raise SpecError("run", "must be a JSON object with 'scenario' and 'iteration_time_s'")
    unknown = sorted(set(doc) - RUN_FIELDS)
    if unknown:
        raise SpecError(unknown[0], f"unknown field; a run has {', '.join(sorted(RUN_FIELDS))}")
    scenario = doc.get("scenario")
    if not isinstance(scenario, Mapping):
        raise SpecError("scenario", "must be a scenario document (an object)")
    cluster = doc.get("cluster", "")
    if not isinstance(cluster, str):
        raise SpecError("cluster", f"must be a string, got {cluster!r}")
    time_s = _positive(doc, "iteration_time_s")
    tokens = _positive(doc, "tokens_per_s")
    if time_s is None and tokens is None:
        raise SpecError("iteration_time_s", "missing: give the measured seconds per iteration")
    return ObservedRun(
        document=scenario,
        iteration_time_s=time_s,
        tokens_per_s=tokens,
        memory_per_gpu_bytes=_positive(doc, "memory_per_gpu_bytes"),
        cluster=cluster,
        source=source,
        line=line,
    )


def run_document(
    scenario: Mapping[str, Any],
    iteration_time_s: float | None,
    *,
    memory_per_gpu_bytes: float | None = None,
    cluster: str | None = None,
) -> dict[str, Any]:
    """One run as the JSON line ``run_of`` reads (``RUN_FIELDS``): the ``scenario`` document,
    the measured ``iteration_time_s`` (s), the measured peak ``memory_per_gpu_bytes`` (bytes)
    and ``cluster`` only when given (None, or no memory reading: left out). Checks nothing:
    ``run_of`` of it does."""
    doc: dict[str, Any] = {"scenario": scenario, "iteration_time_s": iteration_time_s}
    if memory_per_gpu_bytes:
        doc["memory_per_gpu_bytes"] = memory_per_gpu_bytes
    if cluster is not None:
        doc["cluster"] = cluster
    return doc


def read_observed_runs(text: str, source: str) -> tuple[list[ObservedRun], list[str]]:
    """The runs of a JSON-lines text and one error line per bad run (``"<source>:<line>:
    <field>: <what is wrong>"``); blank lines are skipped. Raises ``SpecError`` only when the
    text cannot be read at all (``planner.scenario.loading`` limits)."""
    runs: list[ObservedRun] = []
    errors: list[str] = []
    numbers = [i + 1 for i, raw in enumerate(text.splitlines()) if raw.strip()]
    for number, doc in zip(numbers, load_json_lines(text, source), strict=True):
        if isinstance(doc, SpecError):  # not JSON: the loader's message names file and line
            errors.append(str(doc))
            continue
        try:
            runs.append(run_of(doc, source, number))
        except SpecError as exc:
            errors.append(f"{source}:{number}: {exc}")
    return runs, errors


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSample:
    """A run as the fit sees it: its ``key``, the model's compute and network terms
    (``compute_s``, ``network_s``, s), the ``observed_s`` step (s), its ``features``
    (``residual.FEATURES``), the model's peak memory and the measured one (bytes; None when not
    measured), and ``routed_s``: the seconds of ``compute_s`` the MoE routed experts take (the
    prediction's ``moe_routed_compute_s``, what a MoE model effect multiplies; None when the
    prediction gave none: the effect then multiplies all of ``compute_s``)."""

    key: RunKey
    compute_s: float
    network_s: float
    observed_s: float
    features: tuple[float, ...]
    predicted_memory_bytes: float
    observed_memory_bytes: float | None = None
    routed_s: float | None = None

    @property
    def predicted_s(self) -> float:
        """The model's step, s."""
        return self.compute_s + self.network_s


def sample_of(
    scenario: Scenario,
    prediction: Mapping[str, Any],
    observed_s: float,
    *,
    cluster: str = "",
    observed_memory_bytes: float | None = None,
) -> RunSample:
    """The sample of one run: its parsed ``scenario``, the model's prediction (``planner
    predict --json`` object), the measured step ``observed_s`` (s). Raises
    ``CalibrationError`` when the prediction has no usable ``breakdown_s``."""
    breakdown = prediction.get("breakdown_s")
    split = ModelSplit.from_breakdown(breakdown) if isinstance(breakdown, Mapping) else None
    if split is None or not isinstance(breakdown, Mapping):
        raise CalibrationError("the prediction has no breakdown_s with compute > 0")
    impossible = beyond_peak(
        _finite(prediction.get("mfu")),
        _finite(prediction.get("iteration_time_s")),
        float(observed_s),
    )
    if impossible is not None:
        raise CalibrationError(impossible)
    return RunSample(
        key=run_key(scenario, cluster),
        compute_s=split.compute_s,
        network_s=split.network_s,
        observed_s=float(observed_s),
        features=run_features(scenario, breakdown),
        predicted_memory_bytes=float(prediction["memory_per_gpu_bytes"]),
        observed_memory_bytes=observed_memory_bytes,
        routed_s=routed_seconds(prediction.get("moe_routed_compute_s"), split.compute_s),
    )


def beyond_peak(mfu: float | None, predicted_s: float | None, observed_s: float) -> str | None:
    """Why a measured step ``observed_s`` (s) cannot be a run of the scenario the model
    predicted ``predicted_s`` (s) for at ``mfu`` (its model FLOPs over the GPUs' dense peak of
    the run's precision, ``planner.perf.step``): the scenario's model FLOPs in that step would
    exceed the GPUs' peak (``mfu · predicted_s / observed_s > 1``; over the 364 published runs
    of the accuracy benchmark the highest is 0.72, ModelZoo's Qwen3-235B-A22B at 131072
    tokens). None when the step is possible or the prediction tells nothing (a missing or
    non-finite figure)."""
    if mfu is None or predicted_s is None or not observed_s > 0:
        return None
    implied = mfu * predicted_s / observed_s
    if not (math.isfinite(implied) and implied > 1):
        return None
    return (
        f"iteration_time_s: {observed_s:.4g} s per step would run the scenario's model FLOPs "
        f"at {implied:.3g} times its GPUs' dense peak: the step time or the scenario's model, "
        "batch or GPUs are not the run's"
    )


def _finite(value: object) -> float | None:
    """``value`` as a float when it is a finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def routed_seconds(value: object, compute_s: float) -> float | None:
    """The routed experts' seconds of a prediction's ``moe_routed_compute_s`` field, at most
    the compute terms ``compute_s`` (s); None when it is not a finite number >= 0 (a
    prediction without it)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not (math.isfinite(value) and value >= 0):
        return None
    return min(float(value), compute_s)


def samples_from_runs(runs: Sequence[ObservedRun]) -> tuple[list[RunSample], list[str]]:
    """Parse and predict every run (one ``predict_batch``); returns the samples and one error
    line per run that cannot be used (``"<source>:<line>: <field>: <message>"``)."""
    samples, _, errors = indexed_samples_from_runs(runs)
    return samples, errors


def indexed_samples_from_runs(
    runs: Sequence[ObservedRun],
) -> tuple[list[RunSample], list[int], list[str]]:
    """``samples_from_runs`` with, per sample, the index of its run in ``runs``."""
    parsed: list[tuple[int, ObservedRun, Scenario, float]] = []
    errors: list[str] = []
    for index, run in enumerate(runs):
        try:
            scenario = parse_scenario(run.document)
            observed = _observed_step(run, scenario)
        except SpecError as exc:
            errors.append(f"{run.source}:{run.line}: {exc}")
            continue
        parsed.append((index, run, scenario, observed))
    predictions = predict_batch([s for _, _, s, _ in parsed]) if parsed else []
    samples: list[RunSample] = []
    indices: list[int] = []
    for (index, run, scenario, observed), prediction in zip(parsed, predictions, strict=True):
        try:
            samples.append(
                sample_of(
                    scenario,
                    prediction_json(prediction, scenario.name),
                    observed,
                    cluster=run.cluster,
                    observed_memory_bytes=run.memory_per_gpu_bytes,
                )
            )
        except CalibrationError as exc:
            errors.append(f"{run.source}:{run.line}: {exc}")
            continue
        indices.append(index)
    return samples, indices, errors


def _observed_step(run: ObservedRun, scenario: Scenario) -> float:
    """The measured step of a run, s: ``iteration_time_s``, or from ``tokens_per_s``."""
    from_tokens = (
        None if run.tokens_per_s is None else scenario.tokens_per_iteration / run.tokens_per_s
    )
    if run.iteration_time_s is None:
        if from_tokens is None:
            raise SpecError("iteration_time_s", "missing: give the measured seconds per iteration")
        return from_tokens
    if from_tokens is not None and abs(from_tokens / run.iteration_time_s - 1) > TOKENS_AGREEMENT:
        raise SpecError(
            "tokens_per_s",
            f"gives {from_tokens:.4g} s per iteration (global_batch_size · seq_length / "
            f"tokens_per_s) but iteration_time_s is {run.iteration_time_s:.4g} s; "
            "give one, or both from the same measurement",
        )
    return run.iteration_time_s
