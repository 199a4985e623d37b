"""A job's launch -> what it trains: the scenario, where each value came from, what is unknown,
and the prediction. One function, :func:`describe_launch`, used by ``planner describe``, the
service's ingest loop and ``benchmarks/describe.py``.

Order of work:

1. The launch is unwrapped into the programs it runs (:mod:`planner.launch.shell` for batch
   scripts and command lines, :mod:`planner.launch.kubernetes` for manifests): variables
   expanded, wrapper scripts followed, launchers (``srun``, ``torchrun``, ``accelerate``,
   ``deepspeed``) peeled off, the allocation read from ``#SBATCH`` lines, launcher options and
   Kubernetes resources.
2. The first reader (:data:`planner.launch.readers.READERS`, in order) that recognises one of the
   programs describes the job from its arguments and the config files they name.
3. When the head of the job's log is given (``Launch.log_text``), what it prints of the
   resolved configuration fills what the launch left open and is checked against what the
   launch says (:mod:`planner.launch.witness`: the launch's values stay, a disagreement is
   noted).
4. :func:`finish` settles the GPU count (``--gpus`` > the launcher's world size > the
   scheduler's allocation), derives data parallelism and the global batch where the reader left
   them, assumes documented defaults for what is still open (listing them) and names what no
   source determined.
5. The scenario is predicted (``planner predict``'s output for one scenario) when the GPU type
   is known and nothing required is unknown; else ``prediction`` is ``{"error": ...}`` naming
   the missing field and how to give it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict, final

from planner.catalog import gpu_catalog, gpu_key_for_gres_type
from planner.errors import PlannerError
from planner.launch.reader import ReadContext
from planner.launch.readers import READERS
from planner.launch.release import launch_release
from planner.launch.shell import LaunchPlan, plan_from_launch
from planner.launch.types import (
    BoundedFiles,
    Facts,
    Invocation,
    Launch,
    LaunchFiles,
    Sourced,
)
from planner.launch.values import positive_int
from planner.launch.witness import check_witness, weigh_witness, witness_facts
from planner.scenario.documents import PredictedJson, predict_results

__all__ = [
    "REQUIRED_FIELDS",
    "LaunchDescription",
    "LaunchDescriptionJson",
    "describe_launch",
    "finish",
    "scenario_from_facts",
]

REQUIRED_FIELDS = (
    "model.num_layers",
    "model.hidden_size",
    "model.num_attention_heads",
    "model.ffn_hidden_size",
    "model.vocab_size",
    "model.seq_length",
    "hardware.gpu",
    "hardware.num_gpus",
    "parallelism.global_batch_size",
)
"""Fields a prediction cannot do without; each is listed as unknown when no source gives it."""

_SECTIONS = ("model", "hardware", "parallelism", "training")
_SCENARIO_DEFAULT = "default of the scenario format (docs/scenario-format.md)"


@final
class PredictionErrorJson(TypedDict):
    """Why a launch has no prediction: ``"<field>: <what is wrong and how to fix it>"``."""

    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchDescription:
    """What the planner thinks a launch trains.

    ``described_by``: the reader that recognised it (``none`` when none did); ``detail``: the
    program and where the launch runs it, or why nothing was recognised; ``scenario``: a
    scenario-format document (the values found plus the defaults assumed); ``provenance``:
    dotted field -> source; ``assumed``: fields filled by documented defaults; ``unknown``:
    fields no source determined; ``launch``: launch facts the scenario format does not hold
    (``num_nodes``, ``fsdp_shard``, ``gradient_accumulation``, ``model_name``, ...);
    ``notes``: what the reader wants a person to know; ``predicted``: one ``planner predict
    --json`` object, or ``{"error": ...}`` (None: not predicted); ``train_iters``: optimizer
    steps the job runs, when known; ``error``: why the launch could not be described (a config
    that cannot be read).
    """

    described_by: str
    detail: str
    scenario: dict[str, object] = field(default_factory=dict)
    provenance: dict[str, str] = field(default_factory=dict)
    assumed: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    launch: dict[str, object] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    predicted: PredictedJson | PredictionErrorJson | None = None
    train_iters: int | None = None
    error: str | None = None

    @property
    def recognised(self) -> bool:
        """True when a reader recognised the launch."""
        return self.described_by != "none"

    def to_json(self) -> LaunchDescriptionJson:
        """The ``planner describe --json`` object."""
        out: LaunchDescriptionJson = {
            "described_by": self.described_by,
            "detail": self.detail,
            "scenario": self.scenario,
            "provenance": self.provenance,
            "assumed": list(self.assumed),
            "unknown": list(self.unknown),
            "launch": self.launch,
            "notes": list(self.notes),
            "prediction": self.predicted
            if self.predicted is not None
            else {"error": self.error or "not predicted"},
        }
        if self.error:
            out["error"] = self.error
        return out


class LaunchDescriptionJson(TypedDict):
    """The ``planner describe --json`` object (``LaunchDescription``'s fields; ``prediction``
    is ``{"error": ...}`` when there is none)."""

    described_by: str
    detail: str
    scenario: dict[str, object]
    provenance: dict[str, str]
    assumed: list[str]
    unknown: list[str]
    launch: dict[str, object]
    notes: list[str]
    prediction: PredictedJson | PredictionErrorJson
    error: NotRequired[str]


def _settle_gpus(facts: Facts, plan: LaunchPlan, launch: Launch, gpus: int | None) -> None:
    """``hardware.num_gpus``: ``--gpus`` > what the reader found > the launcher's world size >
    the scheduler lines of the launch > the scheduler's allocation; ``hardware.gpus_per_node``
    and ``launch.num_nodes`` from the allocation when the reader found none."""
    for name in ("hardware.gpus_per_node", "launch.num_nodes"):
        found = plan.allocation.values.get(name)
        if found is not None and not facts.has(name):
            facts.set(name, found.value, found.source)
    if gpus:
        facts.set("hardware.num_gpus", gpus, "override: --gpus")
        return
    if facts.has("hardware.num_gpus"):
        return
    for name in ("launch.world_size", "hardware.num_gpus"):
        found = plan.allocation.values.get(name)
        if found is not None and positive_int(found.value):
            facts.set("hardware.num_gpus", positive_int(found.value), found.source)
            return
    if launch.num_gpus > 0:
        facts.set("hardware.num_gpus", launch.num_gpus, "launch: the scheduler's allocation")


def finish(facts: Facts, *, gpu: str | None = None) -> None:
    """Settle the derived values and defaults of a reader's facts (in place).

    * ``hardware.gpu``: ``gpu`` (a catalog key or scheduler name) when given.
    * ``parallelism.data_parallel`` = num_gpus / (tp x pp x cp) when unset and it divides.
    * ``parallelism.global_batch_size`` = micro x gradient accumulation x data parallel when the
      reader found those but no global batch; ``launch.gradient_accumulation`` the other way.
    * ``launch.num_nodes`` = num_gpus / gpus_per_node when both are known.
    * Parallel degrees absent everywhere are 1, micro batch 1 (the scenario format's defaults),
      listed as assumed; required fields still missing are listed as unknown.
    """
    if gpu:
        key = gpu_key_for_gres_type(gpu) or gpu
        facts.set("hardware.gpu", key, "override: --gpu")
    _assume_defaults(facts)
    _derive_data_parallel(facts)
    _derive_batch(facts)
    num_gpus = facts.int("hardware.num_gpus")
    per_node = facts.int("hardware.gpus_per_node")
    if num_gpus and per_node and not facts.has("launch.num_nodes"):
        facts.set(
            "launch.num_nodes",
            max(1, math.ceil(num_gpus / per_node)),
            "derived: num_gpus / gpus_per_node",
        )
    for name in REQUIRED_FIELDS:
        facts.mark_unknown(name)


def _assume_defaults(facts: Facts) -> None:
    """Parallel degrees and micro batch 1 (the scenario format's defaults); the model's own
    length as the training sequence when nothing gave one."""
    for name in (
        "parallelism.tensor_parallel",
        "parallelism.pipeline_parallel",
        "parallelism.context_parallel",
        "parallelism.expert_parallel",
    ):
        facts.default(name, 1, _SCENARIO_DEFAULT)
    facts.default("parallelism.micro_batch_size", 1, _SCENARIO_DEFAULT)
    model_length = facts.values.get("launch.model_seq_length")
    if model_length is not None:
        facts.default(
            "model.seq_length",
            model_length.value,
            f"{model_length.source}: the model's own length, assumed as the training sequence",
        )


def _derive_data_parallel(facts: Facts) -> None:
    """data parallel = num_gpus / (tp x pp x cp), when unset and it divides."""
    num_gpus = facts.int("hardware.num_gpus")
    tp = facts.int("parallelism.tensor_parallel") or 1
    pp = facts.int("parallelism.pipeline_parallel") or 1
    cp = facts.int("parallelism.context_parallel") or 1
    if num_gpus and not facts.has("parallelism.data_parallel") and num_gpus % (tp * pp * cp) == 0:
        facts.set(
            "parallelism.data_parallel",
            num_gpus // (tp * pp * cp),
            "derived: num_gpus / (tensor x pipeline x context parallel)",
        )


def _derive_batch(facts: Facts) -> None:
    """global batch = micro x accumulation x data parallel, or accumulation = global batch /
    (micro x data parallel), whichever the facts lack."""
    dp = facts.int("parallelism.data_parallel")
    micro = facts.int("parallelism.micro_batch_size")
    accumulation = facts.int("launch.gradient_accumulation")
    if dp and micro and accumulation and not facts.has("parallelism.global_batch_size"):
        facts.set(
            "parallelism.global_batch_size",
            micro * accumulation * dp,
            "derived: micro batch x gradient accumulation x data parallel",
        )
    gbs = facts.int("parallelism.global_batch_size")
    if (
        dp
        and micro
        and gbs
        and not facts.has("launch.gradient_accumulation")
        and gbs % (micro * dp) == 0
    ):
        facts.set(
            "launch.gradient_accumulation",
            gbs // (micro * dp),
            "derived: global batch / (micro batch x data parallel)",
        )


def scenario_from_facts(facts: Facts, *, name: str = "") -> dict[str, object]:
    """The scenario-format document of ``facts``: ``name`` (when given), then each section
    (``model``, ``hardware``, ...) that has facts, in the order facts were found, as a
    mapping of field -> plain value (lists, mappings, scalars); ``launch.*`` facts are left
    out."""
    sections: dict[str, dict[str, object]] = {}
    for dotted, found in facts:
        section, _, key = dotted.partition(".")
        if section not in _SECTIONS or not key or "." in key:
            continue
        sections.setdefault(section, {})[key] = _plain(found.value)
    return {"name": name, **sections} if name else {**sections}


def _plain(value: object) -> object:
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _prediction(
    facts: Facts, document: Mapping[str, object]
) -> PredictedJson | PredictionErrorJson:
    missing = sorted(facts.unknown & set(REQUIRED_FIELDS))
    if missing:
        how = {
            "hardware.gpu": "pass --gpu TYPE (a catalog key such as h100-sxm)",
            "hardware.num_gpus": "pass --gpus N",
        }
        hints = "; ".join(how[m] for m in missing if m in how)
        return {
            "error": f"{', '.join(missing)}: not determined by the launch"
            + (f"; {hints}" if hints else "")
        }
    hardware = document.get("hardware")
    gpu = hardware.get("gpu") if isinstance(hardware, Mapping) else None
    if isinstance(gpu, str) and gpu not in gpu_catalog():
        return {"error": f"hardware.gpu: {gpu!r} is not in the GPU catalog; pass --gpu TYPE"}
    result = predict_results([document])[0]
    return {"error": result["error"]} if "error" in result else result


def _train_iters(facts: Facts) -> int | None:
    iters = positive_int(facts.get("training.train_iters"))
    if iters:
        return iters
    tokens = facts.get("training.total_tokens")
    gbs = facts.int("parallelism.global_batch_size")
    seq = facts.int("model.seq_length")
    if isinstance(tokens, int | float) and tokens > 0 and gbs and seq:
        return max(1, math.ceil(tokens / (gbs * seq)))
    return None


def describe_launch(
    launch: Launch,
    files: LaunchFiles,
    *,
    gpus: int | None = None,
    gpu: str | None = None,
    predict: bool = True,
) -> LaunchDescription:
    """Describe ``launch`` (module docstring). ``files`` reads what the launch names (wrapped
    here in the description's bounds); ``gpus`` / ``gpu`` override the GPU count and type.

    Never raises: a launch no reader recognises comes back with ``described_by == "none"``,
    and a config that cannot be read or parsed with ``error`` set (naming the file and the fix).
    """
    bounded = BoundedFiles(files)
    try:
        plan = plan_from_launch(launch, bounded)
    except PlannerError as exc:
        return LaunchDescription(described_by="none", detail="launch not read", error=str(exc))
    context = ReadContext(
        launch=launch,
        files=plan.files,
        allocation=plan.allocation,
        invocations=plan.invocations,
    )
    for reader in READERS:
        for invocation in plan.invocations:
            if not reader.recognises(invocation):
                continue
            detail = f"{invocation.program}" + (
                f" ({invocation.where})" if invocation.where else ""
            )
            try:
                facts = reader.read(invocation, context)
            except PlannerError as exc:
                return LaunchDescription(described_by=reader.name, detail=detail, error=str(exc))
            _framework_release(facts, plan, invocation)
            return _described(
                reader.name, detail, facts, plan, launch, gpus=gpus, gpu=gpu, predict=predict
            )
    seen = ", ".join(sorted({i.program for i in plan.invocations})) or "no command"
    return LaunchDescription(
        described_by="none",
        detail=f"no reader recognises the launch (programs: {seen})",
    )


def _framework_release(facts: Facts, plan: LaunchPlan, invocation: Invocation) -> None:
    """``training.framework_version`` from the NeMo Framework container the program runs in
    (:func:`~planner.launch.release.nemo_container_release`), when the reader found none: the
    Kubernetes container's ``image``, else ``srun --container-image`` (pyxis) around the
    program."""
    if facts.has("training.framework_version"):
        return
    found = launch_release(plan.allocation, invocation)
    if found is not None:
        release, source = found
        facts.set(
            "training.framework_version",
            release,
            f"derived: {source} is the NeMo Framework container {release}",
        )


def _described(
    reader: str,
    detail: str,
    facts: Facts,
    plan: LaunchPlan,
    launch: Launch,
    *,
    gpus: int | None,
    gpu: str | None,
    predict: bool,
) -> LaunchDescription:
    _settle_gpus(facts, plan, launch, gpus)
    for note in plan.allocation.notes:
        facts.note(note)
    witness = witness_facts(launch.log_text) if launch.log_text else None
    if witness is not None:
        weigh_witness(facts, witness)
    finish(facts, gpu=gpu or launch.gpu)
    if witness is not None:
        check_witness(facts, witness)
    document = scenario_from_facts(facts, name=launch.name)
    extras = {
        dotted.partition(".")[2]: _plain(found.value)
        for dotted, found in facts
        if dotted.startswith("launch.")
    }
    return LaunchDescription(
        described_by=reader,
        detail=detail,
        scenario=document,
        provenance={dotted: found.source for dotted, found in facts},
        assumed=tuple(sorted(facts.assumed)),
        unknown=tuple(sorted(facts.unknown)),
        launch=extras,
        notes=tuple(facts.notes),
        predicted=_prediction(facts, document) if predict else None,
        train_iters=_train_iters(facts),
    )


def sourced(value: object, source: str) -> Sourced:
    """A value with its source (for readers building facts outside :class:`Facts`)."""
    return Sourced(value, source)
