"""Host time of one MoE decoder layer whose experts read their token counts on the host: the
Blackwell MoE rows of ``megatron_bridge_2025.csv`` as one rank of their expert-parallel group
runs them, on one Hopper GPU (the H200 lent here).

Run on a machine with a CUDA GPU and PyTorch (not part of CI, not imported by the planner)::

    python -m benchmarks.moe_layer_h200 out.json [--budget-s 380]
    python -m benchmarks.moe_layer_h200 --check     # shapes only, on the CPU, tiny sizes

Why: Megatron-Core's ``--moe-grouped-gemm`` experts with Transformer Engine (``TEGroupedMLP``
over ``GroupedLinear``) take the per-expert token counts as a host list (``m_splits``; the
dispatcher copies ``tokens_per_expert`` to the host and waits for it, one device-to-host sync
per MoE layer forward), then launch one cuBLAS GEMM per local expert round-robin on four streams
(``nvte_multi_stream_cublas_gemm``). After the sync the host cannot run ahead of the GPU: every
launch of the experts, the rest of the forward and the backward is issued while the GPU waits
for it wherever the host is slower than the work it issues.

The layer is ``benchmarks.moe_layer_h100.layer_pass`` (RMSNorm, QKV, QK norm, RoPE, cuDNN causal
attention, output projection, router with top-k and an auxiliary-loss term, dispatch and combine
as gathers, SwiGLU experts, forward and backward through autograd; no communication) at each
row's shape, micro-batch, tensor parallel 1 and local experts ``E = experts / EP`` under even
routing. Experts, per variant (``VARIANTS``):

* ``streams``: a ``GroupedLinear``-like autograd function, one weight per expert, one GEMM per
  expert for fc1, fc2 and each data and weight gradient, round-robin over four streams;
* ``streams_sync``: the same after a device-to-host read of the token counts (the list the
  GEMMs are split by, as ``m_splits``);
* ``streams_sync_cast``: the same plus one FP8 cast kernel of each expert's GEMM input (the
  per-expert quantisation of Transformer Engine's FP8 path; the GEMMs stay bf16);
* ``grouped_mm`` / ``grouped_mm_sync``: two ``torch._grouped_mm`` calls (one CUTLASS grouped
  kernel per GEMM), without and with the host read.

Reported per pass (milliseconds): ``gpu_ms_host_ahead``: the GPU's time when the host is ahead
(the passes issued while the stream waits behind a ``torch.cuda._sleep``; ``host_ahead`` says
the host finished issuing before the GPU started, so no launch gap is in it; no-sync variants
only); ``gpu_busy_ms``: the union of the profiler's kernel intervals over 5 passes;
``wall_ms_back_to_back``: host wall clock over 20 passes issued back to back with no
synchronisation between (what a training step sees); ``host_issue_ms``: from a synchronised
start to the return of ``backward`` (with a sync, the wait for the GPU's forward is in it);
``host_after_sync_ms``: from the return of the host read to the return of ``backward``;
``exposed_ms = wall_ms_back_to_back - gpu_busy_ms``: the GPU idle time a step pays. The same
figures prefixed ``forward_`` time forward-only passes: in a model the forward issues one layer
after another with one host read each, while the backward has none, so the host can fall behind
only in the forward, by ``max(0, forward host issue - forward GPU time)`` per MoE layer.

What it is not: Transformer Engine and Megatron are absent (no wheel for the machine's CUDA 13
PyTorch); the host is the lent machine's x86 CPU, not a B200 node's x86 or a GB200's Grace;
DeepSeek-V3's MLA attention is stood in for by 128 heads of 128 (``DSV3_MHA``). The expert and
routing work (the host-bound part) is the rows' own shape.

Recorded 2026-12-04 on two lent H200 machines (16-vCPU Xeon VM, PyTorch 2.11 + CUDA 13; one
command each, ~100 s; ``benchmarks/results/moe_layer_h200.json``). Qwen3-30B-A3B, 16 local
experts, per layer forward (forward-only passes back to back, second machine): micro-batch 1,
GPU 2.1-2.3 ms, wall 2.3 ms with ``grouped_mm`` (with or without the host read), 4.2 ms with
per-expert GEMMs, 5.7 ms with them after the read (3.7 ms with the FP8 casts: the host's
spread between variants is ~2 ms); micro-batch 4, GPU 8.1-8.5 ms, at most 0.3 ms exposed in
any variant. Forward and backward per pass: micro-batch 1 ``streams_sync`` exposes 4.0 ms (9.3
ms on the first machine) of 6.2 ms GPU work, ``grouped_mm`` 0.3 ms. Every other row's shape
(Qwen3-235B, GPT-OSS-120B, DeepSeek-V3 at their EP and micro-batch) exposes at most 0.9 ms per
forward: its GPU work (5-16 ms per forward on the H200) exceeds the host's issue time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.h100_kernels import warm_up_clocks
from benchmarks.moe_layer_h100 import (
    QWEN3_235B,
    STREAMS,
    ExpertsFn,
    LayerShape,
    _kernel_kinds,
    _launch,
    host_issue_ms,
    layer_pass,
)

QWEN3_30B = LayerShape(
    hidden=2048, heads=32, kv_heads=4, head_dim=128, expert_ffn=768, num_experts=128
)
GPT_OSS_120B = LayerShape(
    hidden=2880, heads=64, kv_heads=8, head_dim=64, expert_ffn=2880, num_experts=128
)
DSV3_MHA = LayerShape(
    hidden=7168, heads=128, kv_heads=128, head_dim=128, expert_ffn=2048, num_experts=256
)
"""DeepSeek-V3's routed experts (hidden 7168, expert FFN 2048, 256 experts, top-8) behind
multi-head attention of 128 heads of 128 in place of MLA."""

ALL_VARIANTS = ("streams", "streams_sync", "streams_sync_cast", "grouped_mm", "grouped_mm_sync")
SOME_VARIANTS = ("streams", "streams_sync", "grouped_mm")
CASES: tuple[tuple[str, LayerShape, int, int, int, int, tuple[str, ...]], ...] = (
    # (label: the rows it stands for, shape, sequence, local experts, top-k, micro-batch,
    #  variants); tensor parallel 1 in every Blackwell MoE row
    ("qwen3_30b_ep8_mbs1 (B200)", QWEN3_30B, 4096, 16, 8, 1, ALL_VARIANTS),
    ("qwen3_30b_ep8_mbs4 (GB200, GB300)", QWEN3_30B, 4096, 16, 8, 4, ALL_VARIANTS),
    ("qwen3_235b_ep8_mbs1 (B200)", QWEN3_235B, 4096, 16, 8, 1, SOME_VARIANTS),
    ("qwen3_235b_ep32_mbs1 (GB200)", QWEN3_235B, 4096, 4, 8, 1, SOME_VARIANTS),
    ("qwen3_235b_ep16_mbs2 (GB300)", QWEN3_235B, 4096, 8, 8, 2, SOME_VARIANTS),
    ("gptoss_120b_ep8_mbs4_4k (B200)", GPT_OSS_120B, 4096, 16, 4, 4, SOME_VARIANTS),
    ("gptoss_120b_ep64_mbs1_8k (GB200)", GPT_OSS_120B, 8192, 2, 4, 1, SOME_VARIANTS),
    ("gptoss_120b_ep64_mbs2_8k (GB300)", GPT_OSS_120B, 8192, 2, 4, 2, SOME_VARIANTS),
    ("dsv3_ep8_mbs1 (B200)", DSV3_MHA, 4096, 32, 8, 1, SOME_VARIANTS),
    ("dsv3_ep32_mbs1 (GB300, GB200 FP8)", DSV3_MHA, 4096, 8, 8, 1, SOME_VARIANTS),
    ("dsv3_ep64_mbs1 (GB200)", DSV3_MHA, 4096, 4, 8, 1, SOME_VARIANTS),
)


_STREAMS: list[Any] = []
"""The round-robin streams, made once by ``main`` (a CUDA machine only)."""


class _Clock:
    """The host time at which the latest pass's token-count read returned."""

    def __init__(self) -> None:
        self.after_sync_s = 0.0


