"""LLaMA-Factory ``pure_bf16``: bf16 weights updated in place, bf16 moments and gradients."""

from __future__ import annotations

from planner.launch.readers.llamafactory import READER
from planner.launch.types import Facts
from tests.launch import reader_support as support

JOB = "/jobs/llamafactory"
FIELDS = ("main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype", "grad_reduce_in_fp32")


def _read(*args: str) -> Facts:
    return support.read_program(
        READER,
        "llamafactory",
        JOB,
        "llamafactory-cli",
        *args,
        env={"FORCE_TORCHRUN": "1"},
        launcher="",
        allocation=support.allocation(8, 1, 8),
    )


def test_pure_bf16_under_fsdp_keeps_no_master_and_bf16_moments() -> None:
    facts = _read("train", "configs/pretrain_fp8.yaml", "fp8=false", "pure_bf16=true")
    assert facts.get("parallelism.precision") == "bf16"
    assert facts.get("training.framework") == "fsdp"
    assert tuple(facts.get(f"parallelism.{f}") for f in FIELDS) == ("bf16", "bf16", "bf16", False)
    assert facts.values["parallelism.main_params_dtype"].source == "override: pure_bf16=true"


def test_autocast_bf16_keeps_the_frameworks_fp32_master() -> None:
    facts = _read("train", "configs/pretrain_fp8.yaml", "fp8=false")
    assert facts.get("parallelism.precision") == "bf16"
    assert not any(facts.has(f"parallelism.{f}") for f in FIELDS)


def test_pure_bf16_under_deepspeed_is_only_noted() -> None:
    facts = _read("train", "configs/full_zero2.yaml", "fp16=false", "pure_bf16=true")
    assert facts.get("training.framework") == "deepspeed"
    assert not facts.has("parallelism.main_params_dtype")
    assert any("pure_bf16 under DeepSpeed" in note for note in facts.notes)
