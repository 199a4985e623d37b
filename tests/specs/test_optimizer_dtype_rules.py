"""Megatron-Core's refusals of the optimizer's dtypes (``planner.specs.feasibility``,
``optimizer_dtype_rule``): the precision-aware optimizer only with the distributed optimizer,
no bf16 master below Megatron-FSDP; one candidate and arrays agree, launches Megatron accepts
pass."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from planner.errors import SpecError
from planner.perf.candidates import CandidateColumns
from planner.scenario import parse_scenario
from planner.scenario.megatron_args import scenario_document_from_megatron_args
from planner.search.space import JobLayout
from planner.specs import Scenario
from planner.specs.feasibility import (
    PRECISION_AWARE_OPTIMIZER_SOURCE,
    Violation,
    first_violation,
    layout_violations,
    needs_precision_aware_optimizer,
    optimizer_dtype_rule,
)
from tests.perf.test_optimizer_dtypes import DP, _scenario


def _at(framework: str, zero_stage: int, **par: Any) -> Scenario:
    return _scenario(framework, zero_stage=zero_stage, **par)


PRECISION_AWARE: list[dict[str, Any]] = [
    {"main_params_dtype": "fp16"},
    {"exp_avg_dtype": "bf16", "exp_avg_sq_dtype": "bf16"},
    {"exp_avg_sq_dtype": "fp8"},
    {"main_params_dtype": "fp32", "store_param_remainders": True},
]
"""Dtypes that only Megatron-Core's precision-aware optimizer keeps."""

PLAIN: list[dict[str, Any]] = [
    {},
    {"main_params_dtype": "fp32"},
    {"exp_avg_dtype": "fp32", "exp_avg_sq_dtype": "fp32"},
    {"main_params_dtype": "fp32", "store_param_remainders": False},
]
"""Dtypes Megatron-Core's plain mixed-precision optimizer keeps (fp32 master and moments)."""


@pytest.mark.parametrize("framework", ["megatron", "nemo"])
@pytest.mark.parametrize("par", PRECISION_AWARE)
def test_precision_aware_dtypes_need_the_distributed_optimizer(
    framework: str, par: dict[str, Any]
) -> None:
    """Megatron-Core asserts the distributed optimizer under ``--use-precision-aware-optimizer``
    (``PRECISION_AWARE_OPTIMIZER_SOURCE``): ZeRO-0 is refused, naming the field and the fix;
    the distributed optimizer (1, 2) and Megatron-FSDP (3) are accepted."""
    assert "only supported with distributed optimizer" in PRECISION_AWARE_OPTIMIZER_SOURCE
    with pytest.raises(SpecError) as raised:
        _at(framework, 0, **par)
    assert raised.value.field == "parallelism.zero_stage"
    assert "--use-precision-aware-optimizer" in raised.value.message
    assert "set zero_stage to 1" in raised.value.message
    for stated in par:
        assert stated in raised.value.message
    for zero_stage in (1, 2, 3):
        _at(framework, zero_stage, **par)


@pytest.mark.parametrize("framework", ["megatron", "nemo"])
@pytest.mark.parametrize("par", PLAIN)
def test_plain_dtypes_run_at_every_stage(framework: str, par: dict[str, Any]) -> None:
    """An fp32 master and fp32 moments are Megatron's plain optimizer: no stage refused."""
    for zero_stage in (0, 1, 2, 3):
        _at(framework, zero_stage, **par)


@pytest.mark.parametrize("framework", ["megatron", "nemo"])
def test_no_bf16_master_below_megatron_fsdp(framework: str) -> None:
    """Megatron-LM's ``--main-params-dtype`` offers fp32 and fp16, and Transformer Engine's
    ``FusedAdam`` refuses other master dtypes: ``main_params_dtype: bf16`` (no master) is
    refused at ZeRO 0-2 and left to Megatron-FSDP at 3."""
    for zero_stage in (0, 1, 2):
        with pytest.raises(SpecError) as raised:
            _at(framework, zero_stage, main_params_dtype="bf16")
        assert raised.value.field == "parallelism.main_params_dtype"
        assert "set main_params_dtype to fp32 or fp16" in raised.value.message
        assert "fp32/fp16 master weights" in raised.value.message
    _at(framework, 3, main_params_dtype="bf16")


@pytest.mark.parametrize("framework", ["torchtitan", "fsdp", "automodel", "deepspeed"])
@pytest.mark.parametrize("par", [*PRECISION_AWARE[:3], {"main_params_dtype": "bf16"}])
def test_other_frameworks_keep_every_stage(framework: str, par: dict[str, Any]) -> None:
    """The rule is Megatron-Core's optimizer's: other frameworks read no such names."""
    assert not optimizer_dtype_rule(framework)
    for zero_stage in (0, 1, 3):
        _at(framework, zero_stage, **par)