@contextlib.contextmanager
def _round_robin(torch: Any, device: str) -> Iterator[Callable[[int], Any]]:
    """Yields ``on(e)``, the stream context of expert ``e`` (round-robin over ``STREAMS``
    streams, each waiting for the current stream first; the current stream waits for all of
    them on exit); on a CPU every context is a no-op."""
    if device != "cuda":
        yield lambda e: contextlib.nullcontext()
        return
    main = torch.cuda.current_stream()
    streams = _STREAMS
    for s in streams:
        s.wait_stream(main)
    yield lambda e: torch.cuda.stream(streams[e % STREAMS])
    for s in streams:
        main.wait_stream(s)


def _grouped_linear(torch: Any, device: str, *, cast: bool) -> Any:
    """An autograd function ``apply(x, m_splits, *weights)``: ``x`` ``(sum(m_splits), k)``
    split by the host list ``m_splits``, each piece times its own ``(k, n)`` weight, one GEMM
    per expert and per gradient on the round-robin streams, outputs written in place of one
    buffer allocated on the current stream (as Transformer Engine's ``GroupedLinear``);
    ``cast``: one FP8 cast of each GEMM input first."""

    def prepared(t: Any) -> Any:
        if cast:
            t.to(torch.float8_e4m3fn)  # the launch and traffic of a per-expert quantisation
        return t

    class GroupedLinear(torch.autograd.Function):  # type: ignore[misc]
        @staticmethod
        def forward(ctx: Any, x: Any, m_splits: list[int], *weights: Any) -> Any:
            ctx.m_splits = m_splits
            ctx.save_for_backward(x, *weights)
            out = x.new_empty(x.shape[0], weights[0].shape[1])
            xs, outs = x.split(m_splits), out.split(m_splits)
            with _round_robin(torch, device) as on:
                for e, w in enumerate(weights):
                    with on(e):
                        torch.mm(prepared(xs[e]), w, out=outs[e])
            return out

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            x, *weights = ctx.saved_tensors
            grad = grad.contiguous()
            dx = torch.empty_like(x)
            dws = [torch.empty_like(w) for w in weights]
            xs, gs, dxs = x.split(ctx.m_splits), grad.split(ctx.m_splits), dx.split(ctx.m_splits)
            with _round_robin(torch, device) as on:
                for e, w in enumerate(weights):
                    with on(e):
                        g = prepared(gs[e])
                        torch.mm(g, w.t(), out=dxs[e])
                        torch.mm(xs[e].t(), g, out=dws[e])
            return (dx, None, *dws)

    return GroupedLinear


