"""Kernel sweeps on one Hopper GPU: the evidence behind the GEMM and attention efficiency notes
of benchmarks/RESULTS.md.

Run on a machine with a CUDA GPU and PyTorch (not part of CI, not imported by the planner)::

    python -m benchmarks.h100_kernels out.json

It measures, with CUDA events after a warm-up of 200 ``8192³`` bf16 products (clocks settled):

* ``gemm``: bf16 cuBLAS throughput (TFLOP/s) of the four per-layer GEMMs of the Megatron-LM
  README H100 weak-scaling table (``megatron_lm_readme_h100_2024.csv``: hidden ``h``, tensor
  parallel ``t``, 4096 tokens per microbatch, ffn ``4h``): QKV ``(4096, 3h/t, h)``, output
  projection ``(4096, h, h/t)``, fc1 ``(4096, 4h/t, h)``, fc2 ``(4096, h, 4h/t)``, each forward
  (``/f``), data gradient (``/d``: ``(M, K, N)``) and weight gradient (``/w``: ``(N, K, M)``),
  plus the LM head forward;
* ``attention``: causal scaled-dot-product attention, batch 1, 4096 tokens, head dim 128, at
  7-32 heads, with PyTorch's cuDNN and FlashAttention-2 backends: forward and backward TFLOP/s
  on executed (causal-half) FLOPs, backward = 2.5x forward;
* ``memory``: bytes/s (read + write) of layer norm, tanh-GeLU and an add over ``(4096, h)``
  bf16 tensors, and of a 512 MB scale;
* ``fp8`` (``python -m benchmarks.h100_kernels --fp8 out.json``): FP8 (E4M3, per-tensor scales,
  bf16 output, ``torch._scaled_mm``) TFLOP/s of the NeMo 24.07 GPT3-175B layer GEMMs at tensor
  parallel 4 for 512-4096 rows (micro-batch 1 and 2 of 2048 tokens, and the 4 chunks
  Transformer Engine's userbuffers overlap splits them into), and of LLAMA2-7B/13B's at 4096.

Numbers recorded on 2026-11-26 (one H100 80GB HBM3, PyTorch 2.11 + CUDA 13) are in
``benchmarks/results/h100_kernels.json`` and ``h100_fp8_gemm.json`` (the FP8 sweep ran as an
inline copy of ``fp8_main``), discussed in ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

LAYERS = (
    (2048, 1),
    (4096, 2),
    (6144, 4),
    (7168, 8),
    (8192, 8),
    (10240, 8),
    (12288, 8),
    (16384, 8),
    (20480, 8),
)
"""(hidden, tensor parallel) of the table's rows: 1.7B ... 462B."""

TOKENS = 4096
VOCAB = 131072
HEADS = (7, 8, 10, 12, 16, 32)


def warm_up_clocks(torch: Any) -> None:
    """200 bf16 ``8192³`` products on the GPU, then a synchronise: clocks and power settle
    before anything is timed."""
    warm = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(200):
        warm @ warm
    torch.cuda.synchronize()


def cuda_time_ms(torch: Any, fn: Callable[[], object], reps: int = 20) -> float:
    """Mean milliseconds of ``fn`` over ``reps`` back-to-back calls, after 3 warm-up calls."""
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end)) / reps


def _forward_backward(
    torch: Any, forward: Callable[[], Any], inputs: tuple[Any, ...], grad: Any
) -> object:
    """One attention forward and its backward to ``inputs``."""
    return torch.autograd.grad(forward(), inputs, grad)


