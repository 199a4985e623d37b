"""MoE operators and one MoE transformer layer on one Hopper GPU: the evidence behind the
notes on the ModelZoo Qwen3-235B rows.

Run on a machine with a CUDA GPU and PyTorch (not part of CI, not imported by the planner)::

    python -m benchmarks.moe_layer_h100 out.json [launch,wgrad,layer,grouped]

It measures, with CUDA events after a warm-up of 200 ``8192³`` bf16 products (clocks settled):

* ``grouped``: the local experts' GEMMs of the published MoE rows (``moe_h100_2025.csv``), per
  expert ``m`` tokens, ``E`` local experts: forward fc1 ``(m, n_up·f, h)``, fc2 ``(m, h, f)``,
  their data gradients and weight gradients, run three ways: one cuBLAS GEMM per expert on one
  stream (Megatron ``SequentialMLP``, grouped_gemm's cuBLAS mode), round-robin over four streams
  (Transformer Engine's ``GroupedLinear`` on Hopper: ``nvte_multi_stream_cublas_gemm``, four
  compute streams by default), and PyTorch's CUTLASS grouped GEMM (``torch._grouped_mm``) where
  the build has it; TFLOP/s per way, plus one dense GEMM of all ``E·m`` rows for reference.
* ``layer``: one Qwen3-235B-A22B decoder layer as a rank of the ModelZoo TP4 / EP8 rows runs it,
  without the communication (the tensor-parallel all-gather and reduce-scatter become a copy and
  a sum; the expert dispatch a gather): RMSNorm, QKV (``h → (q + 2·kv)/t``), QK RMSNorm, RoPE,
  cuDNN causal attention (16 heads of 128, the one kv head repeated), output projection, RMSNorm,
  router (fp32 softmax, top-8, renormalised, an auxiliary-loss term), the ``S/t·k`` routed
  copies gathered in expert order, 16 local experts (SwiGLU, ``f = 1536``), the weighted
  combine, residuals; dispatch and combine are gathers both ways (``_gathers``, as TE's fused
  permute), forward and backward through autograd. Variants (``VARIANTS``): the experts as
  per-expert GEMMs over four streams or as ``torch._grouped_mm``, eager or ``torch.compile``d.
  Reported per pass: GPU time (events around 20 passes), the host time to issue one pass (wall
  clock from a synchronised start to the return of ``backward``), and the profiler's
  kernel time per kind (GEMM, attention, other).
* ``wgrad``: one expert weight gradient ``x.t() @ g`` from ``m`` tokens (128-8192) written in
  16 bits, and added into an fp32 buffer by the GEMM (``torch.addmm(..., out_dtype=float32,
  out=buffer)``: cuBLAS with ``beta = 1``, as Megatron-Core's gradient-accumulation fusion
  runs it into ``main_grad``).
* ``launch``: host microseconds per launched kernel on this machine's CPU (a ``16``-element
  ``add_`` issued 20,000 times, the GPU idle between).

Numbers recorded on lent H100 80GB HBM3 machines (PyTorch 2.11 + CUDA 13, 16-vCPU Xeon VM) are
in ``benchmarks/results/moe_layer_h100.json``: ``launch``, ``layer`` and ``grouped`` from one
run, ``wgrad`` from a later one on another machine of the same kind (its launch cost beside it:
the host's per-launch time varied 6.3-9.9 µs between machines); discussed in
``benchmarks/RESULTS.md`` (MoE notes).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.h100_kernels import cuda_time_ms, warm_up_clocks

GROUPED = (
    # (label, local experts E, tokens per expert m, hidden h, expert ffn f, gated)
    ("qwen3_235b_tp4_ep8_4k", 16, 512, 4096, 1536, True),
    ("qwen3_235b_tp2_ep8_4k", 16, 1024, 4096, 1536, True),
    ("qwen3_235b_tp4_ep8_16k", 16, 2048, 4096, 1536, True),
    ("qwen3_235b_ep32_4k", 4, 1024, 4096, 1536, True),
    ("qwen3_30b_a3b_ep8", 16, 8192, 2048, 768, True),
    ("mixtral_8x7b_etp8", 8, 3072, 4096, 1792, True),
    ("dsv3_ep64", 4, 8192, 7168, 2048, True),
    ("gptoss_120b_ep64", 2, 16384, 2880, 2880, True),
    ("sweep_m128", 16, 128, 4096, 1536, True),
    ("sweep_m256", 16, 256, 4096, 1536, True),
    ("sweep_m4096", 16, 4096, 4096, 1536, True),
)
"""Expert GEMM shapes of the rows (from the planner's operator table, even routing)."""

LAYERS = (
    # (label, sequence S, tensor parallel t, local experts (of 128 over 8 EP ranks), top-k)
    ("qwen3_235b_tp4_ep8_4k", 4096, 4, 16, 8),
    ("qwen3_235b_tp2_ep8_4k", 4096, 2, 16, 8),
    ("qwen3_235b_tp4_ep8_16k", 16384, 4, 16, 8),
)
VARIANTS = {
    "qwen3_235b_tp4_ep8_4k": ((False, False), (True, False), (True, True)),
    "qwen3_235b_tp2_ep8_4k": ((True, False),),
    "qwen3_235b_tp4_ep8_16k": ((True, False), (True, True)),
}
"""(grouped_mm, compiled) runs per layer: per-expert GEMMs over streams (host-bound at these
sizes, and slicing one ``(E, h, f)`` weight makes autograd fill and add a full-size gradient per
expert), the grouped GEMM, and the grouped GEMM compiled."""
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, EXPERT_FFN, NUM_EXPERTS = 4096, 64, 4, 128, 1536, 128
STREAMS = 4
PARTS = ("launch", "wgrad", "layer", "grouped")
WGRAD_WEIGHTS = ((4096, 3072), (1536, 4096))
"""(rows, cols) of the weight gradients timed by ``wgrad``: Qwen3-235B-A22B's expert fc1
(hidden x 2·ffn) and fc2 (ffn x hidden)."""
WGRAD_TOKENS = (128, 256, 512, 1024, 2048, 4096, 8192)
DEVICE = "cuda"


def _missing(*args: Any, **kwargs: Any) -> Any:
    """Stands in for ``torch._grouped_mm`` in builds without it."""
    raise RuntimeError("torch._grouped_mm is not in this PyTorch build")


Product = tuple[str, Callable[[int], Any], float, Callable[[], Any]]


def _products(torch: Any, m: int, tensors: tuple[Any, ...], offs: Any) -> list[Product]:
    """The six expert GEMMs: (name, one expert's product, FLOPs per expert token, the
    ``torch._grouped_mm`` call of all experts)."""
    x, mid, g_up, g_out, w1, w2 = tensors
    h, n_up, f = x.shape[1], w1.shape[2], w2.shape[1]

    def rows(t: Any, e: int) -> Any:
        return t[e * m : (e + 1) * m]

    gmm: Callable[..., Any] = getattr(torch, "_grouped_mm", _missing)
    return [
        ("fc1_fwd", lambda e: rows(x, e) @ w1[e], 2.0 * n_up * h, lambda: gmm(x, w1, offs=offs)),
        ("fc2_fwd", lambda e: rows(mid, e) @ w2[e], 2.0 * h * f, lambda: gmm(mid, w2, offs=offs)),
        (
            "fc1_dgrad",
            lambda e: rows(g_up, e) @ w1[e].t(),
            2.0 * n_up * h,
            lambda: gmm(g_up, w1.transpose(1, 2), offs=offs),
        ),
        (
            "fc2_dgrad",
            lambda e: rows(g_out, e) @ w2[e].t(),
            2.0 * h * f,
            lambda: gmm(g_out, w2.transpose(1, 2), offs=offs),
        ),
        (
            "fc1_wgrad",
            lambda e: rows(x, e).t() @ rows(g_up, e),
            2.0 * n_up * h,
            lambda: gmm(x.t(), g_up, offs=offs),
        ),
        (
            "fc2_wgrad",
            lambda e: rows(mid, e).t() @ rows(g_out, e),
            2.0 * h * f,
            lambda: gmm(mid.t(), g_out, offs=offs),
        ),
    ]


def _grouped(torch: Any) -> dict[str, Any]:
    """The ``grouped`` sweep (module docstring)."""
    dev, bf16 = DEVICE, torch.bfloat16
    streams = [torch.cuda.Stream() for _ in range(STREAMS)]
    out: dict[str, Any] = {}
    for label, experts, m, h, f, gated in GROUPED:
        n_up = (2 if gated else 1) * f
        x = torch.randn(experts * m, h, device=dev, dtype=bf16)
        mid = torch.randn(experts * m, f, device=dev, dtype=bf16)
        g_up = torch.randn(experts * m, n_up, device=dev, dtype=bf16)
        g_out = torch.randn(experts * m, h, device=dev, dtype=bf16)
        w1 = torch.randn(experts, h, n_up, device=dev, dtype=bf16) * 0.02
        w2 = torch.randn(experts, f, h, device=dev, dtype=bf16) * 0.02
        offs = torch.arange(1, experts + 1, device=dev, dtype=torch.int32) * m
        products = _products(torch, m, (x, mid, g_up, g_out, w1, w2), offs)
        row: dict[str, Any] = {"experts": experts, "m": m, "hidden": h, "ffn": f}
        for name, one, flops_each, grouped in products:
            flops = flops_each * experts * m

            def serial(one: Callable[[int], Any] = one, experts: int = experts) -> None:
                for e in range(experts):
                    one(e)

            def multi(one: Callable[[int], Any] = one, experts: int = experts) -> None:
                main = torch.cuda.current_stream()
                for s in streams:
                    s.wait_stream(main)
                for e in range(experts):
                    with torch.cuda.stream(streams[e % STREAMS]):
                        one(e)
                for s in streams:
                    main.wait_stream(s)

            entry: dict[str, float | str] = {
                "serial_tflops": flops / cuda_time_ms(torch, serial, 20) / 1e9,
                "multistream_tflops": flops / cuda_time_ms(torch, multi, 20) / 1e9,
            }
            try:  # a build without torch._grouped_mm, or a shape it refuses: recorded
                entry["grouped_mm_tflops"] = flops / cuda_time_ms(torch, grouped, 20) / 1e9
            except Exception as err:
                entry["grouped_mm_error"] = str(err).splitlines()[0][:200]
            out_dim, in_dim = (n_up, h) if name.startswith("fc1") else (h, f)
            a = torch.randn(experts * m, in_dim, device=dev, dtype=bf16)
            b = torch.randn(in_dim, out_dim, device=dev, dtype=bf16)
            dense_flops = 2.0 * experts * m * in_dim * out_dim

            def dense(a: Any = a, b: Any = b) -> Any:
                return a @ b

            dense_ms = cuda_time_ms(torch, dense, 20)
            entry["dense_same_rows_tflops"] = dense_flops / dense_ms / 1e9
            row[name] = {k: round(v, 1) if isinstance(v, float) else v for k, v in entry.items()}
        out[label] = row
        print(label, json.dumps(row), flush=True)
    return out


def _gathers(torch: Any) -> tuple[Any, Any]:
    """Dispatch and permutation as gathers both ways (what Transformer Engine's fused
    ``moe_permute``/``moe_unpermute`` do with their row map), not PyTorch's ``index_select``,
    whose backward is an atomic ``index_add`` that 16-bit rows contend on."""

    class Dispatch(torch.autograd.Function):  # type: ignore[misc]
        """``x[perm // k]`` forward; backward sums each token's ``k`` copies."""

        @staticmethod
        def forward(ctx: Any, x: Any, perm: Any, inverse: Any, k: int) -> Any:
            ctx.save_for_backward(inverse)
            ctx.k = k
            return x[perm // k]

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            (inverse,) = ctx.saved_tensors
            return grad[inverse].view(-1, ctx.k, grad.shape[-1]).sum(1), None, None, None

    class Permute(torch.autograd.Function):  # type: ignore[misc]
        """``y[index]`` for a permutation ``index``; backward gathers with its inverse."""

        @staticmethod
        def forward(ctx: Any, y: Any, index: Any, inverse: Any) -> Any:
            ctx.save_for_backward(inverse)
            return y[index]

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            (inverse,) = ctx.saved_tensors
            return grad[inverse], None, None

    return Dispatch, Permute


@dataclass(frozen=True)
class LayerShape:
    """A decoder layer's dimensions: hidden size, attention heads, key-value heads, head dim,
    expert FFN width, routed experts."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    expert_ffn: int
    num_experts: int


QWEN3_235B = LayerShape(
    hidden=HIDDEN,
    heads=HEADS,
    kv_heads=KV_HEADS,
    head_dim=HEAD_DIM,
    expert_ffn=EXPERT_FFN,
    num_experts=NUM_EXPERTS,
)

ExpertsFn = Callable[[Any], Any]
"""The local experts on the dispatched tokens ``(E·m, h)`` in expert order -> ``(E·m, h)``."""


def _stacked_experts(
    torch: Any, shape: LayerShape, experts: int, per_expert: int, *, grouped_mm: bool
) -> ExpertsFn:
    """The experts as two ``torch._grouped_mm`` calls over one ``(E, h, 2f)`` and one
    ``(E, f, h)`` weight, or (``grouped_mm`` false) per-expert GEMMs on slices of them over
    four streams."""
    import torch.nn.functional as F  # noqa: N812, PLC0415

    dev, bf16, h, f = DEVICE, torch.bfloat16, shape.hidden, shape.expert_ffn
    w1 = (torch.randn(experts, h, 2 * f, device=dev, dtype=bf16) * 0.02).requires_grad_(True)
    w2 = (torch.randn(experts, f, h, device=dev, dtype=bf16) * 0.02).requires_grad_(True)
    offs = torch.arange(1, experts + 1, device=dev, dtype=torch.int32) * per_expert
    streams = [torch.cuda.Stream() for _ in range(STREAMS)]

    def run(tokens: Any) -> Any:
        if grouped_mm:
            gate, up = torch._grouped_mm(tokens, w1, offs=offs).chunk(2, dim=-1)
            return torch._grouped_mm(F.silu(gate) * up, w2, offs=offs)
        outs: list[Any] = [None] * experts
        main = torch.cuda.current_stream()
        for s in streams:
            s.wait_stream(main)
        for e in range(experts):
            with torch.cuda.stream(streams[e % STREAMS]):
                chunk = tokens[e * per_expert : (e + 1) * per_expert]
                gate, up = (chunk @ w1[e]).chunk(2, dim=-1)
                outs[e] = (F.silu(gate) * up) @ w2[e]
        for s in streams:
            main.wait_stream(s)
        return torch.cat(outs)

    return run


def layer_pass(
    torch: Any,
    shape: LayerShape,
    seq: int,
    tp: int,
    *,
    topk: int,
    experts_fn: ExpertsFn,
    micro_batch: int = 1,
    compiled: bool = False,
    device: str = DEVICE,
    backward: bool = True,
) -> Callable[[], None]:
    """One decoder layer pass (forward and backward) of one rank (module docstring) on
    ``micro_batch`` sequences of ``seq`` tokens, sequence-parallel over ``tp``, the routed
    ``micro_batch·seq/tp·topk`` copies handed to ``experts_fn`` in expert order;
    ``compiled``: the forward (and so its backward) through ``torch.compile``, which fuses the
    element-wise kernels as a fused stack (Transformer Engine) would; ``device`` other than
    ``cuda`` (a shape check on the CPU) runs attention on PyTorch's default backend;
    ``backward`` false: the forward alone (its autograd graph recorded, then dropped)."""
    import torch.nn.functional as F  # noqa: N812, PLC0415

    dev, bf16, hidden, hd = device, torch.bfloat16, shape.hidden, shape.head_dim
    local = seq // tp  # sequence-parallel shard
    heads, kv = shape.heads // tp, max(shape.kv_heads // tp, 1)
    q_w, kv_w = heads * hd, kv * hd
    routed = micro_batch * local * topk  # copies each rank receives under even routing
    p = {
        "wqkv": torch.randn(hidden, q_w + 2 * kv_w, device=dev, dtype=bf16) * 0.02,
        "wo": torch.randn(q_w, hidden, device=dev, dtype=bf16) * 0.02,
        "wr": torch.randn(hidden, shape.num_experts, device=dev, dtype=bf16) * 0.02,
        "n1": torch.ones(hidden, device=dev, dtype=bf16),
        "n2": torch.ones(hidden, device=dev, dtype=bf16),
        "nq": torch.ones(hd, device=dev, dtype=bf16),
        "nk": torch.ones(hd, device=dev, dtype=bf16),
    }
    for t in p.values():
        t.requires_grad_(True)
    x0 = torch.randn(micro_batch * local, hidden, device=dev, dtype=bf16, requires_grad=True)
    pos = torch.arange(seq, device=dev, dtype=torch.float32)
    inv = 1.0 / (1e6 ** (torch.arange(0, hd, 2, device=dev) / hd))
    ang = torch.outer(pos, inv)
    cos, sin = ang.cos().repeat(1, 2).to(bf16), ang.sin().repeat(1, 2).to(bf16)
    # even routing: each of the ``ep`` senders' tokens x ``topk`` spread evenly; this rank's
    # ``routed`` copies come from its own shard (the other senders' look the same)
    gen = torch.Generator(device=dev).manual_seed(0)
    perm = torch.randperm(routed, device=dev, generator=gen)  # expert order -> token copy
    inverse = torch.argsort(perm)
    ones = torch.ones(routed, device=dev)
    dispatch, permute = _gathers(torch)

    def rope(t: Any) -> Any:
        half = t.shape[-1] // 2
        rot = torch.cat((-t[..., half:], t[..., :half]), dim=-1)
        return t * cos + rot * sin

    def heads_first(t: Any, n: int, norm: Any) -> Any:
        t = t.view(micro_batch, seq, n, hd)
        return (t if norm is None else F.rms_norm(t, (hd,), norm)).transpose(1, 2)

    def forward() -> Any:
        h = F.rms_norm(x0, (hidden,), p["n1"])
        # the sequence-parallel all-gather's output, one sequence per micro-batch sample
        gathered = h.view(micro_batch, local, hidden).repeat(1, tp, 1)
        q, k, v = (gathered @ p["wqkv"]).split((q_w, kv_w, kv_w), dim=-1)
        q, k = rope(heads_first(q, heads, p["nq"])), rope(heads_first(k, kv, p["nk"]))
        v = heads_first(v, kv, None)
        k, v = k.repeat_interleave(heads // kv, 1), v.repeat_interleave(heads // kv, 1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        o = o.transpose(1, 2).reshape(micro_batch, seq, q_w) @ p["wo"]
        # the reduce-scatter's sum
        x1 = x0 + o.view(micro_batch, tp, local, hidden).sum(1).reshape(-1, hidden)
        h2 = F.rms_norm(x1, (hidden,), p["n2"])
        probs = torch.softmax((h2 @ p["wr"]).float(), dim=-1)
        top, idx = probs.topk(topk, dim=-1)
        top = top / top.sum(-1, keepdim=True)
        counts = torch.zeros(shape.num_experts, device=dev)
        counts = counts.scatter_add_(0, idx.flatten(), ones)
        aux = (probs.mean(0) * counts).sum()  # no host sync (bincount would wait for the GPU)
        y = experts_fn(dispatch.apply(h2, perm, inverse, topk))
        copies = permute.apply(y, inverse, perm).view(-1, topk, hidden)
        combined = (copies * top.to(bf16)[..., None]).sum(1)
        return (x1 + combined).float().square().mean() + 1e-2 * aux

    run = torch.compile(forward) if compiled else forward

    def step() -> None:
        loss = run()
        if backward:
            loss.backward()

    def one_pass() -> None:
        if device != "cuda":
            step()
            return
        from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415

        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):  # outside the compiled region
            step()

    return one_pass


def host_issue_ms(torch: Any, one_pass: Callable[[], None], reps: int = 10) -> float:
    """Median wall milliseconds from a synchronised start to the return of one pass: the
    host's time to issue it (plus any wait inside it for the GPU)."""
    issue = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        one_pass()
        issue.append((time.perf_counter() - t0) * 1e3)
        torch.cuda.synchronize()
    return sorted(issue)[len(issue) // 2]


def _layer(
    torch: Any, seq: int, tp: int, experts: int, topk: int, *, grouped_mm: bool, compiled: bool
) -> dict[str, Any]:
    """One Qwen3-235B-A22B decoder layer pass of one rank (module docstring): times in
    milliseconds; ``grouped_mm``: the experts as two ``torch._grouped_mm`` calls, else
    per-expert GEMMs over four streams; ``compiled`` as in ``layer_pass``."""
    per_expert = seq // tp * topk // experts
    experts_fn = _stacked_experts(torch, QWEN3_235B, experts, per_expert, grouped_mm=grouped_mm)
    one_pass = layer_pass(
        torch, QWEN3_235B, seq, tp, topk=topk, experts_fn=experts_fn, compiled=compiled
    )
    gpu_ms = cuda_time_ms(torch, one_pass, 20)
    issue_ms = host_issue_ms(torch, one_pass)
    kinds, kernels, top = _kernel_kinds(torch, one_pass)
    return {
        "seq": seq,
        "tensor_parallel": tp,
        "experts": "grouped_mm" if grouped_mm else f"per-expert GEMMs over {STREAMS} streams",
        "compiled": compiled,
        "tokens_per_expert": per_expert,
        "gpu_ms_per_pass": round(gpu_ms, 3),
        "host_issue_ms_per_pass_median": round(issue_ms, 3),
        "kernel_ms_per_pass": kinds,
        "kernels_per_pass": kernels,
        "top_kernels_ms_per_pass": top,
    }


def _kernel_kinds(
    torch: Any, one_pass: Callable[[], None]
) -> tuple[dict[str, float], int, list[tuple[str, float, int]]]:
    """Profiler kernel milliseconds per pass by kind (GEMM, attention, other), kernels per
    pass and every kernel (name, ms per pass, launches per pass; longest first), over 5
    passes; ``({}, 0, [])`` where the profiler cannot read the GPU."""
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415

    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                one_pass()
            torch.cuda.synchronize()
    except Exception as err:
        print("profiler:", err, flush=True)
        return {}, 0, []
    kinds = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    kernels = 0
    each: list[tuple[str, float, int]] = []
    for ev in prof.key_averages():
        if ev.device_type.name != "CUDA":
            continue
        name = ev.key.lower()
        kind = "other"
        if any(s in name for s in ("gemm", "xmma", "cutlass", "sm90_", "nvjet")):
            kind = "gemm"
        if any(s in name for s in ("fmha", "cudnn", "flash", "attention")):
            kind = "attention"
        kinds[kind] += ev.self_device_time_total / 1e3 / 5
        kernels += ev.count
        each.append((ev.key[:120], round(ev.self_device_time_total / 1e3 / 5, 4), ev.count // 5))
    top = sorted(each, key=lambda kv: -kv[1])
    return {k: round(v, 3) for k, v in kinds.items()}, kernels // 5, top


def _launch(torch: Any) -> dict[str, float]:
    """Host microseconds per kernel launch (module docstring)."""
    x = torch.zeros(16, device=DEVICE)
    for _ in range(1000):
        x.add_(1.0)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20000):
        x.add_(1.0)
    issued = time.perf_counter() - t0
    torch.cuda.synchronize()
    done = time.perf_counter() - t0
    return {
        "host_us_per_launch": round(issued / 20000 * 1e6, 2),
        "wall_us_per_kernel": round(done / 20000 * 1e6, 2),
    }


def _wgrad(torch: Any) -> dict[str, Any]:
    """The ``wgrad`` sweep (module docstring): milliseconds per weight gradient."""
    dev, bf16 = DEVICE, torch.bfloat16
    out: dict[str, Any] = {}
    for rows, cols in WGRAD_WEIGHTS:
        for m in WGRAD_TOKENS:
            x = torch.randn(m, rows, device=dev, dtype=bf16)
            g = torch.randn(m, cols, device=dev, dtype=bf16)
            buffer = torch.zeros(rows, cols, device=dev, dtype=torch.float32)

            def written(x: Any = x, g: Any = g) -> Any:
                return x.t() @ g

            def accumulated(x: Any = x, g: Any = g, buffer: Any = buffer) -> Any:
                return torch.addmm(buffer, x.t(), g, out_dtype=torch.float32, out=buffer)

            entry: dict[str, float | str] = {"bf16_out_ms": cuda_time_ms(torch, written, 20)}

            def summed(x: Any = x, g: Any = g, buffer: Any = buffer) -> Any:
                return torch.addmm(buffer, x.t(), g, out_dtype=torch.float32)

            # in place where the build takes ``out``, else a new fp32 sum (the same traffic)
            for key, fn in (("fp32_accumulate_ms", accumulated), ("fp32_addmm_ms", summed)):
                try:
                    entry[key] = cuda_time_ms(torch, fn, 20)
                    break
                except Exception as err:  # a build without addmm's out_dtype: recorded
                    entry[key.replace("_ms", "_error")] = str(err).splitlines()[0][:200]
            out[f"{rows}x{cols}/m{m}"] = {
                k: round(v, 4) if isinstance(v, float) else v for k, v in entry.items()
            }
            print(f"wgrad {rows}x{cols} m={m}", out[f"{rows}x{cols}/m{m}"], flush=True)
    return out


def main(out_path: str, parts: tuple[str, ...] = PARTS) -> dict[str, Any]:
    """Run ``parts`` (module docstring), write ``out_path`` (JSON) and return the results."""
    import torch  # noqa: PLC0415 (GPU machines only)

    warm_up_clocks(torch)
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = [ln for ln in cpuinfo if ln.startswith("model name")]
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name(),
        "cpu": cpu[0].split(":", 1)[1].strip() if cpu else "unknown",
        "cpus": len(cpu),
        "torch": torch.__version__,
    }
    if "launch" in parts:
        results["launch"] = _launch(torch)
        print("launch", results["launch"], flush=True)
    if "wgrad" in parts:
        results["wgrad"] = _wgrad(torch)
    if "layer" in parts:
        results["layer"] = {}
    for label, seq, tp, experts, topk in LAYERS if "layer" in parts else ():
        for grouped_mm, compiled in VARIANTS[label]:
            key = f"{label}/{'grouped_mm' if grouped_mm else 'streams'}"
            key += "/compiled" if compiled else ""
            try:
                results["layer"][key] = _layer(
                    torch, seq, tp, experts, topk, grouped_mm=grouped_mm, compiled=compiled
                )
            except Exception as err:
                results["layer"][key] = {"error": str(err).splitlines()[0][:200]}
            brief = {
                k: v for k, v in results["layer"][key].items() if k != "top_kernels_ms_per_pass"
            }
            print(key, json.dumps(brief), flush=True)
    if "grouped" in parts:
        results["grouped"] = _grouped(torch)
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main(
        sys.argv[1] if len(sys.argv) > 1 else "moe_layer_h100.json",
        tuple(sys.argv[2].split(",")) if len(sys.argv) > 2 else PARTS,
    )
