"""PyTorch Adam's implementation as a scenario field (``parallelism.optimizer_implementation``):
the ``foreach`` step's temporaries in the memory model, the profile's default, validation and
the explorer."""

from __future__ import annotations

from typing import Any

import pytest

from planner.errors import SpecError
from planner.perf import memory_per_gpu
from planner.perf.parameters import total_params
from planner.perf.step import predict
from planner.scenario import parse_scenario
from planner.specs import Scenario
from tests.perf.test_optimizer_dtypes import assert_carried_into_candidates

DP = 8
SMALL: dict[str, Any] = {"recompute": "full", "zero_stage": 3}
"""Short sequences under full recompute: the foreach step's temporaries outweigh the
activations, so they set the peak."""


def _scenario(framework: str = "torchtitan", *, tp: int = 1, **par: Any) -> Scenario:
    return parse_scenario(
        {
            "model": {"preset": "llama3-8b", "seq_length": 128},
            "hardware": {"gpu": "h100-sxm", "num_gpus": tp * DP},
            "parallelism": {
                "tensor_parallel": tp,
                "sequence_parallel": tp > 1,
                "micro_batch_size": 1,
                "global_batch_size": DP,
                **SMALL,
                **par,
            },
            "training": {"framework": framework},
        }
    )


@pytest.mark.parametrize(
    ("framework", "tp", "profile_choice"),
    [
        ("torchtitan", 1, "fused"),  # optimizer.implementation's default since 6e4988550
        ("automodel", 1, "foreach"),
        ("automodel", 2, "for_loop"),  # Automodel passes foreach=False at tensor_parallel > 1
        ("megatron", 1, "fused"),
        ("fsdp", 1, "fused"),
    ],
)
def test_absent_reads_the_framework_profile(framework: str, tp: int, profile_choice: str) -> None:
    """Without the field a scenario predicts as the profile says; stating the implementation
    the profile stands for changes nothing."""
    absent = _scenario(framework, tp=tp)
    stated = _scenario(framework, tp=tp, optimizer_implementation=profile_choice)
    assert absent.parallelism.optimizer_implementation is None
    assert memory_per_gpu(absent) == memory_per_gpu(stated)
    assert predict(absent) == predict(stated)


def test_only_foreach_holds_the_square_root_list() -> None:
    """torchtitan's fp32 shards: foreach allocates ``sqrt(exp_avg_sq)`` at 4 bytes per owned
    parameter (the peak, above the activations here); fused and for-loop none, so the peak
    drops by exactly those bytes (the activations being freed the same)."""
    params = total_params(_scenario().model)
    foreach = memory_per_gpu(_scenario(optimizer_implementation="foreach"))
    assert foreach.optimizer_step_bytes == pytest.approx(4 * params / DP)
    assert foreach.optimizer_step_bytes > foreach.activations_bytes
    for name in ("fused", "for_loop"):
        other = memory_per_gpu(_scenario(optimizer_implementation=name))
        assert other.optimizer_step_bytes == 0.0
        assert other.weights_bytes == foreach.weights_bytes
        assert other.optimizer_bytes == foreach.optimizer_bytes
        assert foreach.total_bytes - other.total_bytes == pytest.approx(
            foreach.optimizer_step_bytes - foreach.activations_bytes
        )


def test_a_stated_foreach_holds_at_every_tensor_parallel_degree() -> None:
    """Automodel turns foreach off at ``tensor_parallel`` > 1 unless the config passes it;
    stated, the list is counted there too, at the bf16 second moment's 2 bytes."""
    params = total_params(_scenario().model)
    stated = memory_per_gpu(_scenario("automodel", tp=2, optimizer_implementation="foreach"))
    assert memory_per_gpu(_scenario("automodel", tp=2)).optimizer_step_bytes == 0.0
    assert stated.optimizer_step_bytes == pytest.approx(2 * params / (2 * DP))


def test_the_list_takes_the_stated_second_moment_dtype() -> None:
    params = total_params(_scenario().model)
    m = memory_per_gpu(_scenario(optimizer_implementation="foreach", exp_avg_sq_dtype="bf16"))
    assert m.optimizer_step_bytes == pytest.approx(2 * params / DP)


@pytest.mark.parametrize("value", ["apex", "fused_adam", True])
def test_an_unknown_implementation_names_the_field_and_the_choices(value: object) -> None:
    with pytest.raises(SpecError, match=r"parallelism\.optimizer_implementation.*for_loop"):
        _scenario(optimizer_implementation=value)


def test_torchtitans_spelling_is_taken() -> None:
    """torchtitan writes ``for-loop``; the scenario format reads ``-`` as ``_``."""
    s = _scenario(optimizer_implementation="For-Loop")
    assert s.parallelism.optimizer_implementation == "for_loop"


def test_the_implementation_is_carried_into_every_candidate() -> None:
    """One value per explore document: each candidate keeps it, the sweep predicts as
    ``predict`` does, and the output states it."""
    doc: dict[str, Any] = {
        "model": {"preset": "llama3-8b", "seq_length": 1024},
        "hardware": {"gpu": "h100-sxm", "num_gpus": DP},
        "parallelism": {
            "global_batch_size": 32,
            "recompute": ["full"],
            "zero_stage": [1, 3],
            "optimizer_implementation": "fused",
        },
        "training": {"framework": "torchtitan"},
    }
    assert_carried_into_candidates(doc, {"optimizer_implementation": "fused"})
