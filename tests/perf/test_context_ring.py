"""Transformer Engine's context-parallel ring: its off-diagonal steps run unmasked kernels."""

from __future__ import annotations

import pytest

from planner.perf import DefaultEfficiency
from planner.perf.attention import CAUSAL_TAIL_FWD, QUERY_TILE
from planner.perf.batch import ScenarioArrays
from planner.perf.operators import operator_times
from planner.scenario import parse_scenario
from planner.specs import Scenario


def _scenario(framework: str, *, seq: int, cp: int, tp: int = 8) -> Scenario:
    doc = {
        "model": {"preset": "llama3-8b", "seq_length": seq},
        "hardware": {"gpu": "h100-sxm", "num_gpus": tp * cp},
        "parallelism": {
            "tensor_parallel": tp,
            "context_parallel": cp,
            "micro_batch_size": 1,
            "global_batch_size": 8,
        },
        "training": {"framework": framework},
    }
    return parse_scenario(doc)


def _attention_forward_s(s: Scenario) -> float:
    a = ScenarioArrays.from_scenario(s)
    return float(operator_times(a, DefaultEfficiency()).dense_recompute_s)


def _seq_eff(keys: float) -> float:
    half = DefaultEfficiency().constants["attention_seq_half"]
    return keys / (keys + half)


def test_te_ring_off_diagonal_steps_run_unmasked() -> None:
    """Megatron-Core + TE (``cp_comm_type`` p2p, ``AttnFuncWithCPAndKVP2P``): of the ``c``
    equal steps one is causal, ``c - 1`` unmasked, which have no causal grid tail; CP 4 over
    32k tokens does 4x the work of CP 1 over its 8k local tokens, in less than 4x the time."""
    cp, local = 4, 8192
    long = _attention_forward_s(_scenario("megatron", seq=cp * local, cp=cp))
    short = _attention_forward_s(_scenario("megatron", seq=local, cp=1))
    n, sms, tiles, alpha = 32 / 8, 132, local / QUERY_TILE, CAUSAL_TAIL_FWD
    causal = 1 + 2 * alpha * sms / (n * (tiles + 1))
    unmasked = 1 + 0.5 * alpha * sms / n * (3 / tiles)
    ring = (1 + (cp - 1) * unmasked / causal) / cp
    one_kernel = cp * _seq_eff(local) / _seq_eff(cp * local)  # the work, at the key length's rate
    assert long / short == pytest.approx(one_kernel * ring, rel=1e-9)
    assert long / short < 0.95 * one_kernel


def test_other_cp_implementations_keep_one_causal_kernel() -> None:
    """torchtitan's ring attention over FlashAttention-2 (no fused attention) is not TE's: its
    rate is the causal kernel's, as before."""
    cp, local = 4, 8192
    long = _attention_forward_s(_scenario("torchtitan", seq=cp * local, cp=cp))
    short = _attention_forward_s(_scenario("torchtitan", seq=local, cp=1))
    assert long / short == pytest.approx(cp * _seq_eff(local) / _seq_eff(cp * local), rel=1e-9)
