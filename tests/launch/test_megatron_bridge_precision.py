"""Megatron-Bridge's mixed precision as the launches of tests/data/launch/megatron_bridge/
(precision/*.sbatch, configs/precision_*.yaml) set it: a named recipe resolved to its fields, a
recipe function's own MixedPrecisionConfig overridden field by field, a name over fields, a key
under a name, a name no release registers."""

from __future__ import annotations

import pytest

from planner.launch.describe import LaunchDescription, describe_launch
from planner.launch.readers.megatron_bridge import recipe_precision
from planner.launch.types import Launch
from planner.scenario import parse_scenario
from tests.launch import reader_support as support

ROOT = "/job"
DATA = support.DATA / "megatron_bridge"


def _describe(script: str) -> LaunchDescription:
    text = (DATA / "precision" / script).read_text(encoding="utf-8")
    files = support.data_files("megatron_bridge", ROOT)
    return describe_launch(
        Launch(batch_script=text, work_dir=ROOT), files, gpu="h100-sxm", predict=False
    )


def _parallelism(description: LaunchDescription) -> dict[str, object]:
    assert description.described_by == "megatron_bridge", description.error
    section = description.scenario["parallelism"]
    assert isinstance(section, dict)
    return section


def test_a_recipe_a_release_does_not_register_is_noted() -> None:
    description = _run_recipe("qwen3_8b_pretrain_config", "mixed_precision=bf16_with_nvfp4_mixed")
    assert _parallelism(description)["precision"] == "nvfp4"
    assert any(
        "'bf16_with_nvfp4_mixed' is not a recipe name" in n
        and "container 25.09" in n
        and "25.11" not in n
        for n in description.notes
    )
    current = _describe("named.sbatch")
    assert not any("is not a recipe name" in n for n in current.notes)


def test_a_named_recipe_sets_every_precision_field_the_scenario_holds() -> None:
    description = _describe("named.sbatch")
    parallelism = _parallelism(description)
    assert parallelism["precision"] == "fp8"
    assert parallelism["fp8_recipe"] == "tensorwise"
    assert parallelism["fp8_param_gather"] is True
    # MixedPrecisionConfig.setup copies the recipe's value over the ddp override
    assert parallelism["grad_reduce_in_fp32"] is True
    source = description.provenance["parallelism.fp8_param_gather"]
    assert "bf16_with_fp8_current_scaling_mixed" in source
    assert "training/mixed_precision.py" in source
    assert "container 25.11" in source
    assert any("first 1 and last 1 transformer layers run in 16" in n for n in description.notes)
    assert parse_scenario(description.scenario).parallelism.fp8_param_gather is True


def test_overrides_edit_the_config_a_recipe_function_builds() -> None:
    parallelism = _parallelism(_describe("built_fields.sbatch"))
    assert parallelism["precision"] == "fp8"
    assert parallelism["fp8_recipe"] == "blockwise"
    assert parallelism["grad_reduce_in_fp32"] is False
    # bf16_mixed() keeps MixedPrecisionConfig's fp8_param_gather false
    assert parallelism["fp8_param_gather"] is False


def test_a_name_after_a_field_replaces_the_whole_config() -> None:
    description = _describe("name_last.sbatch")
    parallelism = _parallelism(description)
    # the hyphenated name is the recipe's (get_mixed_precision_config, v0.2.0 on)
    assert parallelism["precision"] == "mxfp8"
    assert parallelism["fp8_recipe"] == "mxfp8"
    assert parallelism["fp8_param_gather"] is True
    assert "bf16-with-mxfp8-mixed" in description.provenance["parallelism.fp8_param_gather"]
    assert any(
        "'bf16-with-mxfp8-mixed' is not a recipe name" in n and "v0.1.0rc3 (container 25.09)" in n
        for n in description.notes
    )


def test_a_key_under_a_name_is_refused_and_noted() -> None:
    description = _describe("key_under_name.sbatch")
    parallelism = _parallelism(description)
    assert parallelism["precision"] == "fp8"
    assert parallelism["fp8_recipe"] == "delayed"
    assert parallelism["fp8_param_gather"] is True  # the recipe's; the override never applies
    assert any(
        "mixed_precision.fp8_param_gather=false" in n and "Could not override" in n
        for n in description.notes
    )


def test_a_key_deleted_under_a_name_is_refused_and_noted() -> None:
    """``~mixed_precision.<key>`` under a recipe name: Hydra finds no key to delete ("Could
    not delete"); the recipe's value stays."""
    description = _run_recipe(
        "qwen3_8b_pretrain_config",
        "mixed_precision=bf16_with_fp8_delayed_scaling_mixed",
        "~mixed_precision.fp8_param_gather",
    )
    assert _parallelism(description)["fp8_param_gather"] is True
    assert any(
        "'~mixed_precision.fp8_param_gather'" in n and "Could not delete" in n
        for n in description.notes
    )
    assert not any("Could not override" in n for n in description.notes)


def test_an_unknown_recipe_name_is_noted_not_raised() -> None:
    description = _describe("unknown.sbatch")
    parallelism = _parallelism(description)
    assert "fp8_param_gather" not in parallelism
    assert "parallelism.precision" not in description.provenance
    assert any("'bf16_with_fp6_mixed' is not a Megatron-Bridge" in n for n in description.notes)


