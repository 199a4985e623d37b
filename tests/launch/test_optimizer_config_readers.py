"""The Megatron-Bridge and NeMo 2.0 readers read Megatron-Core's ``OptimizerConfig`` dtypes
(``use_precision_aware_optimizer``, ``main_params_dtype``, ``exp_avg_dtype``,
``exp_avg_sq_dtype``, ``store_param_remainders``) into the scenario's optimizer fields."""

from __future__ import annotations

import pytest

from planner.launch.readers.nemo import NEMO2_READER
from planner.launch.types import Facts
from tests.launch.test_megatron_bridge import _read as _read_bridge
from tests.launch.test_megatron_bridge import _runner
from tests.launch.test_nemo import _nemo
from tests.launch.test_nemo import _read as _read_nemo

FIELDS = ("main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype", "store_param_remainders")
AWARE = "use_precision_aware_optimizer=true"


def _bridge(*overrides: str) -> Facts:
    return _read_bridge(_runner("llama3_8b_pretrain_config", *overrides))


def _nemo2(*overrides: str) -> Facts:
    return _read_nemo(NEMO2_READER, _nemo("pretrain", "-f", "llama3_8b", *overrides))


def _fields(facts: Facts) -> tuple[object, ...]:
    return tuple(facts.get(f"parallelism.{name}") for name in FIELDS)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ((), (None, None, None, None)),  # the framework's fp32 master and moments
        # bf16_mixed keeps MixedPrecisionConfig's fp8_recipe tensorwise, which setup copies
        # over the OptimizerConfig before finalize: Megatron-Core keeps the whole fp32 master
        ((f"optimizer.{AWARE}",), ("fp32", "fp32", "fp32", False)),
        (
            (
                f"optimizer.{AWARE}",
                "optimizer.exp_avg_dtype=bf16",
                "optimizer.exp_avg_sq_dtype=torch.bfloat16",
            ),
            ("fp32", "bf16", "bf16", False),
        ),
        (
            (f"optimizer.{AWARE}", "optimizer.main_params_dtype=float16"),
            ("fp16", "fp32", "fp32", None),
        ),
        # a delayed-scaling recipe: Transformer Engine keeps the master as int16 remainders
        (
            (f"optimizer.{AWARE}", "mixed_precision=bf16_with_fp8_delayed_scaling_mixed"),
            ("fp32", "fp32", "fp32", True),
        ),
        (
            (
                f"optimizer.{AWARE}",
                "mixed_precision=bf16_with_fp8_delayed_scaling_mixed",
                "optimizer.store_param_remainders=false",
            ),
            ("fp32", "fp32", "fp32", False),
        ),
    ],
)
def test_megatron_bridge_reads_the_optimizer_config(
    overrides: tuple[str, ...], expected: tuple[object, ...]
) -> None:
    facts = _bridge(*overrides)
    assert _fields(facts) == expected
    if overrides:
        assert "optimizer" in facts.values["parallelism.main_params_dtype"].source


def test_megatron_bridge_notes_what_it_does_not_read() -> None:
    """Lower dtypes without the precision-aware optimizer (Megatron-Core asserts fp32), FP8
    names the config cannot hand to FusedAdam, and host-memory offload: nothing stated."""
    plain = _bridge("optimizer.exp_avg_dtype=bf16")
    assert _fields(plain) == (None, None, None, None)
    assert any("can only be fp32" in note for note in plain.notes)
    fp8 = _bridge(f"optimizer.{AWARE}", "optimizer.exp_avg_dtype=fp8")
    assert _fields(fp8) == (None, None, None, None)
    assert any("torch.uint8" in note for note in fp8.notes)
    offload = _bridge(f"optimizer.{AWARE}", "optimizer.optimizer_cpu_offload=true")
    assert _fields(offload) == (None, None, None, None)
    assert any("host memory" in note for note in offload.notes)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ((), (None, None, None, None)),
        # NeMo-Run builds the OptimizerConfig before the precision plugin edits it: fp8_recipe
        # None, so Transformer Engine keeps the fp32 master of bf16 weights as remainders
        ((f"optim.config.{AWARE.replace('true', 'True')}",), ("fp32", "fp32", "fp32", True)),
        (
            (
                "optim.config.use_precision_aware_optimizer=True",
                "optim.config.exp_avg_dtype='bf16'",
                "optim.config.exp_avg_sq_dtype='bf16'",
                "optim.config.store_param_remainders=False",
            ),
            ("fp32", "bf16", "bf16", False),
        ),
        (
            (
                "optim.config.use_precision_aware_optimizer=True",
                "optim.config.fp8_recipe='tensorwise'",
            ),
            ("fp32", "fp32", "fp32", False),
        ),
    ],
)
def test_nemo2_reads_the_optimizer_config(
    overrides: tuple[str, ...], expected: tuple[object, ...]
) -> None:
    facts = _nemo2(*overrides)
    assert _fields(facts) == expected
