"""NeMo Automodel's DeepEP experts: per-expert cuBLAS GEMMs on four streams, issued from
per-expert token counts read on the host (``planner.perf.frameworks``, ``automodel``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from planner.perf.batch import ScenarioArrays
from planner.perf.frameworks import profile_of
from planner.scenario import parse_scenario
from planner.specs.scenario import Framework
from tests.perf.test_moe_features import _gpu_only, _moe_forward_s


def _automodel_qwen3_30b(expert_parallel: int, micro_batch_size: int) -> ScenarioArrays:
    """Qwen3-30B-A3B (128 experts) as Automodel's benchmark recipe runs it: DeepEP, the
    round-robin gate, grouped GEMM, on H100s (one node, or as many GPUs as experts' ranks)."""
    num_gpus = max(8, expert_parallel)
    model: dict[str, Any] = {
        "preset": "qwen3-30b-a3b",
        "moe_token_dispatcher_type": "flex",
        "moe_grouped_gemm": True,
        "moe_router_round_robin": True,
    }
    scenario = parse_scenario(
        {
            "model": model,
            "hardware": {"gpu": "h100-sxm", "num_gpus": num_gpus},
            "parallelism": {
                "expert_parallel": expert_parallel,
                "micro_batch_size": micro_batch_size,
                "global_batch_size": num_gpus * micro_batch_size,
                "zero_stage": 3,
            },
            "training": {"framework": "automodel"},
        }
    )
    return ScenarioArrays.from_scenarios([scenario])


def test_automodel_experts_fill_the_sms_four_experts_at_a_time() -> None:
    """``grouped_gemm.ops.gmm`` on sm_90 is one cuBLAS GEMM per expert on 4 streams: with 128
    local experts a wave holds the tiles of 4 of them, not of all 128 as one grouped kernel's
    would; with 4 local experts (expert parallel 32) the two are the same."""
    assert profile_of(Framework.AUTOMODEL).grouped_gemm_streams == 4.0
    ratio = {}
    for expert_parallel in (1, 32):
        streams = _gpu_only(_automodel_qwen3_30b(expert_parallel, micro_batch_size=1))
        one_kernel = replace(streams, grouped_gemm_streams=np.zeros(1))
        ratio[expert_parallel] = _moe_forward_s(streams) / _moe_forward_s(one_kernel)
    assert ratio[1] > 1.05
    assert ratio[32] == pytest.approx(1.0)


def test_automodel_moe_forward_waits_for_the_host_at_small_micro_batches() -> None:
    """The host reads the per-expert counts before it issues the experts' GEMMs, one launch
    per local expert: at micro-batch 1 with 16 local experts the layer's forward takes the
    host's issue time, at micro-batch 8 the GPU's work hides it."""
    profile = profile_of(Framework.AUTOMODEL)
    host = profile.moe_host_forward_s + 16 * profile.moe_host_expert_forward_s
    small = _automodel_qwen3_30b(8, micro_batch_size=1)
    assert _moe_forward_s(_gpu_only(small)) < host
    assert _moe_forward_s(small) == pytest.approx(host)
    large = _automodel_qwen3_30b(8, micro_batch_size=8)
    assert _moe_forward_s(large) == pytest.approx(_moe_forward_s(_gpu_only(large)))
