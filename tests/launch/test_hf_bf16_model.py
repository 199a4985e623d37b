"""HF Trainer / TRL: a model loaded in bf16 trains in pure bf16 outside DeepSpeed; the
``optim`` a job sets is PyTorch AdamW's implementation."""

from __future__ import annotations

import functools

from planner.launch.readers.hf import READER
from tests.launch import reader_support as support

_read = functools.partial(
    support.read_program,
    READER,
    "hf",
    "/jobs/hf",
    allocation=support.allocation(8, 1, 8),
    where="job.sh:3",
    gpus_from_allocation=True,
)
ARGS = ("--model_name_or_path", "models/mini-qwen", "--bf16")
FIELDS = ("main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype", "grad_reduce_in_fp32")


def test_a_bf16_model_under_autocast_keeps_no_master() -> None:
    facts = _read("run_clm.py", *ARGS, "--torch_dtype", "bfloat16")
    assert tuple(facts.get(f"parallelism.{f}") for f in FIELDS) == ("bf16", "bf16", "bf16", False)
    assert (
        facts.values["parallelism.main_params_dtype"].source == "override: --torch_dtype bfloat16"
    )
    fp32 = _read("run_clm.py", *ARGS)  # TRL's and the scripts' default: an fp32 model
    assert not any(fp32.has(f"parallelism.{f}") for f in FIELDS)


def test_deepspeed_and_8_bit_optimizers_are_only_noted() -> None:
    deepspeed = _read(
        "train.py",
        *ARGS,
        "--dtype",
        "bfloat16",
        "--optim",
        "adamw_torch",
        launcher="accelerate",
        launcher_args={"config_file": "accelerate/ds_zero2.yaml", "num_processes": "8"},
    )
    assert deepspeed.get("training.framework") == "deepspeed"
    # DeepSpeed steps its own optimizer or wraps the Trainer's: the implementation unstated
    assert not deepspeed.has("parallelism.optimizer_implementation")
    assert not deepspeed.has("parallelism.main_params_dtype")
    assert any("under DeepSpeed" in note for note in deepspeed.notes)
    paged = _read("run_clm.py", *ARGS, "--dtype", "bfloat16", "--optim", "paged_adamw_8bit")
    assert not paged.has("parallelism.main_params_dtype")
    assert any("under paged_adamw_8bit" in note for note in paged.notes)


def test_an_optim_the_job_sets_is_the_adamw_implementation() -> None:
    field = "parallelism.optimizer_implementation"
    plain = _read("run_clm.py", *ARGS, "--optim", "adamw_torch")
    assert plain.get(field) == "foreach"
    assert plain.values[field].source == "override: --optim adamw_torch"
    assert _read("run_clm.py", *ARGS, "--optim", "adamw_torch_fused").get(field) == "fused"
    # unset: the torch release picks the default, so the profile's stands
    assert not _read("run_clm.py", *ARGS).has(field)
    assert not _read("run_clm.py", *ARGS, "--optim", "paged_adamw_8bit").has(field)
