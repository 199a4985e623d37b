"""The values each digit of a design space takes: the open values of every knob for one GPU
count and global batch, and the pipeline digit's (pipeline, ``account_for`` options, virtual
pipeline) combinations. ``planner.search.space`` describes the rules; ``SubSpace`` decodes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from planner.specs.folding import experts_split_by_tensor_parallel
from planner.specs.parallelism import Recompute
from planner.specs.pipeline_split import MEGATRON_CORE, stage_layer_arrays
from planner.specs.scenario import Scenario

if TYPE_CHECKING:
    from planner.search.space import Knobs

__all__ = [
    "DIGITS",
    "PIPELINE_COLUMNS",
    "divisors",
    "knob_values",
    "pipeline_combinations",
    "tensor_parallel_degrees",
    "uneven_splits",
]

MEGATRON = "megatron"
"""The framework whose rules ``uneven_splits`` applies (Megatron-Core's, as NeMo's)."""

IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

DIGITS = (
    "tensor_parallel",
    "pipeline",
    "context_parallel",
    "expert_parallel",
    "expert_tensor_parallel",
    "micro_batch_size",
    "recompute",
    "zero_stage",
    "sequence_parallel",
)
"""The digits of a sub-space's mixed-radix product, outermost first: ``pipeline`` indexes
``SubSpace.pipelines``, the combinations of pipeline degree, ``account_for`` options and
virtual pipeline degree."""


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


PIPELINE_COLUMNS = (
    "pipeline_parallel",
    "account_for_embedding_in_pipeline_split",
    "account_for_loss_in_pipeline_split",
    "virtual_pipeline",
    "decoder_first_pipeline_num_layers",
    "decoder_last_pipeline_num_layers",
)
"""The columns of a pipeline-digit row (``SubSpace.pipelines``): the degree, the two
``account_for`` options as 0/1, the virtual degree, the first and last ranks' layers (0:
unset)."""


def pipeline_combinations(base: Scenario, num_gpus: int, knobs: Knobs) -> IntArray:
    """The pipeline digit's combinations, rows of ``PIPELINE_COLUMNS``, shape ``(k, 6)``.

    Open knobs take only combinations the framework splits the layers for
    (``planner.specs.pipeline_split``): degrees dividing ``num_gpus`` (at most the layers plus
    the two slots), the ``account_for`` options where they split the layers and never on one
    stage when the plain split is allowed (they change nothing there), and the virtual degrees
    dividing each rank's share. Listed pipeline or virtual degrees are crossed in full with the
    plain split (listed pipeline degrees with every divisor of the layers too, as the search
    always did; a listed value the layers do not split into is enumerated and counted as
    such); the options join them where they split. The uneven first / last ranks
    (``uneven_splits``) join them under Megatron-Core (and under any framework where the
    space lists them: ``planner predict`` takes them whatever the framework)."""
    layers = base.model.num_layers
    framework = str(base.training.framework)
    chosen_p = knobs.codes("pipeline_parallel")
    chosen_v = knobs.codes("virtual_pipeline")
    degrees = (
        list(chosen_p)
        if chosen_p is not None
        else [p for p in divisors(num_gpus) if p <= layers + 2]
    )
    embedding = [bool(x) for x in knobs.codes("account_for_embedding_in_pipeline_split") or (0, 1)]
    loss = [bool(x) for x in knobs.codes("account_for_loss_in_pipeline_split") or (0, 1)]
    plain_allowed = False in embedding and False in loss
    rows: list[tuple[int, int, int, int, int, int]] = []
    for p in degrees:
        for e in embedding:
            for lo in loss:
                flagged = e or lo
                if flagged and p == 1 and plain_allowed:
                    continue  # the options change nothing on one stage
                share = (layers + e + lo) // p if p > 1 else 1
                if (layers + e + lo) % p and not flagged and p > 1:
                    share = (layers + 2) // p  # a framework's own split: around (L + 2)/p
                if chosen_v is not None:
                    vs = list(chosen_v)
                elif chosen_p is not None and not flagged:  # as before: every divisor of L
                    vs = sorted({*divisors(layers), *divisors(max(share, 1))})
                else:
                    vs = divisors(max(share, 1))
                rows.extend((p, int(e), int(lo), v, 0, 0) for v in vs)
    if not rows:
        return np.zeros((0, len(PIPELINE_COLUMNS)), dtype=np.int64)
    table = np.asarray(rows, dtype=np.int64)
    *counts, ok = _split(layers, table, framework)
    plain = (table[:, 1] == 0) & (table[:, 2] == 0)
    listed_plain = plain & (chosen_p is not None or chosen_v is not None)
    keep = ok | listed_plain | ((table[:, 0] == 1) & plain)
    table = table[keep]
    listed = any(
        knobs.codes(name) is not None
        for name in ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers")
    )
    if plain_allowed and (framework in MEGATRON_CORE or listed):
        accepted = {
            (int(r[0]), int(r[3]), int(a), int(b), int(c))
            for r, a, b, c, good in zip(table, *(x[keep] for x in counts), ok[keep], strict=True)
            if good
        }
        uneven = uneven_splits(layers, degrees, knobs, taken=accepted)
        if uneven.shape[0]:
            table = np.concatenate((table, uneven))
    return table


def _split(
    layers: int, table: IntArray, framework: str
) -> tuple[IntArray, IntArray, IntArray, BoolArray]:
    """``stage_layer_arrays`` of pipeline-digit rows: first, middle, last layers, accepted."""
    return stage_layer_arrays(
        layers,
        table[:, 0],
        table[:, 3],
        table[:, 1] > 0,
        table[:, 2] > 0,
        framework,
        first=table[:, 4],
        last=table[:, 5],
    )


def uneven_splits(
    num_layers: int,
    degrees: list[int],
    knobs: Knobs,
    *,
    taken: set[tuple[int, int, int, int, int]],
) -> IntArray:
    """Pipeline-digit rows (``PIPELINE_COLUMNS``) with Megatron-Core's uneven first / last
    ranks (``decoder_first_pipeline_num_layers`` / ``decoder_last_pipeline_num_layers``).

    For each degree ``2 <= p <= num_layers`` of ``degrees`` and virtual degree ``v`` (the
    listed ones, else 1 up to ``num_layers // p``): the ``(first, last)`` pairs Megatron-Core
    accepts (``TransformerConfig.__post_init__``, "Uneven PP": each count positive and
    divisible by ``v``, the other ranks sharing the rest evenly, each share divisible by ``v``;
    checked by ``planner.specs.pipeline_split.stage_layer_arrays``). Open counts are pruned to
    the splits whose busiest rank holds no more than ``⌈num_layers / p⌉`` layers, the fewest
    any split over ``p`` ranks can give it (an interleaved split that cannot is not searched;
    with one count listed, the fewest any accepted split with that count gives): the first and
    last ranks carry the embedding and the loss on top of their layers, so loading a rank with
    more layers than the split needs is never faster. Listed counts (0: unset) are crossed in full
    and kept where Megatron-Core accepts them. A split whose ranks hold the layers of a row in
    ``taken`` (``(p, v, first, middle, last)``: the even and ``account_for`` rows, then each
    row added) is left out, as it runs the same way; rows that set both counts come first.
    """
    listed_first = knobs.codes("decoder_first_pipeline_num_layers")
    listed_last = knobs.codes("decoder_last_pipeline_num_layers")
    chosen_v = knobs.codes("virtual_pipeline")
    rows: list[tuple[int, int, int, int, int, int]] = []
    if listed_first == (0,) and listed_last == (0,):
        return np.zeros((0, len(PIPELINE_COLUMNS)), dtype=np.int64)
    for p in degrees:
        if not 2 <= p <= num_layers:
            continue
        for v in chosen_v if chosen_v is not None else range(1, num_layers // p + 1):
            open_values = np.arange(0, num_layers + 1, v, dtype=np.int64)
            firsts = open_values if listed_first is None else np.asarray(listed_first)
            lasts = open_values if listed_last is None else np.asarray(listed_last)
            f, lo = (a.reshape(-1) for a in np.meshgrid(firsts, lasts, indexing="ij"))
            some = (f > 0) | (lo > 0)
            f, lo = f[some], lo[some]
            n = int(f.shape[0])
            no = np.zeros(n, dtype=np.bool_)
            p_col, v_col = np.full(n, p, dtype=np.int64), np.full(n, v, dtype=np.int64)
            first, middle, last, keep = stage_layer_arrays(
                num_layers, p_col, v_col, no, no, MEGATRON, first=f, last=lo
            )
            busiest = np.maximum(np.maximum(first, middle), last)
            if listed_first is None and listed_last is None:
                keep &= busiest <= -(-num_layers // p)  # ⌈L/p⌉
            elif listed_first is None or listed_last is None:  # the fewest per listed value
                group = f if listed_first is not None else lo
                for g in np.unique(group[keep]):
                    mine = keep & (group == g)
                    keep &= ~mine | (busiest == busiest[mine].min())
            kept = np.flatnonzero(keep)
            kept = kept[np.argsort((f[kept] == 0) | (lo[kept] == 0), kind="stable")]
            for i in kept.tolist():
                key = (p, v, int(first[i]), int(middle[i]), int(last[i]))
                if key not in taken:
                    taken.add(key)
                    rows.append((p, 0, 0, v, int(f[i]), int(lo[i])))
    if not rows:
        return np.zeros((0, len(PIPELINE_COLUMNS)), dtype=np.int64)
    return np.asarray(rows, dtype=np.int64)


def tensor_parallel_degrees(base: Scenario, num_gpus: int) -> list[int]:
    """The open tensor-parallel degrees of ``base``'s model on ``num_gpus`` GPUs: the divisors
    of ``gcd(heads, query groups, ffn[, moe ffn])`` that divide ``num_gpus`` and the NVLink
    (scale-up) domain, ``hardware.nvlink_domain_size``: with Megatron-Core's rank order
    (tensor fastest) each tensor-parallel group then sits inside one domain, as production
    recipes place it (Narayanan et al. SC'21, "Takeaway #1": tensor model parallelism up to
    degree ``g`` on ``g``-GPU servers, pipeline parallelism across them). A space that lists
    ``tensor_parallel`` gets the listed degrees, across domains too."""
    m = base.model
    width = math.gcd(m.num_attention_heads, m.num_query_groups, m.ffn_hidden_size)
    if m.is_moe:
        width = math.gcd(width, m.moe_ffn_hidden_size)
    domain = base.hardware.nvlink_domain_size
    return [t for t in divisors(width) if num_gpus % t == 0 and domain % t == 0]


def knob_values(
    base: Scenario, num_gpus: int, batch: int, knobs: Knobs, num_pipelines: int
) -> tuple[IntArray, ...]:
    """The allowed values of each of ``DIGITS`` for one sub-space (``planner.search.space``
    describes the open values), the pipeline digit as indices of ``num_pipelines`` rows."""
    m = base.model
    gpu_divisors = divisors(num_gpus)
    open_tensor = tensor_parallel_degrees(base, num_gpus)
    split = experts_split_by_tensor_parallel(base.training.framework)
    tensor = list(knobs.codes("tensor_parallel") or []) or open_tensor
    open_values: dict[str, list[int]] = {
        "tensor_parallel": open_tensor,
        "pipeline": list(range(num_pipelines)),
        "context_parallel": [c for c in gpu_divisors if c == 1 or m.seq_length % (2 * c) == 0],
        "expert_parallel": divisors(m.num_experts) if m.is_moe else [1],
        # folding: whole experts per rank, or split over as many ranks as some tensor-parallel
        # degree of the space (Megatron-Core's default is the layout's own); wider expert
        # tensor parallel than every tensor-parallel degree is not searched, nor any above 1
        # where the framework keeps the experts whole
        "expert_tensor_parallel": (
            sorted({1, *(t for t in tensor if m.moe_ffn_hidden_size % t == 0 and split)})
            if m.is_moe
            else [0]
        ),
        "micro_batch_size": divisors(batch),
        "recompute": [r.code for r in Recompute],
        "zero_stage": [0, 1, 2, 3],
        "sequence_parallel": [0, 1],
    }
    out: list[IntArray] = []
    for key in DIGITS:
        chosen = None
        if key != "pipeline" and (key != "expert_tensor_parallel" or m.is_moe):
            chosen = knobs.codes(key)
        vals = open_values[key] if chosen is None else list(chosen)
        out.append(np.asarray(vals, dtype=np.int64))
    return tuple(out)
