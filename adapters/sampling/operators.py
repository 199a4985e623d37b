"""Times the planner's operators with PyTorch on the local device (CPU or one CUDA GPU).

``sample_operators(points, device=...)`` runs each ``DesignPoint`` of
``planner.calibration.design`` once per pass the op has (``OP_PASSES``): ``num_warmup`` untimed
calls, then timed calls until ``min_time_s`` of measurements and at least ``min_repeats``
(at most ``max_repeats``); it records the median, the 25th/75th percentiles and the minimum.
On CUDA every call is bracketed by CUDA events and the stream is synchronised before reading
them; on CPU ``time.perf_counter`` brackets the call (PyTorch CPU ops are synchronous).

Backward passes are timed with ``torch.autograd.grad(out, inputs, grad_out,
retain_graph=True)`` over a graph built once, so only the backward kernels are timed.
Attention is ``torch.nn.functional.scaled_dot_product_attention(..., is_causal=True)``, which
picks the flash or memory-efficient kernel where the device has one.

torch is imported inside the functions: importing this package never needs it.
"""

from __future__ import annotations

import os
import platform
import socket
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from planner.calibration.design import DesignPoint
from planner.calibration.ops import OP_PASSES, OpKind, Pass
from planner.calibration.samples import OpSample
from planner.errors import CalibrationError

__all__ = ["device_metadata", "sample_operators"]

_TORCH_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


def _torch() -> Any:
    try:
        import torch  # noqa: PLC0415 (lazy: importing the adapter never needs torch)
    except ImportError:  # pragma: no cover - the environment has torch
        raise CalibrationError(
            "sampling needs PyTorch; install torch (a CPU build is enough)"
        ) from None
    return torch


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_metadata(device: str) -> dict[str, object]:
    """Who measured: device kind and name, torch/CUDA versions, threads, host, memory, OS."""
    torch = _torch()
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        name = str(props.name)
        memory = float(props.total_memory)
        driver = ""
        try:
            driver = (
                str(torch.cuda.driver_version()) if hasattr(torch.cuda, "driver_version") else ""
            )
        except Exception:  # optional field: never fail the run for it
            driver = ""
    else:
        name = _cpu_name()
        memory = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        driver = ""
    return {
        "device": device,
        "device_name": name,
        "device_memory_bytes": memory,
        "torch_version": str(torch.__version__),
        "cuda_version": str(torch.version.cuda or ""),
        "cuda_driver": driver,
        "num_threads": int(torch.get_num_threads()),
        "cpu_count": os.cpu_count() or 0,
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python_version": platform.python_version(),
    }


