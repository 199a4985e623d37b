"""How the transformer layers are split over the pipeline stages, as each framework splits them.

Terms (Megatron-Core): ``p`` pipeline ranks, ``v`` model chunks (virtual stages) per rank, so
``p·v`` virtual stages; virtual stage ``i = chunk·p + rank`` (``PipelineParallelLayerLayout``:
"layout[i] gives the layers in the a-th vpp stage and the b-th pp stage, i = a·pp_size + b").
The embedding is always on virtual stage 0 (rank 0), the loss (final norm, LM head, loss) on the
last (rank ``p-1``). What the engine needs of a split is ``StageLayers``: the transformer layers
of rank 0, of the busiest middle rank and of rank ``p-1`` (all chunks of a rank together).

How a split is given, first match wins (Megatron-Core 0.16.1, ``TransformerConfig.__post_init__``
and ``transformer_block.get_num_layers_to_build``; the same rules are refused there):

1. ``pipeline_layout``: Megatron's ``--pipeline-model-parallel-layout``, a string of virtual
   stages separated by ``|``, each a sequence of ``E`` (embedding), ``t`` (transformer layer),
   ``m`` (multi-token-prediction layer), ``L`` (loss), with repetition ``t*3`` and ``(tt|)*29``
   (``PipelineParallelLayerLayout.parse_str_to_list``; commas are cosmetic), or a list of
   transformer layers per virtual stage (the embedding on the first, the loss on the last).
   ``validate_layer_layout``: exactly one ``E``, first; exactly one ``L``, last; ``num_layers``
   ``t``; MTP layers after every decoder layer. It cannot be combined with the options below.
2. ``decoder_first_pipeline_num_layers`` / ``decoder_last_pipeline_num_layers`` (rank 0 / rank
   ``p-1``, all its chunks): each positive and divisible by ``v``; the other ranks share the
   rest evenly (divisible by the middle ranks, each share by ``v``); there are middle layers
   exactly when there are middle ranks. Not combinable with the ``account_for`` options.
3. ``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``: the
   embedding / loss counts as one layer slot: ``num_layers + slots`` divisible by ``p``, each
   rank's share by ``v``; the first (last) virtual stage builds one layer fewer.
4. Nothing given: an even split where ``p·v`` divides the layers (every framework, and every
   prediction of the planner before uneven splits existed). Otherwise the framework's own rule:

   * Megatron-LM / NeMo (Megatron-Core): refused ("num_layers should be divisible by
     pipeline_model_parallel_size", ``get_num_layers_to_build``); the message names the options
     that split those layers.
   * torchtitan 0.3.0 (``distributed/pipeline_parallel.py``, ``_generate_llm_fqn_per_model_part``
     with the default ``pipeline_parallel_first/last_stage_less_layers = 1``): ``num_layers + 2``
     effective layers over the ``p·v`` stages, ``⌊·/(p·v)⌋`` each, the first ``remainder``
     stages one more; the first stage holds one layer fewer (the embedding), the last one fewer
     (norm and output); stage ``s`` on rank ``s mod p`` (loop style). Refused with more stages
     than effective layers or fewer than one layer per stage.
   * DeepSpeed (Megatron-DeepSpeed's ``GPTModelPipe``, ``partition_method="type:transformer"``:
     ``ds_utils.partition_balanced`` over a 0/1 weight per layer spec): the first
     ``num_layers mod p`` stages hold ``⌈num_layers/p⌉``, the others ``⌊num_layers/p⌋``
     (checked against DeepSpeed 0.19.8's ``partition_balanced``); no interleaved schedule.
   * Other frameworks: refused (no documented default split); give ``pipeline_layout``.

``stage_layers`` resolves one scenario (Python ints, rich ``SpecError``); ``stage_layer_arrays``
computes cases 2-4 for a batch of candidates (the design-space search) with the same rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.errors import SpecError
from planner.specs.model import ModelSpec

__all__ = [
    "DEEPSPEED",
    "DEFAULT_FRAMEWORK",
    "MEGATRON_CORE",
    "TORCHTITAN",
    "TORCH_PIPELINING",
    "StageLayers",
    "VirtualStage",
    "parse_layout",
    "stage_layer_arrays",
    "stage_layers",
    "stage_layers_of",
    "virtual_stages",
]

IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

DEFAULT_FRAMEWORK = "megatron"
"""The framework a rule assumes when none is given (``TrainingSpec``'s default)."""
MEGATRON_CORE = frozenset({"megatron", "nemo"})
"""Frameworks that split (and schedule) as Megatron-Core does (``Framework`` values)."""
TORCHTITAN = "torchtitan"
DEEPSPEED = "deepspeed"
TORCH_PIPELINING = frozenset({TORCHTITAN, "automodel"})
"""Frameworks that split and schedule with ``torch.distributed.pipelining`` as torchtitan does
(NeMo Automodel's pipelining module is built on torchtitan's split and schedules)."""

_FIELD = "parallelism.pipeline_layout"
_REPEAT_GROUP = re.compile(r"\(([^)]+)\)\*(\d+)")
_REPEAT_ONE = re.compile(r"(.)\*(\d+)")
_LAYER_CHARS = frozenset("ELtm")


@dataclass(frozen=True, slots=True)
class VirtualStage:
    """One virtual stage of a layout: its transformer (``decoder``) and MTP layers, and whether
    it holds the embedding and the loss."""

    decoder: int
    embedding: bool = False
    loss: bool = False
    mtp: int = 0


@dataclass(frozen=True, slots=True)
class StageLayers:
    """Transformer layers per pipeline rank (all its chunks): ``first`` (rank 0, with the
    embedding), ``middle`` (the busiest of ranks ``1..p-2``, 0 when ``p <= 2``), ``last``
    (rank ``p-1``, with the loss; ``first == last`` holds all layers when ``p == 1``), and
    ``ranks`` (every rank's count, rank order)."""

    first: int
    middle: int
    last: int
    ranks: tuple[int, ...]


@lru_cache(maxsize=256)
def parse_layout(text: str) -> tuple[VirtualStage, ...]:
    """Megatron's ``--pipeline-model-parallel-layout`` string as its virtual stages, in order.

    ``PipelineParallelLayerLayout.parse_str_to_list`` (Megatron-Core 0.16.1): commas removed,
    ``(...)*n`` then ``x*n`` unrolled, stages split at ``|``, characters ``E``, ``L``, ``t``,
    ``m``. Raises ``SpecError("parallelism.pipeline_layout", ...)`` for another character.
    """
    unrolled = text.replace(",", "").replace(" ", "")
    for pattern in (_REPEAT_GROUP, _REPEAT_ONE):
        unrolled = pattern.sub(lambda g: g.group(1) * int(g.group(2)), unrolled)
    stages = []
    for stage in unrolled.split("|"):
        bad = set(stage) - _LAYER_CHARS
        if bad:
            raise SpecError(
                _FIELD,
                f"unknown layer character {sorted(bad)[0]!r} in {text!r}; Megatron-Core's layout "
                "knows E (embedding), t (transformer layer), m (MTP layer), L (loss), stages "
                "separated by '|', repetition as t*3 or (tt|)*2",
            )
        stages.append(
            VirtualStage(
                decoder=stage.count("t"),
                embedding="E" in stage,
                loss="L" in stage,
                mtp=stage.count("m"),
            )
        )
    return tuple(stages)


def virtual_stages(layout: str | tuple[int, ...]) -> tuple[VirtualStage, ...]:
    """The virtual stages of a ``pipeline_layout`` value: a Megatron layout string, or the
    transformer layers per virtual stage (embedding on the first, loss on the last)."""
    if isinstance(layout, str):
        return parse_layout(layout)
    last = len(layout) - 1
    return tuple(
        VirtualStage(decoder=n, embedding=i == 0, loss=i == last) for i, n in enumerate(layout)
    )


def _ranks(stages: tuple[VirtualStage, ...], p: int) -> tuple[int, ...]:
    return tuple(sum(s.decoder for s in stages[r::p]) for r in range(p))


def _summary(ranks: tuple[int, ...]) -> StageLayers:
    middle = max(ranks[1:-1], default=0)
    return StageLayers(first=ranks[0], middle=middle, last=ranks[-1], ranks=ranks)


def _check_layout(
    stages: tuple[VirtualStage, ...], num_layers: int, mtp_num_layers: int, p: int
) -> None:
    """``PipelineParallelLayerLayout.validate_layer_layout`` (Megatron-Core 0.16.1)."""
    rule = "Megatron-Core validate_layer_layout: "
    if not stages[0].embedding:
        raise SpecError(_FIELD, rule + "the first virtual stage must start with E (embedding)")
    if not stages[-1].loss:
        raise SpecError(_FIELD, rule + "the last virtual stage must end with L (loss)")
    if sum(s.embedding for s in stages) != 1 or sum(s.loss for s in stages) != 1:
        raise SpecError(_FIELD, rule + "E and L must each appear exactly once")
    decoders = sum(s.decoder for s in stages)
    if decoders != num_layers:
        raise SpecError(
            _FIELD,
            f"{rule}the layout holds {decoders} transformer layers (t), model.num_layers is "
            f"{num_layers}",
        )
    mtp = sum(s.mtp for s in stages)
    if mtp != mtp_num_layers:
        raise SpecError(
            _FIELD,
            f"{rule}the layout holds {mtp} MTP layers (m), the model has {mtp_num_layers}",
        )
    if mtp:
        holding = [i for i, s in enumerate(stages) if s.mtp]
        if len(holding) != 1 or any(s.decoder for s in stages[holding[0] + 1 :]):
            raise SpecError(_FIELD, rule + "all MTP layers sit in one virtual stage, after every t")
        if holding[0] < len(stages) - p:
            raise SpecError(_FIELD, rule + "MTP layers sit in the last virtual stage of a rank")


def _explicit_first_last(
    num_layers: int, p: int, v: int, first: int | None, last: int | None
) -> StageLayers:
    """Megatron-Core's uneven first/last stages (``TransformerConfig.__post_init__``)."""
    rule = "Megatron-Core TransformerConfig: "
    rest, middle_ranks = num_layers, p
    for name, value in (
        ("decoder_first_pipeline_num_layers", first),
        ("decoder_last_pipeline_num_layers", last),
    ):
        if value is None:
            continue
        if value % v:
            raise SpecError(
                f"parallelism.{name}",
                f"{rule}{value} layers must be divisible by virtual_pipeline={v} (each of the "
                "rank's chunks holds the same number)",
            )
        rest -= value
        middle_ranks -= 1
    if middle_ranks < 0:
        raise SpecError(
            "parallelism.decoder_last_pipeline_num_layers",
            f"{rule}pipeline_parallel={p} has one rank, which is both the first and the last: "
            "give decoder_first_pipeline_num_layers only",
        )
    if bool(rest) != bool(middle_ranks) or rest < 0:
        raise SpecError(
            "parallelism.decoder_first_pipeline_num_layers",
            f"{rule}{max(rest, 0)} layers are left for {middle_ranks} other pipeline ranks; "
            "there must be layers exactly when there are ranks left",
        )
    share = rest // middle_ranks if middle_ranks else 0
    if middle_ranks and (rest % middle_ranks or share % v):
        raise SpecError(
            "parallelism.decoder_first_pipeline_num_layers",
            f"{rule}the {rest} layers left must split evenly over the other {middle_ranks} "
            f"ranks, each rank's share divisible by virtual_pipeline={v}",
        )
    ranks = [share] * p
    if first is not None:
        ranks[0] = first
    if last is not None:
        ranks[-1] = last
    return _summary(tuple(ranks))


@lru_cache(maxsize=4096)
def stage_layers(
    num_layers: int,
    *,
    pipeline_parallel: int,
    virtual_pipeline: int,
    framework: str,
    pipeline_layout: str | tuple[int, ...] | None = None,
    decoder_first_pipeline_num_layers: int | None = None,
    decoder_last_pipeline_num_layers: int | None = None,
    account_for_embedding_in_pipeline_split: bool = False,
    account_for_loss_in_pipeline_split: bool = False,
    mtp_num_layers: int = 0,
) -> StageLayers:
    """The layers per pipeline rank of one scenario (module docstring), or ``SpecError``
    naming the field to fix and the framework rule that refuses the split."""
    p, v = pipeline_parallel, virtual_pipeline
    if pipeline_layout is not None:
        stages = virtual_stages(pipeline_layout)
        _check_layout(stages, num_layers, mtp_num_layers, p)
        return _summary(_ranks(stages, p))
    if (
        decoder_first_pipeline_num_layers is not None
        or decoder_last_pipeline_num_layers is not None
    ):
        return _explicit_first_last(
            num_layers, p, v, decoder_first_pipeline_num_layers, decoder_last_pipeline_num_layers
        )
    *_, valid = stage_layer_arrays(
        num_layers,
        np.array([p]),
        np.array([v]),
        np.array([account_for_embedding_in_pipeline_split]),
        np.array([account_for_loss_in_pipeline_split]),
        framework,
    )
    if not valid[0]:
        raise split_error(
            num_layers,
            p,
            v,
            framework,
            embedding=account_for_embedding_in_pipeline_split,
            loss=account_for_loss_in_pipeline_split,
        )
    ranks = _rank_counts(
        num_layers,
        p,
        v,
        framework,
        slots=int(account_for_embedding_in_pipeline_split)
        + int(account_for_loss_in_pipeline_split),
        embedding=account_for_embedding_in_pipeline_split,
        loss=account_for_loss_in_pipeline_split,
    )
    return _summary(ranks)


def _rank_counts(
    num_layers: int, p: int, v: int, framework: str, *, slots: int, embedding: bool, loss: bool
) -> tuple[int, ...]:
    """Every rank's layers of an accepted split of cases 3-4 (module docstring)."""
    if p == 1:
        return (num_layers,)
    if slots or num_layers % (p * v) == 0:
        share = (num_layers + slots) // p
        return (share - embedding, *([share] * (p - 2)), share - loss)
    if framework in TORCH_PIPELINING:
        base, extra = divmod(num_layers + 2, p * v)
        counts = [v * base + sum(1 for c in range(v) if c * p + r < extra) for r in range(p)]
        counts[0] -= 1
        counts[-1] -= 1
        return tuple(counts)
    q, r = divmod(num_layers, p)  # DeepSpeed
    return tuple(q + (rank < r) for rank in range(p))


def stage_layer_arrays(  # noqa: PLR0917 (the split's own terms, in Megatron's order)
    num_layers: int,
    p: IntArray,
    v: IntArray,
    embedding: BoolArray,
    loss: BoolArray,
    framework: str,
    *,
    first: IntArray | None = None,
    last: IntArray | None = None,
) -> tuple[IntArray, IntArray, IntArray, BoolArray]:
    """Layers of rank 0, of the busiest middle rank and of rank ``p-1`` for candidates with
    ``p`` ranks of ``v`` chunks and the ``account_for`` options ``embedding`` / ``loss``
    (arrays of shape ``(n,)``), and whether the framework accepts the split (cases 2-4 of the
    module docstring; the counts of a refused split are meaningless). ``first`` / ``last``:
    ``decoder_first_pipeline_num_layers`` / ``decoder_last_pipeline_num_layers`` per candidate,
    ``0`` where unset (case 2, the same rules as ``stage_layers``)."""
    base = _even_or_default_arrays(num_layers, p, v, embedding, loss, framework)
    if first is None and last is None:
        return base
    zeros = np.zeros(p.shape, dtype=np.int64)
    f = zeros if first is None else first.astype(np.int64)
    lo = zeros if last is None else last.astype(np.int64)
    explicit = (f > 0) | (lo > 0)
    if not explicit.any():
        return base
    p64, v64 = p.astype(np.int64), v.astype(np.int64)
    # Megatron-Core TransformerConfig.__post_init__ ("Uneven PP"): each given count divisible
    # by v; the other ranks share the rest evenly, each share divisible by v; middle layers
    # exactly when there are middle ranks; never with the account_for options
    rest = num_layers - f - lo
    others = p64 - (f > 0) - (lo > 0)
    share = rest // np.maximum(others, 1)
    ok = (f % v64 == 0) & (lo % v64 == 0) & (rest >= 0) & (others >= 0)
    ok &= (rest > 0) == (others > 0)
    ok &= (others == 0) | ((rest % np.maximum(others, 1) == 0) & (share % v64 == 0))
    ok &= ~(embedding.astype(np.bool_) | loss.astype(np.bool_))
    single = p64 == 1
    ex_first = np.where(single, num_layers, np.where(f > 0, f, share))
    ex_last = np.where(single, num_layers, np.where(lo > 0, lo, share))
    ex_middle = np.where(p64 > 2, share, 0)
    b_first, b_middle, b_last, b_valid = base
    return (
        np.where(explicit, ex_first, b_first),
        np.where(explicit, ex_middle, b_middle),
        np.where(explicit, ex_last, b_last),
        np.where(explicit, ok, b_valid),
    )


def _even_or_default_arrays(  # noqa: PLR0917 (as stage_layer_arrays)
    num_layers: int,
    p: IntArray,
    v: IntArray,
    embedding: BoolArray,
    loss: BoolArray,
    framework: str,
) -> tuple[IntArray, IntArray, IntArray, BoolArray]:
    """``stage_layer_arrays`` for cases 3-4 of the module docstring (no explicit counts)."""
    p64, v64 = p.astype(np.int64), v.astype(np.int64)
    slots = embedding.astype(np.int64) + loss.astype(np.int64)
    flagged = slots > 0
    single = p64 == 1
    # Megatron-Core's account_for options (and an even split: no slots)
    total = num_layers + slots
    share = total // p64
    megatron_ok = (total % p64 == 0) & (share % v64 == 0)
    first = np.where(single, num_layers, share - embedding)
    last = np.where(single, num_layers, share - loss)
    middle = np.where(p64 > 2, share, 0)
    valid = np.where(flagged, megatron_ok | single, megatron_ok)
    uneven = ~flagged & ~megatron_ok & ~single
    if framework in TORCH_PIPELINING and uneven.any():
        stages = p64 * v64
        effective = num_layers + 2
        base = effective // stages
        extra = effective % stages

        def extra_chunks(rank: IntArray) -> IntArray:
            out: IntArray = np.clip((extra - rank + p64 - 1) // p64, 0, v64)
            return out

        tt_first = v64 * base + extra_chunks(np.zeros_like(p64)) - 1
        tt_middle = np.where(p64 > 2, v64 * base + extra_chunks(np.ones_like(p64)), 0)
        tt_last = v64 * base + extra_chunks(p64 - 1) - 1
        tt_ok = (stages <= effective) & (base >= 1)
        first = np.where(uneven, tt_first, first)
        middle = np.where(uneven, tt_middle, middle)
        last = np.where(uneven, tt_last, last)
        valid = np.where(uneven, tt_ok, valid)
    elif framework == DEEPSPEED and uneven.any():
        q, r = num_layers // p64, num_layers % p64
        first = np.where(uneven, q + (r > 0), first)
        middle = np.where(uneven & (p64 > 2), q + (r > 1), middle)
        last = np.where(uneven, q, last)
        valid = np.where(uneven, (v64 == 1) & (num_layers >= p64), valid)
    return first, middle, last, valid


def _suggestion(num_layers: int, p: int, v: int) -> str:
    """The ``account_for`` options that make Megatron-Core accept ``num_layers`` over ``p·v``."""
    for embedding, loss in ((True, True), (True, False), (False, True)):
        total = num_layers + embedding + loss
        if total % p == 0 and (total // p) % v == 0:
            names = [
                n
                for n, on in (
                    ("account_for_embedding_in_pipeline_split", embedding),
                    ("account_for_loss_in_pipeline_split", loss),
                )
                if on
            ]
            return (
                f"set {' and '.join(names)} ({num_layers} + {embedding + loss} = {total} = "
                f"{p}·{total // p}), or "
            )
    return ""


def split_error(
    num_layers: int, p: int, v: int, framework: str, *, embedding: bool, loss: bool
) -> SpecError:
    """The ``SpecError`` for a split ``stage_layer_arrays`` refuses: the field, the framework
    rule and a split that works."""
    field = "parallelism.virtual_pipeline" if v > 1 else "parallelism.pipeline_parallel"
    slots = int(embedding) + int(loss)
    if slots:
        total = num_layers + slots
        return SpecError(
            field,
            f"model.num_layers={num_layers} + {slots} (account_for_* slots) = {total} must be "
            f"divisible by pipeline_parallel={p} and each rank's share by virtual_pipeline={v} "
            "(Megatron-Core TransformerConfig, get_num_layers_to_build)",
        )
    head = (
        f"model.num_layers={num_layers} is not divisible by pipeline_parallel·virtual_pipeline "
        f"= {p}·{v} = {p * v}"
    )
    if framework in TORCH_PIPELINING:
        return SpecError(
            field,
            f"{head}, and torchtitan's default split (_generate_llm_fqn_per_model_part) needs "
            f"at least one layer per stage: {num_layers} + 2 effective layers over {p * v} "
            "stages; use fewer stages or give parallelism.pipeline_layout",
        )
    if framework == DEEPSPEED:
        return SpecError(
            field,
            f"{head}; DeepSpeed's PipelineModule splits unevenly only without an interleaved "
            f"schedule and with at least one layer per stage; set virtual_pipeline to 1 or "
            "give parallelism.pipeline_layout",
        )
    rule = (
        "Megatron-Core refuses an uneven split that is not given (get_num_layers_to_build: "
        "num_layers should be divisible by pipeline_model_parallel_size)"
        if framework in MEGATRON_CORE
        else f"{framework} has no documented default for an uneven split"
    )
    return SpecError(
        field,
        f"{head}; each model chunk needs the same number of layers unless the split is given: "
        f"{rule}; {_suggestion(num_layers, p, v)}set decoder_first_pipeline_num_layers / "
        "decoder_last_pipeline_num_layers, or give parallelism.pipeline_layout",
    )


def stage_layers_of(
    model: ModelSpec, layout: object, framework: str = DEFAULT_FRAMEWORK
) -> StageLayers:
    """``stage_layers`` for one candidate layout (``ParallelismSpec``, or any object with its
    degrees as Python numbers; split fields it lacks read as unset): its ``StageLayers``, or
    the ``SpecError`` of the framework rule refusing the split."""

    def get(name: str) -> Any:
        return getattr(layout, name, None)

    return stage_layers(
        model.num_layers,
        pipeline_parallel=int(get("pipeline_parallel")),
        virtual_pipeline=int(get("virtual_pipeline")),
        framework=str(framework),
        pipeline_layout=get("pipeline_layout"),
        decoder_first_pipeline_num_layers=get("decoder_first_pipeline_num_layers"),
        decoder_last_pipeline_num_layers=get("decoder_last_pipeline_num_layers"),
        account_for_embedding_in_pipeline_split=bool(
            get("account_for_embedding_in_pipeline_split")
        ),
        account_for_loss_in_pipeline_split=bool(get("account_for_loss_in_pipeline_split")),
        mtp_num_layers=int(getattr(model, "mtp_num_layers", 0) or 0),
    )
