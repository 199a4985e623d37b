"""FlashAttention v1 (flash-attn 1.0.9, llm-foundry 0.4's kernel) against FlashAttention-2 and
cuDNN on one GPU: FLOP rates by head dimension and sequence length.

Needs a CUDA GPU, PyTorch, nvcc, and the flash-attn 1.0.9 sdist (PyPI ``flash_attn-1.0.9.tar.gz``;
``pip download`` runs its ``setup.py``, which imports torch: with no CUDA torch at hand, put a
stub ``torch`` on ``PYTHONPATH``). Build only the kernels the benchmark calls, for the GPU's own
architecture, next to this file's copy of ``flash_attn_interface.py``::

    tar xzf flash_attn-1.0.9.tar.gz && cd flash_attn-1.0.9
    # setup.py's CUDAExtension with sources csrc/flash_attn/fmha_api.cpp and
    # csrc/flash_attn/src/fmha_{fwd,bwd}_hdim{64,128}.cu, the nvcc flags of setup.py,
    # -gencode arch=compute_90,code=sm_90 only; empty definitions of run_fmha_{fwd,bwd}_hdim32
    # and run_fmha_block_* (kernels not called); c10::optional -> std::optional for torch >= 2.4
    python setup.py build_ext --inplace
    python -m benchmarks.flash_attention_v1_h100 fa1     # or: sdpa (FlashAttention-2), cudnn,
                                                         # clocks

Shapes follow Dao 2023 §4.1 (16k tokens per batch, hidden 2048, head dim 64 or 128; causal;
bf16), plus batch 1 at 32k and 64k tokens. FLOPs: the causal half of ``4·b·s²·hidden``
forward, 2.5x that backward (the convention of Dao 2023 and of ``planner.perf.attention``).

Measured 2026-11-26 on one H100 SXM 80GB HBM3 (``nvidia-smi`` max SM clock 1980 MHz), PyTorch
2.11.0+cu130, flash-attn 1.0.9 built with nvcc 13.0 for sm_90; fwd+bwd TFLOP/s (mean of 10 after
3 warm-ups):

=====  =====================  =====================  =====================
s      v1 d=64 (fwd / bwd)    v1 d=128 (fwd / bwd)   FA2 SDPA d=64 / 128
=====  =====================  =====================  =====================
512    90 (101 / 86)          82 (84 / 81)           92 / 103
2k     128 (120 / 131)        99 (92 / 103)          192 / 207
8k     148 (128 / 158)        121 (93 / 137)         255 / 279
16k    157 (129 / 171)        125 (93 / 144)         282 / 312
64k    159 (129 / 174)        125 (94 / 144)         293 / 320
=====  =====================  =====================  =====================

(cuDNN through SDPA, d=128: 147 at 512 tokens, 538-559 from 16k.) SM clock and board power
sampled with ``nvidia-smi`` every 0.5 s over 12 s of back-to-back runs (700 W limit): v1 fwd+bwd
at 16k, d=128, 1980 MHz (min = max = median) at ~611 W; FlashAttention-2 ~1800 MHz at ~698 W;
a bf16 8192x8192x8192 cuBLAS GEMM ~1365 MHz (1305-1485) at ~698 W. Head dim 64 runs v1 at
1.09-1.38x the FLOP rate of 128; FlashAttention-2 runs it at 0.89-0.94x. The absolute v1 rates
of this build are below what the published llm-foundry H100 rows imply (their long-sequence
steps would not fit the attention alone at these rates), so the model uses the ratios, not the
rates.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

HIDDEN = 2048
SHAPES = [(s, 16384 // s) for s in (512, 1024, 2048, 4096, 8192, 16384)] + [(32768, 1), (65536, 1)]


def _time(fn: Callable[[], Any], iterations: int = 10, warmup: int = 3) -> float:
    import torch  # noqa: PLC0415

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        fn()
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) / iterations / 1e3


def _attention(mode: str, s: int, b: int, d: int) -> Callable[[], Any]:
    import torch  # noqa: PLC0415

    heads = HIDDEN // d
    if mode == "fa1":
        from flash_attn_interface import flash_attn_unpadded_func  # noqa: PLC0415

        q, k, v = (
            torch.randn(b * s, heads, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for _ in range(3)
        )
        cu = torch.arange(0, (b + 1) * s, s, device="cuda", dtype=torch.int32)
        return lambda: flash_attn_unpadded_func(q, k, v, cu, cu, s, s, 0.0, causal=True)
    import torch.nn.functional as F  # noqa: N812, PLC0415
    from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415

    backend = {"sdpa": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[mode]
    q, k, v = (
        torch.randn(b, heads, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        for _ in range(3)
    )

    def run() -> Any:
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    return run


def clocks(mode: str, seconds: float = 12.0) -> dict[str, float]:
    """Median SM clock (MHz) and board power (W) from ``nvidia-smi`` every 0.5 s while ``mode``
    (fa1, sdpa, cudnn: fwd+bwd at 16k tokens, d=128; gemm: a bf16 8192^3 matmul) runs."""
    import subprocess  # noqa: PLC0415
    import threading  # noqa: PLC0415
    import time  # noqa: PLC0415

    import torch  # noqa: PLC0415

    if mode == "gemm":
        x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        step: Callable[[], Any] = lambda: x @ x  # noqa: E731
    else:
        fn = _attention(mode, 16384, 1, 128)
        grad = torch.randn_like(fn())
        step = lambda: fn().backward(grad)  # noqa: E731
    query = ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits"]
    samples: list[tuple[float, float]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            out = subprocess.run(query, capture_output=True, text=True, check=True).stdout
            clock, power = out.strip().split(",")[:2]
            samples.append((float(clock), float(power)))
            time.sleep(0.5)

    step()
    torch.cuda.synchronize()
    thread = threading.Thread(target=sample)
    thread.start()
    start = time.time()
    while time.time() - start < seconds:
        step()
        torch.cuda.synchronize()
    stop.set()
    thread.join()
    kept = sorted(samples[2:])
    return {
        "clock_mhz": kept[len(kept) // 2][0],
        "power_w": sorted(p for _, p in kept)[len(kept) // 2],
    }


def main(argv: list[str] | None = None) -> int:
    """Print one JSON line per (head dim, sequence length) for the mode given (``clocks``:
    the SM clock and power of each kernel in turn)."""
    import torch  # noqa: PLC0415

    mode = (argv or sys.argv[1:] or ["fa1"])[0]
    sys.path.insert(0, os.getcwd())
    if mode == "clocks":
        for kernel in ("gemm", "sdpa", "fa1"):
            print(json.dumps({"mode": kernel, **clocks(kernel)}), flush=True)
        return 0
    for d in (64, 128):
        for s, b in SHAPES:
            flops = 4 * b * s * s * HIDDEN / 2  # causal forward
            fn = _attention(mode, s, b, d)
            grad = torch.randn_like(fn())

            def both(fn: Callable[[], Any] = fn, grad: Any = grad) -> None:
                fn().backward(grad)

            fwd, fwd_bwd = _time(fn), _time(both)
            print(
                json.dumps(
                    {
                        "mode": mode,
                        "d": d,
                        "s": s,
                        "b": b,
                        "fwd_tflops": flops / fwd / 1e12,
                        "bwd_tflops": 2.5 * flops / (fwd_bwd - fwd) / 1e12,
                        "fwdbwd_tflops": 3.5 * flops / fwd_bwd / 1e12,
                    }
                ),
                flush=True,
            )
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
