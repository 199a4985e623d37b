"""The values each digit of a design space takes: the open values of every knob for one GPU
count and global batch, and the pipeline digit's (pipeline, ``account_for`` options, virtual
pipeline) combinations. ``planner.search.space`` describes the rules; ``SubSpace`` decodes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from planner.specs.parallelism import Recompute
from planner.specs.pipeline_split import stage_layer_arrays
from planner.specs.scenario import Scenario

if TYPE_CHECKING:
    from planner.search.space import Knobs

__all__ = ["DIGITS", "divisors", "knob_values", "pipeline_combinations"]

IntArray = NDArray[np.int64]

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


def pipeline_combinations(base: Scenario, num_gpus: int, knobs: Knobs) -> IntArray:
    """The pipeline digit's combinations ``(p, embedding, loss, v)``, shape ``(k, 4)``.

    Open knobs take only combinations the framework splits the layers for
    (``planner.specs.pipeline_split``): degrees dividing ``num_gpus`` (at most the layers plus
    the two slots), the ``account_for`` options where they split the layers and never on one
    stage when the plain split is allowed (they change nothing there), and the virtual degrees
    dividing each rank's share. Listed pipeline or virtual degrees are crossed in full with the
    plain split (listed pipeline degrees with every divisor of the layers too, as the search
    always did; a listed value the layers do not split into is enumerated and counted as
    such); the options join them where they split."""
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
    rows: list[tuple[int, int, int, int]] = []
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
                rows.extend((p, int(e), int(lo), v) for v in vs)
    if not rows:
        return np.zeros((0, 4), dtype=np.int64)
    table = np.asarray(rows, dtype=np.int64)
    *_, ok = stage_layer_arrays(
        layers, table[:, 0], table[:, 3], table[:, 1] > 0, table[:, 2] > 0, framework
    )
    plain = (table[:, 1] == 0) & (table[:, 2] == 0)
    listed_plain = plain & (chosen_p is not None or chosen_v is not None)
    keep = ok | listed_plain | ((table[:, 0] == 1) & plain)
    out: IntArray = table[keep]
    return out


def knob_values(
    base: Scenario, num_gpus: int, batch: int, knobs: Knobs, num_pipelines: int
) -> tuple[IntArray, ...]:
    """The allowed values of each of ``DIGITS`` for one sub-space (``planner.search.space``
    describes the open values), the pipeline digit as indices of ``num_pipelines`` rows."""
    m = base.model
    width = math.gcd(m.num_attention_heads, m.num_query_groups, m.ffn_hidden_size)
    if m.is_moe:
        width = math.gcd(width, m.moe_ffn_hidden_size)
    gpu_divisors = divisors(num_gpus)
    tensor = list(knobs.codes("tensor_parallel") or [])
    tensor = tensor or [t for t in divisors(width) if num_gpus % t == 0]
    open_values: dict[str, list[int]] = {
        "tensor_parallel": [t for t in divisors(width) if num_gpus % t == 0],
        "pipeline": list(range(num_pipelines)),
        "context_parallel": [c for c in gpu_divisors if c == 1 or m.seq_length % (2 * c) == 0],
        "expert_parallel": divisors(m.num_experts) if m.is_moe else [1],
        # folding: whole experts per rank, or split over as many ranks as some tensor-parallel
        # degree of the space (Megatron-Core's default is the layout's own); wider expert
        # tensor parallel than every tensor-parallel degree is not searched
        "expert_tensor_parallel": (
            sorted({1, *(t for t in tensor if m.moe_ffn_hidden_size % t == 0)}) if m.is_moe else [0]
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
