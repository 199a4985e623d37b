"""One rank's compute in PyTorch's ring attention (torchtitan's context parallel), on one GPU:
the evidence behind the notes on the torchtitan CP rows (Table 2 of
``llama3_h100_202412_torchtitan.md``: Llama 3.1 8B, 32,768 local tokens, CP 1-8).

Run on a machine with a CUDA GPU and PyTorch (not part of CI, not imported by the planner)::

    python -m benchmarks.ring_attention_h100 out.json [cp,...]

PyTorch's ring attention (context parallel of ``torch.distributed.tensor.experimental``,
``_attention.py``: ``_templated_ring_attention`` and its backward; the head-tail load balancer,
``enable_load_balance``; fp32 merging, ``convert_to_f32``) runs, on every rank of a
ring of ``c``, ``c`` steps of the FlashAttention-2 kernel of
``aten._scaled_dot_product_flash_attention``: step 0 causal over the local ``L`` queries and
keys; each later step unmasked, either all ``L`` queries against the first ``L/2`` received keys
(``i <= rank``) or the second ``L/2`` queries against all ``L`` received keys. After each step
the forward merges the step's output and log-sum-exp into fp32 accumulators (``_SDPAMerger``:
``out - sigmoid(lse_i - lse)·(out - out_i)``, ``lse - logsigmoid(lse - lse_i)``, and for a half
step the ``torch.cat`` of ``_partial_update``); the backward adds each step's ``dq``, ``dk``,
``dv`` into fp32 buffers (zeros, ``+=`` or ``_partial_update``'s add and ``cat``) and packs
``dk``/``dv`` with ``torch.cat`` for the next rank. This script runs exactly those kernels and
element-wise ops for one rank, without the communication (the received keys are the local
ones), for torchtitan's Llama shapes (32 query heads of 128; the 8 key/value heads repeated to
32 by ``repeat_kv`` before the kernel; batch 1). Every rank does the same FLOPs under load
balancing; the one timed is the last (``rank`` argument of ``ring_forward``), whose later steps
all take every query against half the keys; the other ranks mix in second-half-query steps,
whose merges add a ``torch.cat`` each.

Reported per ``c`` (CUDA events, after a warm-up of 200 ``8192³`` bf16 products): milliseconds
of the forward and backward with and without the merge/accumulation ops, executed TFLOP/s of
the kernels (every step executes ``2·L²·heads·128`` forward FLOPs; the backward 2.5 times that).
"""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.h100_kernels import cuda_time_ms, warm_up_clocks

LOCAL_TOKENS = 32768
HEADS = 32
HEAD_DIM = 128
RINGS = (1, 2, 4, 8)


def _kernels(torch: Any) -> tuple[Any, Any]:
    """(forward, backward) of the flash kernel: ``forward(q, k, v, causal) -> (out, lse, ctx)``,
    ``backward(dout, out, lse, step) -> (dq, dk, dv)`` with ``step = (q, k, v, causal, ctx)``;
    the CPU variant lets the script be dry-run at small sizes."""
    aten = torch.ops.aten
    if torch.cuda.is_available():

        def forward(q: Any, k: Any, v: Any, causal: bool) -> tuple[Any, Any, Any]:
            out, lse, *ctx = aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False)
            return out, lse, ctx

        def backward(dout: Any, out: Any, lse: Any, step: Any) -> tuple[Any, Any, Any]:
            q, k, v, causal, (cum_q, cum_k, max_q, max_k, seed, offset, _) = step
            grads = aten._scaled_dot_product_flash_attention_backward(
                dout, q, k, v, out, lse, cum_q, cum_k, max_q, max_k, 0.0, causal, seed, offset
            )
            return grads[0], grads[1], grads[2]

        return forward, backward

    def cpu_forward(q: Any, k: Any, v: Any, causal: bool) -> tuple[Any, Any, Any]:
        out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal)
        return out, lse, ()

    def cpu_backward(dout: Any, out: Any, lse: Any, step: Any) -> tuple[Any, Any, Any]:
        q, k, v, causal, _ = step
        grads = aten._scaled_dot_product_flash_attention_for_cpu_backward(
            dout, q, k, v, out, lse, 0.0, causal
        )
        return grads[0], grads[1], grads[2]

    return cpu_forward, cpu_backward


def _partial_update(torch: Any, original: Any, new: Any, idx: int, *, add: bool) -> Any:
    """PyTorch's ``_partial_update`` along the sequence (dim 2), two chunks."""
    chunks = list(original.chunk(2, dim=2))
    if add:
        chunks[idx] += new
    else:
        chunks[idx] = new
    return torch.cat(chunks, dim=2)


