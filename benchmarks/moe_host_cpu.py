"""Host time and op count of one Megatron-Core 0.14 transformer layer (MoE or dense).

A study tool (the ModelZoo Qwen3-235B TP 4 row, `benchmarks/RESULTS.md`, section
"MoE host/device syncs in Megatron-Core 0.13-0.14"): a pass of a layer whose GPU work is shorter
than the host's time to issue it costs the host time. This builds Megatron-Core's own layer
(`get_gpt_layer_local_spec`: RMSNorm, QK norm, unfused attention, the router with its auxiliary
loss, the all-to-all dispatcher, `SequentialMLP` experts) on CPU tensors so small that the time
is Python and PyTorch dispatch, not arithmetic, and counts the ATen ops of one forward and one
backward with a `TorchDispatchMode` (the non-view ops are what would launch GPU kernels).

With ``--device cuda`` the same layer runs on a GPU (NCCL, world size 1), each op a real kernel
launch through the caching allocator; with ``--grouped-gemm`` the experts are Megatron-Core's
``GroupedMLP`` over a stand-in ``grouped_gemm`` package whose ``gmm`` is one GEMM (one Python
call per linear, as TE's ``GroupedLinear`` and grouped_gemm's CUTLASS mode make it).

What it is not: Transformer Engine's modules and DeepEP are absent (no wheel for the GPU
machine's CUDA 13 PyTorch), and neither machine's CPU is the runs' host. Expect the right order,
not the size.

Usage (megatron-core is not a dependency; unpack its wheel first):

    pip download --no-deps megatron-core==0.14.0 -d /tmp/mc && cd /tmp/mc && unzip -q *.whl
    python -m benchmarks.moe_host_cpu --megatron-core /tmp/mc --local-experts 16 --scope layer
    python -m benchmarks.moe_host_cpu --megatron-core /tmp/mc --device cuda --grouped-gemm

Recorded 2026-11-26 (this machine: 2-core Xeon VM, PyTorch 2.13 CPU, megatron-core 0.14.0), per
pass, forward / forward + backward, and non-view ATen ops forward + backward:
MoE block with 8 / 16 / 32 experts 1.44 / 2.70, 2.13 / 3.91, 3.66 / 6.74 ms (185, 321, 593 ops);
whole MoE layer with 16 experts 2.8-3.4 / 5.4-6.6 ms (440 ops); the router alone 0.15 / 0.35 ms.

Recorded 2026-11-26 with ``--device cuda`` on lent H100 machines (16-vCPU Xeon VM, PyTorch
2.11 + CUDA 13; three machines, one command each, 100 passes), forward + backward per pass:
MoE layer, 16 experts, ``SequentialMLP`` 14.15 / 13.40 ms (132 + 246 ops), 8 experts 11.16 ms
(92 + 150); 16 experts with the grouped GEMM 8.27 / 5.31 ms (57 + 66 ops, the two runs in one
command), 8 experts 7.21 ms; dense layer 3.15 / 3.28 ms (23 + 45 ops). The CPU path on the
same machine's CPU: 13.07 ms for the 16-expert layer.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import sys
import time
import warnings
from typing import Any

_VIEWS = (
    "view",
    "detach",
    "t.default",
    "select",
    "split",
    "alias",
    "expand",
    "unsqueeze",
    "squeeze",
    "permute",
    "transpose",
    "slice",
    "unbind",
    "as_strided",
    "lift_fresh",
)


class _Event:
    def synchronize(self) -> None:
        """No device: nothing to wait for."""


class _Stream:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def wait_stream(self, other: Any) -> None:
        """No device: streams are one."""

    def record_event(self, *args: Any) -> _Event:
        """An event that is always complete."""
        return _Event()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Stream)

    def __hash__(self) -> int:
        return 0


def _stub_cuda(torch: Any) -> None:
    """Let Megatron-Core's CUDA-only calls run on the CPU (device, streams, RNG tracker)."""
    torch.cuda.current_device = lambda: "cpu"
    torch.cuda.Stream = _Stream
    torch.cuda.current_stream = lambda *args: _Stream()
    torch.cuda.stream = lambda stream: contextlib.nullcontext()
    torch.Tensor.record_stream = lambda self, stream: None
    import megatron.core.tensor_parallel.random as tp_random  # noqa: PLC0415

    tp_random.CudaRNGStatesTracker.fork = lambda self, *a, **k: contextlib.nullcontext()
    _without_te()


def _without_te() -> None:
    """Megatron-Core 0.14's router reads ``moe_utils.te_general_gemm``, which is only defined
    when Transformer Engine imports: None (the router GEMM in PyTorch)."""
    from megatron.core.transformer.moe import moe_utils  # noqa: PLC0415

    moe_utils.te_general_gemm = None


