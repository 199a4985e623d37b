"""Iteration time of one scenario as a sum of explainable terms (first analytical model).

``iteration_time = compute + exposed TP/CP/EP communication + PP p2p + pipeline bubble
+ exposed DP communication + optimizer step``, each a pure function of the scenario:

* compute: hardware FLOPs per GPU (``planner.perf.flops``, recompute included) over the dense
  peak of the precision times ``EfficiencyModel.compute_efficiency``; under FP8 the attention
  core and LM head run at the 16-bit peak.
* TP: per layer and microbatch, 4 all-gathers + 4 reduce-scatters (sequence parallel) or 4
  all-reduces of ``b·s·h`` 16-bit activations (Korthikanti et al. 2022 §4.2.2; Shoeybi et al.
  2019 Fig. 4), +50 % with full recompute; ring cost ``2(n-1)/n`` (``planner.perf.collectives``).
* CP: ring attention passes each rank's K,V chunk ``cp-1`` times forward and twice as much
  backward (Liu et al. 2023, Ring Attention; Megatron-Core context parallel).
* EP: token dispatch + combine all-to-all, forward and backward (Lepikhin et al. 2020, GShard).
* PP bubble: ``(p-1)/(v·m)`` of the per-stage busy time under (interleaved) 1F1B (Narayanan et al.
  SC'21, §2.2.1-2.2.2), ``m`` microbatches per pipeline.
* DP: gradient reduce-scatter (fp32) + parameter all-gather (16-bit) with the distributed
  optimizer, all-reduce without it, extra all-gathers for ZeRO-3 (Rajbhandari et al. 2020),
  over NVLink when the group fits in one NVLink domain, else the NIC; hidden behind the last
  microbatch's compute up to ``comm_overlap(DATA)``.
* optimizer: memory-bound Adam over the locally owned parameters, ``34 B/param`` of HBM traffic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planner.perf import collectives as coll
from planner.perf.efficiency import CommKind, DefaultEfficiency, EfficiencyModel
from planner.perf.flops import iteration_flops
from planner.perf.memory import MemoryBreakdown, local_params, memory_per_gpu
from planner.specs.hardware import Precision
from planner.specs.parallelism import Recompute
from planner.specs.scenario import Scenario

ACTIVATION_BYTES = 2.0
"""Activations travel in 16-bit between GPUs, also under FP8 training."""
GRAD_REDUCE_BYTES = 4.0
"""Megatron reduces the fp32 main-grad buffer when training in BF16."""
PARAM_GATHER_BYTES = 2.0
ADAM_HBM_BYTES_PER_PARAM = 34.0
"""Read fp32 master, m, v, grad (16 B) + grad-norm pass (4 B); write master, m, v (12 B) and the
16-bit weight copy (2 B)."""
HBM_EFFICIENCY = 0.8
KERNEL_FLOOR_S_PER_LAYER = 2e-4
"""Least time one layer's forward+backward of one microbatch takes however small it is: about
40 kernels at ~5 us launch latency each (launch-bound eager PyTorch); keeps tiny models sane."""
"""Achieved fraction of HBM bandwidth for streaming element-wise kernels (STREAM-like)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StepBreakdown:
    """Seconds per iteration spent on each term on the critical path."""

    compute_s: float
    tp_comm_exposed_s: float
    cp_comm_exposed_s: float
    ep_comm_exposed_s: float
    pp_comm_exposed_s: float
    pp_bubble_s: float
    dp_comm_exposed_s: float
    optimizer_s: float

    @property
    def total_s(self) -> float:
        """Iteration time, the sum of all terms."""
        return (
            self.compute_s
            + self.tp_comm_exposed_s
            + self.cp_comm_exposed_s
            + self.ep_comm_exposed_s
            + self.pp_comm_exposed_s
            + self.pp_bubble_s
            + self.dp_comm_exposed_s
            + self.optimizer_s
        )

    def as_dict(self) -> dict[str, float]:
        """The ``breakdown_s`` object of the output contract (keys without the ``_s``)."""
        return {
            "compute": self.compute_s,
            "tp_comm_exposed": self.tp_comm_exposed_s,
            "cp_comm_exposed": self.cp_comm_exposed_s,
            "ep_comm_exposed": self.ep_comm_exposed_s,
            "pp_comm_exposed": self.pp_comm_exposed_s,
            "pp_bubble": self.pp_bubble_s,
            "dp_comm_exposed": self.dp_comm_exposed_s,
            "optimizer": self.optimizer_s,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    """Predicted performance of one scenario (fields of the output contract, SI units).

    ``mfu`` divides model FLOPs by the dense peak of the chosen precision; ``hfu`` counts
    recomputed FLOPs too. ``time_to_train_s`` is None when the scenario gives neither
    ``training.total_tokens`` nor ``training.train_iters``.
    """

    iteration_time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    model_flops_per_iteration: float
    model_tflops_per_gpu: float
    mfu: float
    hfu: float
    memory_per_gpu_bytes: float
    hbm_bytes: float
    fits_in_memory: bool
    breakdown: StepBreakdown
    memory: MemoryBreakdown
    time_to_train_s: float | None

    def to_dict(self, name: str | None) -> dict[str, Any]:
        """The JSON object of ``planner predict --json`` (plain floats, bools and None)."""
        mem = self.memory
        return {
            "name": name,
            "iteration_time_s": self.iteration_time_s,
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "model_flops_per_iteration": self.model_flops_per_iteration,
            "model_tflops_per_gpu": self.model_tflops_per_gpu,
            "mfu": self.mfu,
            "hfu": self.hfu,
            "memory_per_gpu_bytes": self.memory_per_gpu_bytes,
            "fits_in_memory": self.fits_in_memory,
            "breakdown_s": self.breakdown.as_dict(),
            "memory_breakdown_bytes": {
                "weights": mem.weights_bytes,
                "gradients": mem.gradients_bytes,
                "optimizer": mem.optimizer_bytes,
                "activations": mem.activations_bytes,
                "overhead": mem.overhead_bytes,
            },
            "time_to_train_s": self.time_to_train_s,
        }


_DEFAULT_EFFICIENCY = DefaultEfficiency()


def _sixteen_bit(scenario: Scenario) -> Precision:
    gpu = scenario.hardware.gpu
    return Precision.BF16 if gpu.supports(Precision.BF16) else Precision.FP16


def _compute_time_s(scenario: Scenario, eff: EfficiencyModel) -> float:
    m, par, hw = scenario.model, scenario.parallelism, scenario.hardware
    flops = iteration_flops(m, num_sequences=par.global_batch_size, recompute=par.recompute)
    n = hw.num_gpus
    prec = par.precision
    half = _sixteen_bit(scenario)
    gemm_rate = hw.gpu.peak_flop_per_s(prec) * eff.compute_efficiency(scenario, precision=prec)
    half_rate = hw.gpu.peak_flop_per_s(half) * eff.compute_efficiency(scenario, precision=half)
    gemm = (flops.gemm + flops.recompute_gemm) / n / gemm_rate
    rest = (flops.attention_core + flops.recompute_attention_core + flops.lm_head) / n / half_rate
    floor = par.num_microbatches * (m.num_layers / par.pipeline_parallel) * KERNEL_FLOOR_S_PER_LAYER
    return max(gemm + rest, floor)


def _bandwidth(scenario: Scenario, eff: EfficiencyModel, span: int) -> float:
    hw = scenario.hardware
    scale_up = span <= hw.nvlink_domain_size
    return hw.bandwidth_for_group_bytes_per_s(span) * eff.network_efficiency(
        scenario, scale_up=scale_up
    )


def _tp_time_s(scenario: Scenario, eff: EfficiencyModel) -> float:
    m, par = scenario.model, scenario.parallelism
    tp = par.tensor_parallel
    if tp == 1:
        return 0.0
    bw = _bandwidth(scenario, eff, tp)
    act = par.micro_batch_size * (m.seq_length / par.context_parallel) * m.hidden_size
    act_bytes = act * ACTIVATION_BYTES
    if par.sequence_parallel:
        per_pair = coll.all_gather_time_s(act_bytes, tp, bw) + coll.reduce_scatter_time_s(
            act_bytes, tp, bw
        )
    else:
        per_pair = coll.all_reduce_time_s(act_bytes, tp, bw)
    passes = 4.0 + (2.0 if par.recompute is Recompute.FULL else 0.0)  # fwd 2, bwd 2, recompute 2
    layers = m.num_layers / par.pipeline_parallel
    return par.num_microbatches * layers * passes * per_pair


def _cp_time_s(scenario: Scenario, eff: EfficiencyModel) -> float:
    m, par = scenario.model, scenario.parallelism
    cp = par.context_parallel
    if cp == 1:
        return 0.0
    bw = _bandwidth(scenario, eff, par.tensor_parallel * cp)
    kv_bytes = 2.0 * par.micro_batch_size * (m.seq_length / cp) * m.kv_width * ACTIVATION_BYTES
    kv_bytes /= par.tensor_parallel
    per_layer = 3.0 * (cp - 1) * coll.p2p_time_s(kv_bytes, bw)  # fwd K,V + bwd K,V and dK,dV
    layers = m.num_layers / par.pipeline_parallel
    return par.num_microbatches * layers * per_layer


def _ep_time_s(scenario: Scenario, eff: EfficiencyModel) -> float:
    m, par = scenario.model, scenario.parallelism
    ep = par.expert_parallel
    if ep == 1 or not m.is_moe:
        return 0.0
    span = par.tensor_parallel * par.context_parallel * ep
    bw = _bandwidth(scenario, eff, span)
    tokens = par.micro_batch_size * m.seq_length / par.context_parallel / par.tensor_parallel
    a2a_bytes = tokens * m.moe_router_topk * m.hidden_size * ACTIVATION_BYTES
    per_layer = 4.0 * coll.all_to_all_time_s(a2a_bytes, ep, bw)  # dispatch+combine, fwd+bwd
    moe_layers = m.num_moe_layers / par.pipeline_parallel
    return par.num_microbatches * moe_layers * per_layer


def _pp_p2p_time_s(scenario: Scenario, eff: EfficiencyModel) -> float:
    m, par, hw = scenario.model, scenario.parallelism, scenario.hardware
    pp = par.pipeline_parallel
    if pp == 1:
        return 0.0
    bw = _bandwidth(scenario, eff, hw.num_gpus)
    act = par.micro_batch_size * (m.seq_length / par.context_parallel) * m.hidden_size
    send = coll.p2p_time_s(act * ACTIVATION_BYTES / par.tensor_parallel, bw)
    return 2.0 * (par.num_microbatches + pp - 1) * send


def _dp_time_s(scenario: Scenario, eff: EfficiencyModel) -> float:
    par = scenario.parallelism
    dense, expert = local_params(scenario)
    total = 0.0
    groups = (
        (dense, par.data_parallel * par.context_parallel),
        (expert, par.data_parallel * par.context_parallel // par.expert_parallel),
    )
    for params, n in groups:
        if n <= 1 or params == 0:
            continue
        span = par.tensor_parallel * n
        bw = _bandwidth(scenario, eff, span)
        grads = params * GRAD_REDUCE_BYTES
        weights = params * PARAM_GATHER_BYTES
        if par.zero_stage == 0:
            total += coll.all_reduce_time_s(grads, n, bw)
        else:
            total += coll.reduce_scatter_time_s(grads, n, bw) + coll.all_gather_time_s(
                weights, n, bw
            )
        if par.zero_stage == 3:
            total += 2.0 * coll.all_gather_time_s(weights, n, bw)
    return total


def _optimizer_time_s(scenario: Scenario) -> float:
    par, hw = scenario.parallelism, scenario.hardware
    dense, expert = local_params(scenario)
    d = par.data_parallel * par.context_parallel
    if par.zero_stage >= 1:
        dense /= d
        expert /= max(1, d // par.expert_parallel)
    return (
        ADAM_HBM_BYTES_PER_PARAM
        * (dense + expert)
        / (hw.gpu.hbm_bandwidth_bytes_per_s * HBM_EFFICIENCY)
    )


def predict(scenario: Scenario, efficiency: EfficiencyModel | None = None) -> Prediction:
    """Predict iteration time, throughput, MFU and peak memory of ``scenario``.

    ``efficiency`` defaults to ``DefaultEfficiency()``. Pure and cheap (microseconds); never
    raises for a valid ``Scenario``. Works for tiny models (every term stays finite and > 0).
    """
    eff = efficiency if efficiency is not None else _DEFAULT_EFFICIENCY
    m, par, hw = scenario.model, scenario.parallelism, scenario.hardware
    mb = par.num_microbatches

    compute = _compute_time_s(scenario, eff)
    tp = _tp_time_s(scenario, eff) * (1.0 - eff.comm_overlap(scenario, CommKind.TENSOR))
    cp = _cp_time_s(scenario, eff) * (1.0 - eff.comm_overlap(scenario, CommKind.CONTEXT))
    ep = _ep_time_s(scenario, eff) * (1.0 - eff.comm_overlap(scenario, CommKind.EXPERT))
    pp_comm = _pp_p2p_time_s(scenario, eff)
    busy = compute + tp + cp + ep
    bubble = (par.pipeline_parallel - 1) / (par.virtual_pipeline * mb) * busy
    dp_raw = _dp_time_s(scenario, eff)
    window = busy / mb  # the last microbatch's forward+backward can hide the gradient reduction
    overlap = eff.comm_overlap(scenario, CommKind.DATA)
    dp = max(dp_raw * (1.0 - overlap), dp_raw - window)
    optimizer = _optimizer_time_s(scenario)
    breakdown = StepBreakdown(
        compute_s=compute,
        tp_comm_exposed_s=tp,
        cp_comm_exposed_s=cp,
        ep_comm_exposed_s=ep,
        pp_comm_exposed_s=pp_comm,
        pp_bubble_s=bubble,
        dp_comm_exposed_s=dp,
        optimizer_s=optimizer,
    )
    iteration = breakdown.total_s
    tokens = float(scenario.tokens_per_iteration)
    flops = iteration_flops(m, num_sequences=par.global_batch_size, recompute=par.recompute)
    peak = hw.gpu.peak_flop_per_s(par.precision)
    memory = memory_per_gpu(scenario)
    tokens_per_s = tokens / iteration
    training = scenario.training
    if training.total_tokens is not None:
        time_to_train: float | None = training.total_tokens / tokens_per_s
    elif training.train_iters is not None:
        time_to_train = training.train_iters * iteration
    else:
        time_to_train = None
    result = Prediction(
        iteration_time_s=iteration,
        tokens_per_s=tokens_per_s,
        tokens_per_s_per_gpu=tokens_per_s / hw.num_gpus,
        model_flops_per_iteration=flops.model_total,
        model_tflops_per_gpu=flops.model_total / iteration / hw.num_gpus / 1e12,
        mfu=flops.model_total / (iteration * hw.num_gpus * peak),
        hfu=flops.hardware_total / (iteration * hw.num_gpus * peak),
        memory_per_gpu_bytes=memory.total_bytes,
        hbm_bytes=hw.gpu.hbm_bytes,
        fits_in_memory=memory.total_bytes <= hw.gpu.hbm_bytes,
        breakdown=breakdown,
        memory=memory,
        time_to_train_s=time_to_train,
    )
    return result