def ring_forward(
    torch: Any, fwd: Any, qkv: tuple[Any, Any, Any], c: int, *, merge: bool, rank: int = -1
) -> Any:
    """Rank ``rank``'s forward of a ring of ``c`` (module docstring; ``-1``: the last rank,
    whose later steps all take every query against half the keys): ``(out, lse, steps)``, each
    step ``((q, k, v, causal, ctx), half)`` as the backward needs it, ``half`` True for the
    steps that take the second half of the queries."""
    import torch.nn.functional as F  # noqa: N812, PLC0415 (GPU machines only)

    q, k, v = qkv
    rank = rank % c
    acc_out = acc_lse = None
    steps = []
    for i in range(c):
        half = i > rank
        if i == 0:
            qi, ki, vi = q, k, v
        elif i <= rank:
            qi, ki, vi = q, k.chunk(2, dim=2)[0], v.chunk(2, dim=2)[0]
        else:
            qi, ki, vi = q.chunk(2, dim=2)[1], k, v
        if c > 1 and i < c - 1:  # the next rank's buffer: torch.cat([k.flatten(), v.flatten()])
            torch.cat([k.flatten(), v.flatten()])
        out, lse, ctx = fwd(qi, ki, vi, i == 0)
        steps.append(((qi, ki, vi, i == 0, ctx), half))
        if not merge:
            continue
        out, lse = out.to(torch.float32), lse.to(torch.float32).unsqueeze(-1)
        if acc_out is None:
            acc_out, acc_lse = out, lse
            continue
        old_lse = acc_lse.chunk(2, dim=2)[1] if half else acc_lse
        old_out = acc_out.chunk(2, dim=2)[1] if half else acc_out
        new_out = old_out - F.sigmoid(lse - old_lse) * (old_out - out)
        new_lse = old_lse - F.logsigmoid(old_lse - lse)
        if half:
            acc_lse = _partial_update(torch, acc_lse, new_lse, 1, add=False)
            acc_out = _partial_update(torch, acc_out, new_out, 1, add=False)
        else:
            acc_out, acc_lse = new_out, new_lse
    if merge and acc_out is not None and acc_lse is not None:
        return acc_out.to(q.dtype), acc_lse.squeeze(-1), steps
    return None, None, steps


def ring_backward(
    torch: Any, bwd: Any, upstream: tuple[Any, Any, Any], steps: Any, *, accumulate: bool
) -> None:
    """One rank's backward of a ring of ``len(steps)`` (module docstring); ``upstream`` is
    ``(dout, out, lse)`` of the merged forward."""
    dout, out, lse = upstream
    c = len(steps)
    q, k, v = steps[0][0][:3]
    f32 = torch.float32
    grad_q = torch.zeros_like(q, dtype=f32) if accumulate else None
    grad_k = torch.zeros_like(k, dtype=f32) if accumulate else None
    grad_v = torch.zeros_like(v, dtype=f32) if accumulate else None
    for i, (step, half) in enumerate(steps):
        if c > 1 and i < c - 1:
            torch.cat([k.flatten(), v.flatten()])
        if half:
            out_i, dout_i = out.chunk(2, dim=2)[1], dout.chunk(2, dim=2)[1]
            lse_i = lse.chunk(2, dim=2)[1].contiguous()
        else:
            out_i, dout_i, lse_i = out, dout, lse
        dq, dk, dv = bwd(dout_i, out_i, lse_i, step)
        if grad_q is None or grad_k is None or grad_v is None:
            continue
        if i > 0 and not half:
            grad_k = _partial_update(torch, grad_k, dk, 0, add=True)
            grad_v = _partial_update(torch, grad_v, dv, 0, add=True)
        else:
            grad_k += dk
            grad_v += dv
        if c > 1:  # packed for the next rank (the all-to-all's send buffer)
            torch.cat([grad_k.flatten(), grad_v.flatten()])
        if not half:
            grad_q += dq
        else:
            grad_q = _partial_update(torch, grad_q, dq, 1, add=True)
    if grad_q is not None and grad_k is not None and grad_v is not None:
        grad_q.to(q.dtype)
        grad_k.to(k.dtype)
        grad_v.to(v.dtype)


def main(out_path: str, rings: tuple[int, ...] = RINGS) -> dict[str, Any]:
    """Time one rank's ring forward and backward per ring size; write ``out_path`` (JSON)."""
    import torch  # noqa: PLC0415 (GPU machines only)

    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    tokens, heads = (LOCAL_TOKENS, HEADS) if cuda else (256, 2)
    if cuda:
        warm_up_clocks(torch)
    fwd, bwd = _kernels(torch)
    qkv = tuple(torch.randn(1, heads, tokens, HEAD_DIM, device=dev, dtype=dtype) for _ in "qkv")
    dout = torch.randn_like(qkv[0])
    step_flops = 2.0 * tokens**2 * heads * HEAD_DIM

    def timed(fn: Any) -> float:
        if cuda:
            return cuda_time_ms(torch, fn, reps=3)
        fn()
        return 0.0

    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if cuda else "cpu (dry run)",
        "torch": torch.__version__,
        "local_tokens": tokens,
        "heads": heads,
        "head_dim": HEAD_DIM,
        "rings": {},
    }
    for c in rings:
        row: dict[str, float] = {}
        out, lse, steps = ring_forward(torch, fwd, qkv, c, merge=True)
        for merge in (False, True):
            key = "with_merge" if merge else "kernels_only"
            run_forward = partial(ring_forward, torch, fwd, qkv, c, merge=merge)
            run_backward = partial(
                ring_backward, torch, bwd, (dout, out, lse), steps, accumulate=merge
            )
            row[f"forward_ms_{key}"] = timed(run_forward)
            row[f"backward_ms_{key}"] = timed(run_backward)
        flops = c * step_flops
        if cuda:
            for key in ("kernels_only", "with_merge"):
                row[f"forward_tflops_{key}"] = flops / row[f"forward_ms_{key}"] / 1e9
                row[f"backward_tflops_{key}"] = 2.5 * flops / row[f"backward_ms_{key}"] / 1e9
        results["rings"][str(c)] = row
        print(c, json.dumps(row), flush=True)
    Path(out_path).write_text(json.dumps(results, indent=1) + "\n")
    return results


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args:
        sys.exit("usage: python -m benchmarks.ring_attention_h100 out.json [cp,...]")
    main(args[0], tuple(int(x) for x in args[1].split(",")) if len(args) > 1 else RINGS)