def test_a_mapping_where_the_recipe_holds_a_name_is_noted() -> None:
    files = support.data_files("megatron_bridge", ROOT)
    script = (
        "#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gpus-per-node=8\n"
        "torchrun --nproc-per-node=8 examples/recipes/llama/pretrain_llama3_8b.py "
        "--config-file configs/precision_mapping.yaml\n"
    )
    description = describe_launch(
        Launch(batch_script=script, work_dir=ROOT), files, gpu="h100-sxm", predict=False
    )
    parallelism = _parallelism(description)
    # read as a MixedPrecisionConfig of the mapping's keys: fp8, the dataclass's tensorwise
    assert parallelism["precision"] == "fp8"
    assert parallelism["fp8_recipe"] == "tensorwise"
    assert "MixedPrecisionConfig default" in description.provenance["parallelism.fp8_recipe"]
    assert any("cannot finalize" in n for n in description.notes)


@pytest.mark.parametrize(
    ("name", "precision", "recipe", "gather", "reduce"),
    [
        ("bf16_mixed", None, "tensorwise", False, True),
        ("fp16_with_fp8_delayed_scaling_mixed", "hybrid", "delayed", True, False),
        ("bf16_with_fp8_subchannel_scaling_mixed", "hybrid", "blockwise", False, True),
        ("nanov2_bf16_with_fp8_current_scaling_mixed", "hybrid", "blockwise", True, True),
        ("bf16_with_nvfp4_mixed", None, "tensorwise", False, True),
    ],
)
def test_recipe_fields_follow_the_base_recipe(
    name: str, precision: str | None, recipe: str, gather: bool, reduce: bool
) -> None:
    values = recipe_precision(name)
    assert values is not None
    assert (values["fp8"], values["fp8_recipe"], values["fp8_param_gather"]) == (
        precision,
        recipe,
        gather,
    )
    assert values["grad_reduce_in_fp32"] is reduce
    assert recipe_precision("bf16_with_fp6_mixed") is None


def _run_recipe(recipe: str, *overrides: str) -> LaunchDescription:
    script = (
        "#!/bin/bash\n#SBATCH --nodes=16\n#SBATCH --gpus-per-node=8\n"
        f"srun python scripts/training/run_recipe.py --recipe {recipe} {' '.join(overrides)}\n"
    )
    return describe_launch(
        Launch(batch_script=script, work_dir=ROOT),
        support.data_files("megatron_bridge", ROOT),
        gpu="h100-sxm",
        predict=False,
    )


def test_a_key_added_under_a_name_applies_over_the_recipe_functions_own_config() -> None:
    """``++`` puts the key in a mapping in place of the name, which ``apply_overrides`` applies
    over the recipe function's own precision config: its ``bf16_mixed()`` fields where it built
    one; a name there cannot take a mapping (the script stops)."""
    overrides = (
        "mixed_precision=bf16_with_fp8_delayed_scaling_mixed",
        "++mixed_precision.grad_reduce_in_fp32=false",
    )
    built = _run_recipe("llama3_70b_pretrain_config", *overrides)
    parallelism = _parallelism(built)
    assert parallelism["precision"] == "bf16"
    assert parallelism["grad_reduce_in_fp32"] is False
    assert "fp8_recipe" not in parallelism
    assert any("applied over the recipe's own bf16_mixed()" in n for n in built.notes)
    named = _run_recipe("qwen3_8b_pretrain_config", *overrides)
    assert _parallelism(named)["grad_reduce_in_fp32"] is False
    assert any("cannot finalize" in n for n in named.notes)


@pytest.mark.parametrize(
    ("name", "precision", "recipe"),
    [
        ("fp16_with_fp8_delayed_scaling_mixed", "fp8", "delayed"),
        ("fp16_with_mxfp8_mixed", "mxfp8", "mxfp8"),
        ("fp16_with_fp8_current_scaling_mixed", "fp8", "tensorwise"),
        ("fp16_with_fp8_subchannel_scaling_mixed", "fp8", "blockwise"),
    ],
)
def test_an_fp16_base_under_fp8_gemms_is_read_as_the_gemms_precision_and_noted(
    name: str, precision: str, recipe: str
) -> None:
    description = _run_recipe("qwen3_8b_pretrain_config", f"mixed_precision={name}")
    parallelism = _parallelism(description)
    assert parallelism["precision"] == precision
    assert parallelism["fp8_recipe"] == recipe
    # fp16_mixed()'s 16-bit gradient reduction survives the fp8 fields
    assert parallelism["grad_reduce_in_fp32"] is False
    noted = [n for n in description.notes if "fp16 parameters and activations" in n]
    assert len(noted) == 1
    assert f"with {precision} GEMMs" in noted[0]
    assert "loss scaling" in noted[0]
    assert name in noted[0]


def test_fp16_alone_and_bf16_under_fp8_carry_no_fp16_base_note() -> None:
    fp16 = _run_recipe("qwen3_8b_pretrain_config", "mixed_precision=fp16_mixed")
    assert _parallelism(fp16)["precision"] == "fp16"
    bf16 = _run_recipe(
        "qwen3_8b_pretrain_config", "mixed_precision=bf16_with_fp8_delayed_scaling_mixed"
    )
    assert _parallelism(bf16)["precision"] == "fp8"
    for description in (fp16, bf16):
        assert not any("fp16 parameters and activations" in n for n in description.notes)