def _calls(torch: Any, point: DesignPoint, device: str) -> dict[Pass, Callable[[], object]]:
    """The timed closures of each pass of ``point``."""
    f = torch.nn.functional
    dt = getattr(torch, _TORCH_DTYPES[point.dtype])
    d = point.dims
    kw = {"device": device, "dtype": dt}

    def leaf(*shape: int) -> Any:
        return torch.randn(*shape, **kw).requires_grad_(True)

    def backward(out: Any, inputs: tuple[Any, ...]) -> Callable[[], object]:
        grad = torch.randn_like(out) if out.dim() else torch.ones_like(out)
        return lambda: torch.autograd.grad(out, inputs, grad, retain_graph=True)

    op = point.op
    if op is OpKind.GEMM:
        a = torch.randn(d["m"], d["k"], **kw)
        b = torch.randn(d["k"], d["n"], **kw)
        return {Pass.FORWARD: lambda: torch.matmul(a, b)}
    if op is OpKind.ATTENTION:
        shape = (d["batch"], d["heads"], d["seq"], d["head_dim"])
        q, k, v = leaf(*shape), leaf(*shape), leaf(*shape)

        def fwd() -> object:
            return f.scaled_dot_product_attention(q, k, v, is_causal=True)

        return {Pass.FORWARD: fwd, Pass.BACKWARD: backward(fwd(), (q, k, v))}
    if op in (OpKind.LAYER_NORM, OpKind.RMS_NORM):
        x = leaf(d["tokens"], d["width"])
        w = torch.ones(d["width"], **kw).requires_grad_(True)
        if op is OpKind.LAYER_NORM:
            bias = torch.zeros(d["width"], **kw).requires_grad_(True)
            inputs: tuple[Any, ...] = (x, w, bias)

            def norm() -> object:
                return f.layer_norm(x, (d["width"],), w, bias)
        else:
            inputs = (x, w)

            def norm() -> object:
                return f.rms_norm(x, (d["width"],), w)

        return {Pass.FORWARD: norm, Pass.BACKWARD: backward(norm(), inputs)}
    if op in (OpKind.GELU, OpKind.SILU):
        x = leaf(d["tokens"], d["width"])
        act = f.gelu if op is OpKind.GELU else f.silu
        return {Pass.FORWARD: lambda: act(x), Pass.BACKWARD: backward(act(x), (x,))}
    if op is OpKind.SWIGLU:
        gate, up = leaf(d["tokens"], d["width"]), leaf(d["tokens"], d["width"])

        def swiglu() -> object:
            return f.silu(gate) * up

        return {Pass.FORWARD: swiglu, Pass.BACKWARD: backward(swiglu(), (gate, up))}
    if op is OpKind.ADD:
        x, y = (
            torch.randn(d["tokens"], d["width"], **kw),
            torch.randn(d["tokens"], d["width"], **kw),
        )
        return {Pass.FORWARD: lambda: x + y}
    if op is OpKind.EMBEDDING:
        table = leaf(d["vocab"], d["width"])
        idx = torch.randint(0, d["vocab"], (d["tokens"],), device=device)
        return {
            Pass.FORWARD: lambda: f.embedding(idx, table),
            Pass.BACKWARD: backward(f.embedding(idx, table), (table,)),
        }
    if op is OpKind.CROSS_ENTROPY:
        logits = leaf(d["tokens"], d["vocab"])
        labels = torch.randint(0, d["vocab"], (d["tokens"],), device=device)
        return {
            Pass.FORWARD: lambda: f.cross_entropy(logits, labels),
            Pass.BACKWARD: backward(f.cross_entropy(logits, labels), (logits,)),
        }
    # adam: fp32 parameters in 8 tensors (a model's parameters come in many tensors)
    total = d["num_params"]
    sizes = [total // 8 + (1 if i < total % 8 else 0) for i in range(8)]
    params = [torch.zeros(max(s, 1), device=device, requires_grad=True) for s in sizes]
    for p in params:
        p.grad = torch.randn_like(p)
    optimizer = torch.optim.AdamW(params, lr=1e-3)
    return {Pass.STEP: optimizer.step}


def _time(
    torch: Any,
    call: Callable[[], object],
    device: str,
    *,
    num_warmup: int,
    min_repeats: int,
    max_repeats: int,
    min_time_s: float,
) -> list[float]:
    for _ in range(num_warmup):
        call()
    if device == "cuda":
        torch.cuda.synchronize()
    times: list[float] = []
    spent = 0.0
    while len(times) < max_repeats and (len(times) < min_repeats or spent < min_time_s):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            call()
            end.record()
            torch.cuda.synchronize()
            elapsed = start.elapsed_time(end) / 1000.0
        else:
            t0 = time.perf_counter()
            call()
            elapsed = time.perf_counter() - t0
        times.append(elapsed)
        spent += elapsed
    return times


def _quantile(sorted_values: list[float], q: float) -> float:
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def sample_operators(
    points: Sequence[DesignPoint],
    *,
    device: str = "cpu",
    num_threads: int | None = None,
    num_warmup: int = 2,
    min_repeats: int = 7,
    max_repeats: int = 30,
    min_time_s: float = 0.1,
    seed: int = 0,
    progress: Callable[[int, int, OpSample], None] | None = None,
) -> list[OpSample]:
    """Time every pass of every point on ``device`` (``"cpu"`` or ``"cuda"``); one
    ``OpSample`` per (point, pass), in design order.

    ``num_threads`` sets ``torch.set_num_threads`` (None keeps PyTorch's default);
    ``progress(i, total, sample)`` is called after each sample. Raises ``CalibrationError``
    when ``device`` is unknown or CUDA is asked for but unavailable.
    """
    torch = _torch()
    if device not in ("cpu", "cuda"):
        raise CalibrationError(f"device must be cpu or cuda, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise CalibrationError("--device cuda: no CUDA device is visible to PyTorch")
    if num_threads:
        torch.set_num_threads(num_threads)
    torch.manual_seed(seed)
    meta = device_metadata(device)
    total = sum(len(OP_PASSES[p.op]) for p in points)
    out: list[OpSample] = []
    with torch.inference_mode(False):
        for point in points:
            calls = _calls(torch, point, device)
            for pass_ in OP_PASSES[point.op]:
                times = sorted(
                    _time(
                        torch,
                        calls[pass_],
                        device,
                        num_warmup=num_warmup,
                        min_repeats=min_repeats,
                        max_repeats=max_repeats,
                        min_time_s=min_time_s,
                    )
                )
                sample = OpSample(
                    op=point.op,
                    pass_=pass_,
                    dtype=point.dtype,
                    dims={k: float(v) for k, v in point.dims.items()},
                    time_median_s=statistics.median(times),
                    time_p25_s=_quantile(times, 0.25),
                    time_p75_s=_quantile(times, 0.75),
                    time_min_s=times[0],
                    num_repeats=len(times),
                    num_warmup=num_warmup,
                    device=device,
                    device_name=str(meta["device_name"]),
                    torch_version=str(meta["torch_version"]),
                    cuda_version=str(meta["cuda_version"]),
                    num_threads=int(str(meta["num_threads"])),
                    hostname=str(meta["hostname"]),
                    timestamp=datetime.now(UTC).isoformat(timespec="seconds"),
                )
                out.append(sample)
                if progress is not None:
                    progress(len(out), total, sample)
            del calls
    return out