def _experts(
    torch: Any,
    shape: LayerShape,
    experts: int,
    per_expert: int,
    variant: str,
    *,
    clock: _Clock,
    device: str,
) -> ExpertsFn:
    """The local experts of ``variant`` (module docstring) as ``layer_pass`` takes them."""
    import torch.nn.functional as F  # noqa: N812, PLC0415

    bf16, h, f = torch.bfloat16, shape.hidden, shape.expert_ffn
    counts = torch.full((experts,), per_expert, device=device, dtype=torch.int64)
    sync = variant.endswith("_sync") or variant.endswith("_sync_cast")

    def m_splits() -> list[int]:
        if not sync:
            return [per_expert] * experts
        splits: list[int] = counts.tolist()  # device-to-host copy: waits for the stream
        clock.after_sync_s = time.perf_counter()
        return splits

    def weight(rows: int, cols: int) -> Any:
        w = torch.randn(rows, cols, device=device, dtype=bf16) * 0.02
        return w.requires_grad_(True)

    if variant.startswith("grouped_mm"):
        w1 = (torch.randn(experts, h, 2 * f, device=device, dtype=bf16) * 0.02).requires_grad_()
        w2 = (torch.randn(experts, f, h, device=device, dtype=bf16) * 0.02).requires_grad_()
        offs = torch.arange(1, experts + 1, device=device, dtype=torch.int32) * per_expert

        def grouped(tokens: Any) -> Any:
            m_splits()
            gate, up = torch._grouped_mm(tokens, w1, offs=offs).chunk(2, dim=-1)
            return torch._grouped_mm(F.silu(gate) * up, w2, offs=offs)

        return grouped
    linear = _grouped_linear(torch, device, cast=variant.endswith("_cast"))
    fc1 = [weight(h, 2 * f) for _ in range(experts)]
    fc2 = [weight(f, h) for _ in range(experts)]

    def per_expert_gemms(tokens: Any) -> Any:
        splits = m_splits()
        gate, up = linear.apply(tokens, splits, *fc1).chunk(2, dim=-1)
        return linear.apply(F.silu(gate) * up, splits, *fc2)

    return per_expert_gemms


