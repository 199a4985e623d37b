"""The Megatron-Bridge and NeMo 2.0 readers read Megatron-Core's ``OptimizerConfig`` dtypes
(``use_precision_aware_optimizer``, ``main_params_dtype``, ``exp_avg_dtype``,
``exp_avg_sq_dtype``, ``store_param_remainders``) into the scenario's optimizer fields."""

from __future__ import annotations

from dataclasses import replace

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


FSDP = ("ddp.use_megatron_fsdp=true", f"optimizer.{AWARE}", "optimizer.exp_avg_dtype=bf16")


def _bridge_in(release: str, *overrides: str) -> Facts:
    """The Megatron-Bridge runner started by pyxis in the NeMo Framework container ``release``."""
    inner = _runner("llama3_8b_pretrain_config", *overrides)
    image = f"nvcr.io#nvidia/nemo:{release}"
    return _read_bridge(replace(inner, launcher="srun", launcher_args={"container_image": image}))


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        # the newest Megatron-Core: FusedAdam keeps no master, Megatron-FSDP's fp32 main weights
        # are it, whole
        (FSDP, ("fp32", "bf16", "fp32", False)),
        (
            (*FSDP, "optimizer.main_params_dtype=float16"),  # not Megatron-FSDP's master
            ("fp32", "bf16", "fp32", False),
        ),
        ((*FSDP, "ddp.megatron_fsdp_main_params_dtype=fp16"), ("fp16", "bf16", "fp32", None)),
        # a bf16 main weight buffer beside the bf16 weights: no scenario dtype
        ((*FSDP, "ddp.megatron_fsdp_main_params_dtype=bf16"), (None, None, None, None)),
    ],
)
def test_megatron_bridge_under_megatron_fsdp_reads_its_main_weights_as_the_master(
    overrides: tuple[str, ...], expected: tuple[object, ...]
) -> None:
    facts = _bridge(*overrides)
    assert _fields(facts) == expected
    assert any("names no scenario dtype" in note for note in facts.notes) is (expected[0] is None)


@pytest.mark.parametrize(
    ("release", "expected"),
    [
        # Megatron-Bridge 0.2 clears preserve_fp32_weights: the OptimizerConfig's master
        ("25.11", ("fp16", "bf16", "fp32", None)),
        ("26.02", (None, None, None, None)),  # Megatron-FSDP's fp32 copy and FusedAdam's
        ("26.04", (None, None, None, None)),
        ("26.06", ("fp32", "bf16", "fp32", False)),
    ],
)
def test_megatron_bridge_under_megatron_fsdp_follows_the_containers_release(
    release: str, expected: tuple[object, ...]
) -> None:
    facts = _bridge_in(release, *FSDP, "optimizer.main_params_dtype=float16")
    assert _fields(facts) == expected
    both = any("FusedAdam its own master" in note for note in facts.notes)
    assert both is (expected[0] is None)


def test_nemo2_under_megatron_fsdp_leaves_the_optimizer_dtypes_to_the_framework() -> None:
    """NeMo 2.0 keeps Megatron-FSDP's fp32 main weights beside FusedAdam's master in every
    container that ships it: nothing read, noted."""
    aware = "optim.config.use_precision_aware_optimizer=True"
    facts = _nemo2("trainer.strategy.ddp.use_megatron_fsdp=True", aware)
    assert _fields(facts) == (None, None, None, None)
    assert any("FusedAdam its own master" in note for note in facts.notes)
    assert _fields(_nemo2(aware)) == ("fp32", "fp32", "fp32", True)
