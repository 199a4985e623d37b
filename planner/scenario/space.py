"""Explore documents: parsed into a ``DesignSpace``, results written back as JSON.

An *explore document* is a scenario document (``docs/scenario-format.md``) whose
``parallelism`` knobs (``planner.search.KNOBS``) may be absent (open: every value valid on its
own) or a list of allowed values, whose ``data_parallel`` may be a list of allowed degrees
(it is derived otherwise), and whose ``hardware.num_gpus`` and ``parallelism.global_batch_size``
may be lists. A list of ``decoder_first_pipeline_num_layers`` / ``decoder_last_pipeline_num_layers``
may hold ``null`` (that rank's count unset): ``[null]`` for both searches no uneven first / last
ranks. The other ``parallelism`` fields (``SCALAR_FIELDS``: precision, flash attention,
gradient-reduction precision and overlap, FP8 weights, the optimizer's dtypes,
Megatron-FSDP) take one value per document, carried into every candidate (a JSONL of
documents sweeps several); the fields of ``PREDICT_ONLY`` are refused, each with its
reason. Numbers follow ``planner.scenario.numbers``.

``parse_space(doc)`` validates one into a ``DesignSpace``; ``explore_json`` writes an
``ExploreResult`` as the ``planner explore --json`` object.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Literal, NotRequired, TypedDict, get_args

from planner.errors import SpecError
from planner.scenario.documents import PredictionJson, prediction_json
from planner.scenario.numbers import integer_or_value
from planner.scenario.parse import SECTION_KEYS, parse_scenario
from planner.search import KNOBS, PLACEMENT_NOTE, DesignSpace, Knobs, Objective
from planner.search.explore import ExploreEntry, ExploreResult
from planner.search.space import allowed_counts
from planner.specs.feasibility import optimizer_dtype_rule, probe_tp_comm_overlap
from planner.specs.parallelism import ParallelismSpec, Recompute
from planner.specs.scenario import Framework

__all__ = [
    "PREDICT_ONLY",
    "SCALAR_FIELDS",
    "ExploreCountsJson",
    "ExploreEntryJson",
    "ExploreJson",
    "LayoutJson",
    "ScalarField",
    "StatedFields",
    "entry_json",
    "explore_json",
    "layout_json",
    "parse_knobs",
    "parse_space",
    "probe_document",
    "scenario_document",
    "stated_fields",
]

_LIST_FIELDS = (*KNOBS, "data_parallel", "global_batch_size")
PREDICT_ONLY: Final[Mapping[str, str]] = MappingProxyType(
    {
        "pipeline_layout": (
            "an explicit layout fixes pipeline_parallel and virtual_pipeline, so explore does "
            "not take it: it searches decoder_first_pipeline_num_layers / "
            "decoder_last_pipeline_num_layers, account_for_embedding_in_pipeline_split / "
            "account_for_loss_in_pipeline_split and the framework's own split; predict the "
            "explicit layout with planner predict"
        ),
        "recompute_num_layers": (
            "the explorer recomputes every layer or none; predict full recompute of the first "
            "layers of each chunk with planner predict"
        ),
        "activation_offload_layers": (
            "the explorer does not search host offloading of activations; predict a layout "
            "with offloaded layers with planner predict"
        ),
        "pipeline_batch_size": (
            "it must divide each candidate's global_batch_size / data_parallel, so explore does "
            "not take it: explore runs one pipeline schedule per iteration; predict a run of "
            "several schedules per iteration with planner predict"
        ),
    }
)
"""Fields ``planner predict`` takes and the explorer refuses, with the reason its error gives."""
ScalarField = Literal[
    "recompute_modules",
    "precision",
    "fp8_recipe",
    "flash_attention",
    "grad_reduce_in_fp32",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "tp_comm_overlap",
    "recompute_early_stop",
    "separate_qkv_projections",
    "separate_gate_up_projections",
    "fp8_tp_all_gather",
    "fp8_param_gather",
    "main_params_dtype",
    "exp_avg_dtype",
    "exp_avg_sq_dtype",
    "store_param_remainders",
    "optimizer_implementation",
    "megatron_fsdp",
]
SCALAR_FIELDS: tuple[ScalarField, ...] = get_args(ScalarField)
"""The scenario's other ``parallelism`` fields (precision, flash attention, gradient-reduction
precision and overlap, FP8 weights, the optimizer's dtypes and implementation,
Megatron-FSDP): one value per explore document, carried into every candidate
(``DesignSpace.scenario`` replaces only the layout of the base's ``parallelism``;
``planner.perf.candidates.candidate_arrays`` repeats the base's other columns). They are the
schema's ``parallelism`` fields that are neither knobs (``_LIST_FIELDS``) nor
``PREDICT_ONLY``; ``_check_scalar_fields`` holds the two lists together."""


def _check_scalar_fields() -> None:
    """Raise ``RuntimeError`` when ``SCALAR_FIELDS`` is not the schema's one-per-document
    ``parallelism`` fields (a field added to the schema must be added to ``ScalarField``)."""
    schema = tuple(
        k for k in SECTION_KEYS["parallelism"] if k not in _LIST_FIELDS and k not in PREDICT_ONLY
    )
    if schema != SCALAR_FIELDS:
        raise RuntimeError(
            f"planner.scenario.space.ScalarField lists {SCALAR_FIELDS}, the schema's "
            f"one-per-document parallelism fields are {schema} (in this order)"
        )


_check_scalar_fields()


class StatedFields(TypedDict, total=False):
    """The ``SCALAR_FIELDS`` an explore document states, as written (any value the
    document's reader gave; ``parse_scenario`` has checked them)."""

    recompute_modules: object
    precision: object
    fp8_recipe: object
    flash_attention: object
    grad_reduce_in_fp32: object
    overlap_grad_reduce: object
    overlap_param_gather: object
    tp_comm_overlap: object
    recompute_early_stop: object
    separate_qkv_projections: object
    separate_gate_up_projections: object
    fp8_tp_all_gather: object
    fp8_param_gather: object
    main_params_dtype: object
    exp_avg_dtype: object
    exp_avg_sq_dtype: object
    store_param_remainders: object
    optimizer_implementation: object
    megatron_fsdp: object


class _ExpertTensorParallel(TypedDict, total=False):
    expert_tensor_parallel: int


class _UnevenSplit(TypedDict, total=False):
    decoder_first_pipeline_num_layers: int
    decoder_last_pipeline_num_layers: int


class LayoutJson(_ExpertTensorParallel, _UnevenSplit, StatedFields):
    """The scenario-format ``parallelism`` section of one layout (``layout_json``)."""

    tensor_parallel: int
    pipeline_parallel: int
    context_parallel: int
    expert_parallel: int
    data_parallel: int
    virtual_pipeline: int
    sequence_parallel: bool
    micro_batch_size: int
    global_batch_size: int
    recompute: str
    zero_stage: int
    account_for_embedding_in_pipeline_split: bool
    account_for_loss_in_pipeline_split: bool


class ExploreEntryJson(TypedDict):
    """One entry of the explore output (``entry_json``)."""

    num_gpus: int
    parallelism: LayoutJson
    prediction: PredictionJson
    gpu_hours: NotRequired[float | None]
    rank: NotRequired[int]
    equivalents: NotRequired[list[ExploreEntryJson]]
    num_equivalents: NotRequired[int]


class ExploreCountsJson(TypedDict):
    """How many candidates the sweep enumerated and evaluated, and why the others were
    rejected (count per reason)."""

    enumerated: int
    evaluated: int
    rejected: dict[str, int]


class ExploreJson(TypedDict):
    """The ``planner explore --json`` object (``explore_json``)."""

    name: str | None
    objective: str
    top: list[ExploreEntryJson]
    pareto: list[ExploreEntryJson]
    pareto_criteria: list[str]
    counts: ExploreCountsJson
    placement: str


def _values(raw: object, *, numeric: bool = True) -> list[object] | None:
    """``None`` when open, else the list of allowed values (a scalar is a list of one); for a
    ``numeric`` field, numbers as ``planner.scenario.numbers`` reads them, integral floats as
    ints."""
    if raw is None:
        return None
    items = list(raw) if isinstance(raw, list | tuple) else [raw]
    if not numeric:
        return items
    return [integer_or_value(item) for item in items]


def _recompute(raw: list[object]) -> list[object]:
    """Mode names (any case, blanks ignored) as ``Recompute``; anything else left for
    ``Knobs`` to reject with the allowed names."""
    names = {r.value for r in Recompute}
    out: list[object] = []
    for value in raw:
        text = str(value).strip().lower()
        out.append(Recompute(text) if text in names else value)
    return out


def _section(doc: Mapping[str, object], name: str) -> Mapping[str, object]:
    section = doc.get(name)
    if not isinstance(section, Mapping):
        raise SpecError(name, f"must be a mapping of fields, got {type(section).__name__}")
    return section


def _parallelism_section(doc: Mapping[str, object]) -> Mapping[str, object]:
    """The ``parallelism`` section, its fields checked (not yet their values)."""
    if doc.get("parallelism") is None:
        raise SpecError("parallelism", "the 'parallelism' section is required (global_batch_size)")
    par = _section(doc, "parallelism")
    allowed = (*_LIST_FIELDS, *SCALAR_FIELDS)
    for key in par:
        if key in PREDICT_ONLY:
            raise SpecError(f"parallelism.{key}", PREDICT_ONLY[key])
        if key not in allowed:
            raise SpecError(f"parallelism.{key}", f"unknown field; allowed: {', '.join(allowed)}")
    for key in SCALAR_FIELDS:
        if isinstance(par.get(key), list | tuple):
            raise SpecError(
                f"parallelism.{key}",
                "give one value per document; sweep several with a JSONL of documents",
            )
    return par


def parse_knobs(doc: Mapping[str, object]) -> tuple[tuple[int, ...], Knobs]:
    """The global batch sizes and ``Knobs`` of an explore document's ``parallelism`` section.

    Raises ``SpecError("parallelism[.<field>]", ...)`` for a missing section or global batch,
    an unknown field, a ``SCALAR_FIELDS`` value given as a list, and bad allowed values.
    """
    par = _parallelism_section(doc)
    raw_batch = _values(par.get("global_batch_size"))
    if raw_batch is None:
        raise SpecError(
            "parallelism.global_batch_size", "is required (sequences per iteration, or a list)"
        )
    batches = allowed_counts("parallelism.global_batch_size", raw_batch)
    given: dict[str, tuple[object, ...]] = {}
    for key in (*KNOBS, "data_parallel"):
        numeric = key not in (
            "recompute",
            "sequence_parallel",
            "account_for_embedding_in_pipeline_split",
            "account_for_loss_in_pipeline_split",
        )
        values = _values(par.get(key), numeric=numeric)
        if values is not None:
            given[key] = tuple(_recompute(values) if key == "recompute" else values)
    return batches, Knobs.from_values(given)


def probe_document(doc: Mapping[str, object], num_gpus: int) -> dict[str, object]:
    """The scenario document of ``doc``'s job on ``num_gpus`` GPUs, pure data parallel, with
    the document's ``SCALAR_FIELDS``: what ``parse_scenario`` validates the model, hardware,
    training and one-per-document fields of an explore document with. A ``tp_comm_overlap``
    the framework refuses at tensor parallelism 1 is left out (``probe_tp_comm_overlap``;
    ``parse_space`` hands the job's value to the ``DesignSpace``); a bf16 master, which
    Megatron-Core's optimizer refuses below ZeRO-3 without Megatron-FSDP
    (``optimizer_dtype_rule``), is probed at ZeRO-3 (the candidates carry their own stages)."""
    par = doc.get("parallelism")
    probe_par: dict[str, object] = {"data_parallel": num_gpus, "global_batch_size": num_gpus}
    probe_par.update(stated_fields(par))
    if probe_tp_comm_overlap(probe_par.get("tp_comm_overlap") is True, _framework(doc)) is None:
        del probe_par["tp_comm_overlap"]
    if (
        probe_par.get("main_params_dtype") == "bf16"
        and probe_par.get("megatron_fsdp") is not True
        and optimizer_dtype_rule(_framework(doc))
    ):
        probe_par["zero_stage"] = 3  # the one stage Megatron-Core's optimizer takes it at
    probe = {k: v for k, v in doc.items() if k != "parallelism"}
    probe["hardware"] = {**_mapping_or_empty(doc.get("hardware")), "num_gpus": num_gpus}
    probe["parallelism"] = probe_par
    return probe


def _framework(doc: Mapping[str, object]) -> str:
    """The ``training.framework`` a document states, as written (Megatron-LM when unset, as
    ``parse_scenario`` reads it); what ``parse_scenario`` refuses stays its to refuse."""
    training = doc.get("training")
    framework = training.get("framework") if isinstance(training, Mapping) else None
    return framework if isinstance(framework, str) else str(Framework.MEGATRON)


def parse_space(doc: object) -> DesignSpace:
    """Validate an explore document into a ``DesignSpace``.

    Raises ``SpecError("<dotted.field>", ...)`` for everything ``parse_scenario`` rejects in
    the model, hardware and training sections, for malformed knob lists (empty, wrong types,
    ZeRO stage outside 0-3, unknown recompute mode), and for the ``SCALAR_FIELDS`` (precision,
    flash attention, ...) given as lists (explore one of each per document; a JSONL sweeps more).
    """
    if isinstance(doc, SpecError):
        raise doc
    if not isinstance(doc, Mapping):
        raise SpecError("", f"a scenario must be a mapping, got {type(doc).__name__}")
    _parallelism_section(doc)
    hardware = doc.get("hardware")
    if not isinstance(hardware, Mapping):
        raise SpecError("hardware", "the 'hardware' section is required (gpu, num_gpus)")
    raw_gpus = _values(hardware.get("num_gpus"))
    if raw_gpus is None:
        raise SpecError("hardware.num_gpus", "is required (a count or a list of counts)")
    gpu_counts = allowed_counts("hardware.num_gpus", raw_gpus)
    batches, knobs = parse_knobs(doc)
    base = parse_scenario(probe_document(doc, gpu_counts[0]))
    overlap = stated_fields(doc.get("parallelism")).get("tp_comm_overlap")
    return DesignSpace(
        base=base,
        num_gpus=gpu_counts,
        global_batch_size=batches,
        knobs=knobs,
        tp_comm_overlap=True if overlap is True else None,  # the probe may leave it out
    )


def stated_fields(parallelism: object) -> StatedFields:
    """The ``SCALAR_FIELDS`` a document's ``parallelism`` section states, as written: every
    entry of the explore output repeats them after its layout."""
    stated: StatedFields = {}
    if isinstance(parallelism, Mapping):
        for key in SCALAR_FIELDS:
            if parallelism.get(key) is not None:
                stated[key] = parallelism[key]
    return stated


def layout_json(parallelism: ParallelismSpec, stated: StatedFields) -> LayoutJson:
    """The scenario-format ``parallelism`` section of one layout: every knob explicit (the
    expert tensor-parallel degree where the layout sets one: MoE models), then the ``stated``
    one-per-document fields."""
    folded: _ExpertTensorParallel = {}
    if parallelism.expert_tensor_parallel is not None:
        folded["expert_tensor_parallel"] = parallelism.expert_tensor_parallel
    return {
        "tensor_parallel": parallelism.tensor_parallel,
        "pipeline_parallel": parallelism.pipeline_parallel,
        "context_parallel": parallelism.context_parallel,
        "expert_parallel": parallelism.expert_parallel,
        "data_parallel": parallelism.data_parallel,
        "virtual_pipeline": parallelism.virtual_pipeline,
        "sequence_parallel": parallelism.sequence_parallel,
        "micro_batch_size": parallelism.micro_batch_size,
        "global_batch_size": parallelism.global_batch_size,
        "recompute": parallelism.recompute.value,
        "zero_stage": parallelism.zero_stage,
        **folded,
        "account_for_embedding_in_pipeline_split": (
            parallelism.account_for_embedding_in_pipeline_split
        ),
        "account_for_loss_in_pipeline_split": parallelism.account_for_loss_in_pipeline_split,
        **_uneven_split(parallelism),
        **stated,
    }


def _uneven_split(parallelism: ParallelismSpec) -> _UnevenSplit:
    """The first / last pipeline ranks' layer counts a layout sets (none for most layouts)."""
    split: _UnevenSplit = {}
    if parallelism.decoder_first_pipeline_num_layers is not None:
        split["decoder_first_pipeline_num_layers"] = parallelism.decoder_first_pipeline_num_layers
    if parallelism.decoder_last_pipeline_num_layers is not None:
        split["decoder_last_pipeline_num_layers"] = parallelism.decoder_last_pipeline_num_layers
    return split


def entry_json(entry: ExploreEntry, objective: Objective, stated: StatedFields) -> ExploreEntryJson:
    """One entry of the explore output: ``num_gpus``, ``parallelism`` (``layout_json``),
    ``prediction`` (the ``planner predict --json`` object of that layout), ``gpu_hours`` for
    the cost objective, ``rank`` for a ranked entry, with its ``equivalents`` (entries of
    the layouts within the tolerance of it, each with ``num_gpus``, ``parallelism`` and
    ``prediction``) and ``num_equivalents`` (how many there are, listed or not)."""
    n = entry.num_gpus
    prediction = prediction_json(entry.prediction, entry.scenario.name)
    out: ExploreEntryJson = {
        "num_gpus": n,
        "parallelism": layout_json(entry.scenario.parallelism, stated),
        "prediction": prediction,
    }
    if objective is Objective.COST:
        ttt = prediction["time_to_train_s"]
        out["gpu_hours"] = None if ttt is None else n * ttt / 3600.0
    if entry.rank is not None:
        out["rank"] = entry.rank
        out["equivalents"] = [entry_json(e, objective, stated) for e in entry.equivalents]
        out["num_equivalents"] = entry.num_equivalents
    return out


def explore_json(result: ExploreResult, stated: StatedFields) -> ExploreJson:
    """The ``planner explore --json`` object of ``result``; ``stated``: the document's
    one-per-document ``parallelism`` fields (``stated_fields``)."""
    return {
        "name": result.name,
        "objective": result.objective.value,
        "top": [entry_json(e, result.objective, stated) for e in result.top],
        "pareto": [entry_json(e, result.objective, stated) for e in result.pareto],
        "pareto_criteria": list(result.pareto_criteria),
        "counts": {
            "enumerated": result.enumerated,
            "evaluated": result.evaluated,
            "rejected": result.rejected,
        },
        "placement": PLACEMENT_NOTE,
    }


def _mapping_or_empty(section: object) -> Mapping[str, object]:
    """A document section that is a mapping, else no fields (the parser reports a section
    that is not a mapping, naming it)."""
    return section if isinstance(section, Mapping) else {}


def scenario_document(
    doc: Mapping[str, object], parallelism: Mapping[str, object], num_gpus: int
) -> dict[str, object]:
    """The ``planner predict`` document of one explore entry: the explore document ``doc``
    with the entry's ``parallelism`` section and GPU count."""
    out = copy.deepcopy(dict(doc))
    out["hardware"] = {**_mapping_or_empty(out.get("hardware")), "num_gpus": num_gpus}
    out["parallelism"] = dict(parallelism)
    return out