def _gpu_ms_host_ahead(
    torch: Any, one_pass: Callable[[], None], reps: int = 3
) -> tuple[float, bool]:
    """Milliseconds per pass of ``reps`` passes issued while the stream sleeps (so the GPU runs
    them back to back), and whether the host finished issuing before the GPU woke."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    one_pass()
    issue_s = time.perf_counter() - t0
    torch.cuda.synchronize()
    # spin long enough for the host to issue all passes (clock about 2 GHz; 2.5e9 cycles a
    # second of margin); a too-short sleep shows as host_ahead false
    torch.cuda._sleep(int(2.5e9 * (reps * issue_s * 1.5 + 0.02)))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        one_pass()
    end.record()
    ahead = not start.query()
    end.synchronize()
    return float(start.elapsed_time(end)) / reps, ahead


def _busy_ms(torch: Any, one_pass: Callable[[], None], reps: int = 5) -> tuple[float, float]:
    """The union of the profiler's GPU activity intervals per pass over ``reps`` passes, and
    the span from the first start to the last end per pass (milliseconds); NaN where the
    profiler cannot read the GPU."""
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415

    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                one_pass()
            torch.cuda.synchronize()
        spans = sorted(
            (ev.time_range.start, ev.time_range.end)
            for ev in prof.events()
            if ev.device_type.name == "CUDA"
        )
    except Exception as err:
        print("profiler:", err, flush=True)
        return float("nan"), float("nan")
    busy, end = 0.0, float("-inf")
    for a, b in spans:
        if b > end:
            busy += b - max(a, end)
            end = b
    if not spans:
        return float("nan"), float("nan")
    return busy / 1e3 / reps, (end - spans[0][0]) / 1e3 / reps


def _timed(
    torch: Any, one_pass: Callable[[], None], clock: _Clock, *, sync: bool
) -> dict[str, Any]:
    """The module docstring's figures of ``one_pass`` (milliseconds)."""
    row: dict[str, Any] = {}
    for _ in range(3):
        one_pass()
    torch.cuda.synchronize()
    if not sync:
        row["gpu_ms_host_ahead"], row["host_ahead"] = _gpu_ms_host_ahead(torch, one_pass)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        one_pass()
    torch.cuda.synchronize()
    row["wall_ms_back_to_back"] = (time.perf_counter() - t0) * 1e3 / 20
    row["host_issue_ms"] = host_issue_ms(torch, one_pass)
    if sync:
        after = []
        for _ in range(10):
            torch.cuda.synchronize()
            one_pass()
            after.append((time.perf_counter() - clock.after_sync_s) * 1e3)
            torch.cuda.synchronize()
        row["host_after_sync_ms"] = sorted(after)[len(after) // 2]
    row["gpu_busy_ms"], row["gpu_span_ms"] = _busy_ms(torch, one_pass)
    row["exposed_ms"] = row["wall_ms_back_to_back"] - row["gpu_busy_ms"]
    return row


def _variant(
    torch: Any,
    case: tuple[str, LayerShape, int, int, int, int, tuple[str, ...]],
    variant: str,
    device: str = "cuda",
) -> dict[str, Any]:
    """One variant of one case, measured (module docstring); milliseconds per pass, the
    ``forward_`` figures of forward-only passes (a model's forward issues one layer after
    another with a host read in each; its backward has none)."""
    _, shape, seq, experts, topk, micro_batch, _ = case
    per_expert = micro_batch * seq * topk // experts
    clock = _Clock()
    experts_fn = _experts(torch, shape, experts, per_expert, variant, clock=clock, device=device)
    passes = [
        layer_pass(
            torch,
            shape,
            seq,
            1,
            topk=topk,
            experts_fn=experts_fn,
            micro_batch=micro_batch,
            device=device,
            backward=backward,
        )
        for backward in (True, False)
    ]
    row: dict[str, Any] = {
        "micro_batch": micro_batch,
        "seq": seq,
        "local_experts": experts,
        "topk": topk,
        "tokens_per_expert": per_expert,
    }
    if device != "cuda":  # the CPU shape check: one pass each
        for one_pass in passes:
            one_pass()
        return row
    sync = "sync" in variant
    row.update(_timed(torch, passes[0], clock, sync=sync))
    kinds, kernels, _ = _kernel_kinds(torch, passes[0])
    row["kernel_ms"], row["kernels_per_pass"] = kinds, kernels
    row.update({f"forward_{k}": v for k, v in _timed(torch, passes[1], clock, sync=sync).items()})
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}