def _column(par: Any, n: int, name: str) -> NDArray[np.int64]:
    return np.full(n, getattr(par, name), dtype=np.int64)


def test_one_candidate_and_arrays_agree() -> None:
    """``layout_violations`` over the four ZeRO stages gives each stage the rule
    ``first_violation`` gives one candidate."""
    for par, refused in (
        (
            {"exp_avg_dtype": "bf16"},
            Violation.PRECISION_AWARE_OPTIMIZER_NEEDS_DISTRIBUTED_OPTIMIZER,
        ),
        ({"main_params_dtype": "bf16"}, Violation.BF16_MAIN_PARAMS_NOT_SUPPORTED_BY_FRAMEWORK),
    ):
        base = _at("megatron", 3, **par)
        one = base.parallelism
        assert needs_precision_aware_optimizer(one) is ("exp_avg_dtype" in par)
        stages = np.arange(4, dtype=np.int64)
        n = stages.shape[0]

        cols = CandidateColumns(
            tensor_parallel=_column(one, n, "tensor_parallel"),
            pipeline_parallel=_column(one, n, "pipeline_parallel"),
            context_parallel=_column(one, n, "context_parallel"),
            expert_parallel=_column(one, n, "expert_parallel"),
            data_parallel=_column(one, n, "data_parallel"),
            virtual_pipeline=_column(one, n, "virtual_pipeline"),
            sequence_parallel=np.zeros(n, dtype=np.bool_),
            micro_batch_size=_column(one, n, "micro_batch_size"),
            global_batch_size=_column(one, n, "global_batch_size"),
            recompute=np.zeros(n, dtype=np.int64),
            zero_stage=stages,
            num_gpus=np.full(n, DP, dtype=np.int64),
        )

        layout = JobLayout(cols, tp_comm_overlap=False, job=one)
        codes = layout_violations(base.model, DP, layout, framework="megatron")
        assert (codes < 0).any()
        assert (codes >= 0).any()
        for zero_stage, code in zip(stages, codes, strict=True):
            single = first_violation(
                base.model, DP, replace(one, zero_stage=int(zero_stage)), framework="megatron"
            )
            assert (code < 0) == (single is None)
            if single is not None:
                assert single is refused
                assert Violation.from_code(int(code)) is refused


def test_a_megatron_lm_precision_aware_launch_is_accepted() -> None:
    """``--use-precision-aware-optimizer --use-distributed-optimizer`` with bf16 moments (the
    Megatron-Bridge DeepSeek-V3 performance recipes' choice) is a valid scenario."""
    s = _at(
        "megatron",
        1,
        main_params_dtype="fp32",
        exp_avg_dtype="bf16",
        exp_avg_sq_dtype="bf16",
        store_param_remainders=True,
    )
    assert s.parallelism.exp_avg_dtype == "bf16"


def test_megatron_lm_args_are_refused_where_megatron_refuses_them() -> None:
    """A Megatron-LM command line with ``--use-precision-aware-optimizer`` and bf16 moments:
    refused without ``--use-distributed-optimizer`` (as Megatron-Core asserts), accepted with
    it."""
    gpt = (
        "pretrain_gpt.py --num-layers 2 --hidden-size 256 --num-attention-heads 4 "
        "--seq-length 512 --micro-batch-size 1 --global-batch-size 8 --train-iters 10 --bf16 "
        "--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16"
    )
    for flags, accepted in (("", False), (" --use-distributed-optimizer", True)):
        doc = scenario_document_from_megatron_args(gpt + flags, num_gpus=8, gpu="h100-sxm")
        assert doc is not None
        if accepted:
            assert parse_scenario(doc).parallelism.exp_avg_dtype == "bf16"
            continue
        with pytest.raises(SpecError) as raised:
            parse_scenario(doc)
        assert raised.value.field == "parallelism.zero_stage"


@pytest.mark.parametrize("framework", ["megatron", "nemo"])
@pytest.mark.parametrize("par", [*PRECISION_AWARE, {"main_params_dtype": "bf16"}])
def test_megatron_fsdp_takes_the_dtypes_at_every_stage(framework: str, par: dict[str, Any]) -> None:
    """Megatron-FSDP runs on the distributed optimizer at every sharding strategy (Megatron-LM
    and Megatron-Bridge turn it on under it) and keeps its own main-weight buffer: the dtypes
    refused at ZeRO 0-2 without it are accepted with it, no_shard (0) included."""
    for zero_stage in (0, 1, 2, 3):
        s = _at(framework, zero_stage, megatron_fsdp=True, **par)
        for name, value in par.items():
            assert str(getattr(s.parallelism, name)).lower().endswith(str(value).lower())
    with pytest.raises(SpecError):
        _at(framework, 0, megatron_fsdp=False, **par)
