"""Megatron-LM's precision-aware optimizer flags as the scenario's optimizer dtypes: the
argument parser (``scenario_document_from_megatron_args``) and the launch reader."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from planner.launch.describe import describe_launch, finish
from planner.launch.readers.megatron import READER
from planner.launch.types import Facts, Invocation, Launch
from planner.perf import memory_per_gpu
from planner.perf.parameters import total_params
from planner.scenario import parse_scenario
from planner.scenario.megatron_args import scenario_document_from_megatron_args
from tests.launch import reader_support as support

GPT = (
    "pretrain_gpt.py --num-layers 2 --hidden-size 256 --num-attention-heads 4 "
    "--seq-length 512 --micro-batch-size 1 --global-batch-size 8 --train-iters 10 "
    "--use-distributed-optimizer --bf16"
)
AWARE = " --use-precision-aware-optimizer"


def _document(flags: str) -> dict[str, Any]:
    doc = scenario_document_from_megatron_args(f"{GPT} {flags}", num_gpus=8, gpu="h100-sxm")
    assert doc is not None
    return doc


def _read(flags: str, base: str = GPT) -> Facts:
    invocation = Invocation(
        program="pretrain_gpt.py",
        args=tuple(shlex.split(f"{base} {flags}")[1:]),
        cwd="/jobs/mlm",
        launcher="torchrun",
        where="job.sh:9",
    )
    files = support.data_files("megatron", "/jobs/mlm")
    facts = support.read(READER, invocation, files, given=support.allocation(8), invocations=())
    facts.set("hardware.num_gpus", 8, "launch")
    finish(facts)
    return facts


FIELDS = ("main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype", "store_param_remainders")


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ("", (None, None, None, None)),  # the framework's fp32 master and moments
        (AWARE, ("fp32", "fp32", "fp32", True)),  # TE FusedAdam keeps int16 remainders
        (
            AWARE + " --main-params-dtype fp16 --exp-avg-dtype bf16 --exp-avg-sq-dtype fp8",
            ("fp16", "bf16", "fp8", None),
        ),
        # FP8 current scaling: Megatron-Core keeps the fp32 master itself
        (AWARE + " --fp8-format hybrid --fp8-recipe tensorwise", ("fp32", "fp32", "fp32", False)),
        (AWARE + " --fp8-format hybrid", ("fp32", "fp32", "fp32", True)),  # delayed
        (AWARE + " --optimizer-cpu-offload", (None, None, None, None)),  # host states
        # Megatron-FSDP (the newest release): its own fp32 main weights, FusedAdam no master
        (AWARE + " --use-megatron-fsdp", ("fp32", "fp32", "fp32", False)),
        (AWARE + " --use-custom-fsdp", ("fp32", "fp32", "fp32", False)),  # its earlier name
        (
            AWARE + " --use-megatron-fsdp --megatron-fsdp-main-params-dtype auto "
            "--exp-avg-dtype bf16",
            ("bf16", "bf16", "fp32", None),  # no buffer: Adam steps the bf16 weights
        ),
        (
            AWARE + " --use-megatron-fsdp --megatron-fsdp-main-params-dtype fp16",
            ("fp16", "fp32", "fp32", None),
        ),
        # a bf16 buffer beside the bf16 weights: no scenario dtype, left to the framework
        (
            AWARE + " --use-megatron-fsdp --megatron-fsdp-main-params-dtype bf16",
            (None, None, None, None),
        ),
        # only --megatron-fsdp-main-params-dtype names Megatron-FSDP's master
        (
            AWARE + " --use-megatron-fsdp --main-params-dtype fp16",
            ("fp32", "fp32", "fp32", False),
        ),
        (AWARE + " --main-params-dtype bf16", (None, None, None, None)),  # argparse refuses
    ],
)
def test_precision_aware_optimizer_flags(flags: str, expected: tuple[object, ...]) -> None:
    par = _document(flags)["parallelism"]
    assert tuple(par.get(field) for field in FIELDS) == expected
    facts = _read(flags)
    assert tuple(facts.get(f"parallelism.{field}") for field in FIELDS) == expected
    parse_scenario(_document(flags))


def test_the_launch_reader_cites_flags_and_megatron_defaults() -> None:
    facts = _read(AWARE + " --exp-avg-dtype bf16")
    assert facts.values["parallelism.exp_avg_dtype"].source == "job.sh:9 (--exp-avg-dtype)"
    assert "parallelism.main_params_dtype" in facts.assumed
    assert "arguments.py" in facts.values["parallelism.main_params_dtype"].source
    assert "optimizer_config.py" in facts.values["parallelism.store_param_remainders"].source


@pytest.mark.parametrize(
    "flags",
    [
        " --main-params-dtype fp16",  # without the precision-aware optimizer
        AWARE + " --main-params-dtype bf16",  # not among its choices
    ],
)
def test_refused_optimizer_dtypes_are_noted(flags: str) -> None:
    facts = _read(flags)
    assert any("optimizer dtypes: Megatron-LM stops" in note for note in facts.notes)
    assert not facts.has("parallelism.main_params_dtype")


def test_precision_aware_defaults_keep_a_2_byte_master() -> None:
    """Megatron's default precision-aware optimizer: int16 remainders and fp32 moments, 10
    bytes per owned parameter against 12 without it."""
    aware = memory_per_gpu(parse_scenario(_document(AWARE)))
    plain = memory_per_gpu(parse_scenario(_document("")))
    params = total_params(parse_scenario(_document("")).model)
    assert plain.optimizer_bytes == pytest.approx(12 * params / 8)
    assert aware.optimizer_bytes == pytest.approx(10 * params / 8)


def test_a_described_launch_predicts_with_the_precision_aware_states() -> None:
    """A Megatron-LM job script with the precision-aware optimizer: the description states
    the dtypes with their flags and predicts less optimizer memory than the same job without
    them (an fp16 master and bf16 moments: 6 bytes per owned parameter against 12)."""
    script = (support.DATA / "megatron" / "jobs" / "mlm_job.sbatch").read_text()
    files = support.data_files("megatron", "/jobs/mlm")
    flags = (
        "--bf16 --use-distributed-optimizer --use-precision-aware-optimizer "
        "--main-params-dtype fp16 --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16"
    )
    plain = describe_launch(
        Launch(
            batch_script=script.replace("--bf16", "--bf16 --use-distributed-optimizer"),
            work_dir="/jobs/mlm",
        ),
        files,
        gpu="h100-sxm",
    )
    aware = describe_launch(
        Launch(batch_script=script.replace("--bf16", flags), work_dir="/jobs/mlm"),
        files,
        gpu="h100-sxm",
    )
    par = aware.scenario["parallelism"]
    assert isinstance(par, dict)
    assert (par["main_params_dtype"], par["exp_avg_dtype"]) == ("fp16", "bf16")
    assert aware.provenance["parallelism.main_params_dtype"].endswith("(--main-params-dtype)")
    plain_memory = memory_per_gpu(parse_scenario(plain.scenario))
    aware_memory = memory_per_gpu(parse_scenario(aware.scenario))
    assert aware_memory.optimizer_bytes == pytest.approx(plain_memory.optimizer_bytes / 2)
    assert aware.predicted is not None
    assert "iteration_time_s" in aware.predicted


@pytest.mark.parametrize("fsdp", ["--use-megatron-fsdp", "--use-custom-fsdp"])
def test_precision_aware_optimizer_under_megatron_fsdp_left_to_the_framework_is_noted(
    fsdp: str,
) -> None:
    """Under Megatron-FSDP, by either name, a main weight dtype no scenario dtype says (a bf16
    buffer beside bf16 weights) leaves the optimizer dtypes to the framework, and the reader
    says so; an fp32 one is read with the moments."""
    facts = _read(AWARE + f" --exp-avg-dtype bf16 {fsdp} --megatron-fsdp-main-params-dtype bf16")
    assert not facts.has("parallelism.exp_avg_dtype")
    assert any("names no scenario dtype" in note for note in facts.notes)
    read = _read(AWARE + f" --exp-avg-dtype bf16 {fsdp}")
    assert read.get("parallelism.exp_avg_dtype") == "bf16"
    assert not any("names no scenario dtype" in note for note in read.notes)


def test_precision_aware_optimizer_under_torch_fsdp2_is_noted() -> None:
    facts = _read(AWARE + " --exp-avg-dtype bf16 --use-torch-fsdp2")
    assert not facts.has("parallelism.exp_avg_dtype")
    assert any("under --use-torch-fsdp2" in note for note in facts.notes)


def test_megatron_fsdp_needs_no_distributed_optimizer_flag() -> None:
    """Megatron-LM turns the distributed optimizer on under ``--use-megatron-fsdp``: the
    precision-aware optimizer without ``--use-distributed-optimizer`` is not noted as a stop
    there, and is without it."""
    gpt = GPT.replace(" --use-distributed-optimizer", "")
    for fsdp, stops in ((" --use-megatron-fsdp", False), ("", True)):
        facts = _read(AWARE + fsdp, base=gpt)
        noted = any("optimizer dtypes: Megatron-LM stops" in note for note in facts.notes)
        assert noted is stops