def _facts(torch: Any) -> dict[str, Any]:
    """The machine: GPU, driver, CPU, PyTorch and CUDA versions."""
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = [ln for ln in cpuinfo if ln.startswith("model name")]
    props = torch.cuda.get_device_properties(0)
    return {
        "device": torch.cuda.get_device_name(),
        "multiprocessors": props.multi_processor_count,
        "memory_bytes": props.total_memory,
        "driver": torch.cuda.driver_version() if hasattr(torch.cuda, "driver_version") else None,
        "cpu": cpu[0].split(":", 1)[1].strip() if cpu else platform.processor(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "streams": STREAMS,
    }


def main(out_path: str, budget_s: float) -> dict[str, Any]:
    """Measure every case and variant within ``budget_s`` seconds (the rest is skipped and
    listed), writing ``out_path`` (JSON) after each."""
    import torch  # noqa: PLC0415 (GPU machines only)

    return _measure(torch, out_path, budget_s)


def _measure(torch: Any, out_path: str, budget_s: float) -> dict[str, Any]:
    """``main`` with the module."""
    began = time.perf_counter()
    _STREAMS[:] = [torch.cuda.Stream() for _ in range(STREAMS)]
    results: dict[str, Any] = {"machine": _facts(torch), "skipped": []}
    warm_up_clocks(torch)
    results["launch"] = _launch(torch)
    print("launch", results["launch"], flush=True)
    for case in CASES:
        label, variants = case[0], case[-1]
        results[label] = {}
        for variant in variants:
            if time.perf_counter() - began > budget_s:
                results["skipped"].append(f"{label}/{variant}")
                continue
            try:
                results[label][variant] = _variant(torch, case, variant)
            except Exception as err:  # an out-of-memory or a build without _grouped_mm
                results[label][variant] = {"error": str(err).splitlines()[0][:200]}
            print(label, variant, json.dumps(results[label][variant]), flush=True)
            torch.cuda.empty_cache()
            results["elapsed_s"] = round(time.perf_counter() - began, 1)
            Path(out_path).write_text(json.dumps(results, indent=1))
    return results


def check() -> None:
    """Every case's every variant at a tiny size on the CPU: one pass each (shapes only)."""
    import torch  # noqa: PLC0415

    for case in CASES:
        label, shape, _, experts, topk, micro_batch, variants = case
        tiny = LayerShape(
            hidden=64,
            heads=4,
            kv_heads=max(1, shape.kv_heads * 4 // shape.heads),
            head_dim=16,
            expert_ffn=32,
            num_experts=shape.num_experts,
        )
        for variant in variants:
            small = (label, tiny, 64, experts, topk, micro_batch, variants)
            print(label, variant, _variant(torch, small, variant, device="cpu"), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="moe_layer_h200.json")
    parser.add_argument("--budget-s", type=float, default=380.0)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.check:
        check()
    else:
        main(args.out, args.budget_s)