def _install_grouped_gemm_standin() -> None:
    """A ``grouped_gemm`` package whose ``ops.gmm(a, b, batch_sizes, trans_b)`` runs one GEMM
    (``a @ b[0]``): one Python call and one kernel forward, two GEMMs backward, as the real
    grouped GEMM issues (grouped_gemm's CUTLASS mode; TE's ``GroupedLinear`` is likewise one
    Python call per linear). The host cost of the call, not its arithmetic."""
    import types  # noqa: PLC0415

    def gmm(a: Any, b: Any, batch_sizes: Any, trans_b: bool = False) -> Any:
        return a @ (b[0].transpose(0, 1) if trans_b else b[0])

    module = types.ModuleType("grouped_gemm")
    module.ops = types.SimpleNamespace(gmm=gmm)  # type: ignore[attr-defined]
    sys.modules["grouped_gemm"] = module


def main(argv: list[str] | None = None) -> int:
    """Print the op counts and host times of one layer pass (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megatron-core", required=True, help="unpacked megatron-core wheel")
    parser.add_argument("--local-experts", type=int, default=16)
    parser.add_argument("--scope", choices=("moe", "layer", "dense"), default="layer")
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument(
        "--grouped-gemm",
        action="store_true",
        help="experts as Megatron-Core's GroupedMLP over a one-GEMM stand-in for grouped_gemm",
    )
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cuda: the same layer on a GPU, each op a real kernel launch (NCCL, world size 1)",
    )
    args = parser.parse_args(argv)
    cuda = args.device == "cuda"
    sys.path.insert(0, args.megatron_core)
    warnings.filterwarnings("ignore")
    if args.grouped_gemm:
        _install_grouped_gemm_standin()
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415
    from torch.utils._python_dispatch import TorchDispatchMode  # noqa: PLC0415

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29513")
    if cuda:
        torch.cuda.set_device(0)
    dist.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
    from megatron.core import parallel_state  # noqa: PLC0415

    parallel_state.initialize_model_parallel(1, 1)
    if cuda:
        from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed  # noqa: PLC0415

        model_parallel_cuda_manual_seed(1234)
        _without_te()
    else:
        _stub_cuda(torch)
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec  # noqa: PLC0415
    from megatron.core.models.gpt.moe_module_specs import get_moe_module_spec  # noqa: PLC0415
    from megatron.core.transformer.spec_utils import build_module  # noqa: PLC0415
    from megatron.core.transformer.transformer_config import TransformerConfig  # noqa: PLC0415

    torch.set_num_threads(1)
    experts = None if args.scope == "dense" else args.local_experts
    config = TransformerConfig(
        num_layers=1,
        hidden_size=64,
        num_attention_heads=4,
        num_query_groups=2,
        kv_channels=16,
        ffn_hidden_size=64,
        num_moe_experts=experts,
        moe_router_topk=8 if experts else 2,
        moe_aux_loss_coeff=1e-3 if experts else 0.0,
        moe_router_load_balancing_type="aux_loss",
        moe_router_dtype="fp32",
        moe_ffn_hidden_size=64 if experts else None,
        moe_token_dispatcher_type="alltoall",
        moe_grouped_gemm=bool(experts) and args.grouped_gemm,
        use_cpu_initialization=True,
        add_bias_linear=False,
        gated_linear_unit=True,
        activation_func=torch.nn.functional.silu,
        normalization="RMSNorm",
        attention_dropout=0.0,
        hidden_dropout=0.0,
    )
    if args.scope == "moe":
        spec = get_moe_module_spec(
            use_te=False, num_experts=experts, moe_grouped_gemm=args.grouped_gemm
        )
    else:
        spec = get_gpt_layer_local_spec(
            num_experts=experts,
            moe_grouped_gemm=args.grouped_gemm,
            qk_layernorm=True,
            normalization="RMSNorm",
        )
    layer = build_module(spec, config=config, layer_number=1).to(args.device)
    x = torch.randn(32, 1, 64, device=args.device, requires_grad=True)
    mask = torch.triu(torch.ones(1, 1, 32, 32, device=args.device), diagonal=1).bool()

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def forward() -> Any:
        out, _ = layer(x) if args.scope == "moe" else layer(x, attention_mask=mask)
        return out

    class _Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: collections.Counter[str] = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            self.ops[str(func)] += 1
            return func(*args, **(kwargs or {}))

    for _ in range(20):
        forward().sum().backward()
    with _Count() as fwd:
        out = forward()
    with _Count() as bwd:
        out.sum().backward()

    def launches(ops: collections.Counter[str]) -> int:
        return sum(n for name, n in ops.items() if not any(v in name for v in _VIEWS))

    sync()
    start = time.perf_counter()
    for _ in range(args.repeats):
        forward()
    sync()
    middle = time.perf_counter()
    for _ in range(args.repeats):
        forward().sum().backward()
    sync()
    end = time.perf_counter()
    print(
        f"{args.device} {args.scope}, {experts or 0} experts"
        f"{' (grouped GEMM stand-in)' if args.grouped_gemm else ''}: non-view ATen ops forward "
        f"{launches(fwd.ops)}, backward {launches(bwd.ops)}; host forward "
        f"{1e3 * (middle - start) / args.repeats:.2f} ms, forward + backward "
        f"{1e3 * (end - middle) / args.repeats:.2f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