def main(out_path: str) -> dict[str, Any]:
    """Run the sweeps, write ``out_path`` (JSON) and return the results."""
    import torch  # noqa: PLC0415 (GPU machines only)
    import torch.nn.functional as F  # noqa: N812, PLC0415
    from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415

    dev, bf16 = "cuda", torch.bfloat16
    warm_up_clocks(torch)

    def gemm_tflops(m: int, n: int, k: int) -> float:
        a = torch.randn(m, k, device=dev, dtype=bf16)
        b = torch.randn(n, k, device=dev, dtype=bf16)
        return 2.0 * m * n * k / cuda_time_ms(torch, partial(torch.matmul, a, b.t()), 30) / 1e9

    gemm: dict[str, float] = {"ref8192": gemm_tflops(8192, 8192, 8192)}
    for h, t in LAYERS:
        shapes = {
            "qkv": (TOKENS, 3 * h // t, h),
            "proj": (TOKENS, h, h // t),
            "fc1": (TOKENS, 4 * h // t, h),
            "fc2": (TOKENS, h, 4 * h // t),
        }
        for name, (m, n, k) in shapes.items():
            gemm[f"{h}/{name}/f"] = gemm_tflops(m, n, k)
            gemm[f"{h}/{name}/d"] = gemm_tflops(m, k, n)
            gemm[f"{h}/{name}/w"] = gemm_tflops(n, k, m)
        gemm[f"{h}/lm/f"] = gemm_tflops(TOKENS, VOCAB // t, h)

    attention: dict[str, list[float]] = {}
    for heads in HEADS:
        query, key, value = (
            torch.randn(1, heads, TOKENS, 128, device=dev, dtype=bf16, requires_grad=True)
            for _ in range(3)
        )
        flops = 2.0 * 2.0 * TOKENS * TOKENS * 128 * heads / 2.0  # causal half
        for label, backend in (
            ("cudnn", SDPBackend.CUDNN_ATTENTION),
            ("flash2", SDPBackend.FLASH_ATTENTION),
        ):
            forward = partial(F.scaled_dot_product_attention, query, key, value, is_causal=True)
            with sdpa_kernel(backend):
                grad = torch.randn_like(forward())
                fwd = cuda_time_ms(torch, forward)
                both = cuda_time_ms(
                    torch, partial(_forward_backward, torch, forward, (query, key, value), grad)
                )
            attention[f"{label}/{heads}"] = [flops / fwd / 1e9, 2.5 * flops / (both - fwd) / 1e9]

    memory: dict[str, float] = {}
    for h in (2048, 4096, 6144, 12288):
        x = torch.randn(TOKENS, h, device=dev, dtype=bf16)
        w, b = torch.ones(h, device=dev, dtype=bf16), torch.zeros(h, device=dev, dtype=bf16)
        y = torch.randn(TOKENS, 4 * h // (1 if h < 4096 else 2), device=dev, dtype=bf16)
        n_x, n_y = x.numel() * 2, y.numel() * 2
        norm = partial(F.layer_norm, x, (h,), w, b)
        memory[f"layer_norm/{h}"] = 2 * n_x / cuda_time_ms(torch, norm) / 1e6
        gelu = partial(F.gelu, y, approximate="tanh")
        memory[f"gelu/{h}"] = 2 * n_y / cuda_time_ms(torch, gelu) / 1e6
        memory[f"add/{h}"] = 3 * n_x / cuda_time_ms(torch, partial(torch.add, x, x)) / 1e6
    big = torch.randn(2**28, device=dev, dtype=bf16)
    scale = partial(torch.mul, big, 2)
    memory["scale_512MB"] = 2 * big.numel() * 2 / cuda_time_ms(torch, scale) / 1e6

    results = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "gemm_tflop_per_s": gemm,
        "attention_fwd_bwd_tflop_per_s": attention,
        "memory_gb_per_s": memory,
    }
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(results, fh, indent=1)
    return results


def fp8_main(out_path: str) -> dict[str, float]:
    """The FP8 GEMM sweep (module docstring): write ``out_path`` (JSON), return the results."""
    import torch  # noqa: PLC0415 (GPU machines only)

    dev = "cuda"
    warm_up_clocks(torch)
    one = torch.ones((), device=dev)

    def fp8_tflops(m: int, n: int, k: int) -> float:
        a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn)
        product = partial(
            torch._scaled_mm, a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16
        )
        return 2.0 * m * n * k / cuda_time_ms(torch, product, 30) / 1e9

    results = {"ref8192": fp8_tflops(8192, 8192, 8192)}
    gpt3 = {"qkv": (9216, 12288), "proj": (12288, 3072), "fc1": (12288, 12288)}
    gpt3["fc2"] = (12288, 12288)
    for name, (n, k) in gpt3.items():
        for m in (512, 1024, 2048, 4096):
            results[f"175b/{name}/{m}/f"] = fp8_tflops(m, n, k)
            results[f"175b/{name}/{m}/d"] = fp8_tflops(m, k, n)
            results[f"175b/{name}/{m}/w"] = fp8_tflops(n, k, m)
    for tag, (h, ffn) in {"7b": (4096, 11008), "13b": (5120, 13824)}.items():
        llama = {"qkv": (3 * h, h), "proj": (h, h), "fc1": (2 * ffn, h), "fc2": (h, ffn)}
        for name, (n, k) in llama.items():
            results[f"{tag}/{name}/f"] = fp8_tflops(TOKENS, n, k)
            results[f"{tag}/{name}/d"] = fp8_tflops(TOKENS, k, n)
            results[f"{tag}/{name}/w"] = fp8_tflops(n, k, TOKENS)
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(results, fh, indent=1)
    return results


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--fp8":
        fp8_main(sys.argv[2] if len(sys.argv) > 2 else "h100_fp8_gemm.json")
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else "h100_kernels.json")
