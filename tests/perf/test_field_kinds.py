"""Every field of the engine's input holds the kind its annotation declares.

``ScenarioArrays`` and ``DeviceArrays`` are built by loops over their fields
(``planner.perf.batch.from_fields`` / ``with_fields``), which a static type check does not see
through; these tests check the values each builder makes, field by field: ``Real`` is a
``float`` (one-scenario form) or a float64 array, ``Flag`` a ``bool`` or a bool array, ``Count``
an ``int`` or an integer array, each array of shape ``(n,)``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from planner.perf.batch import ScenarioArrays
from planner.perf.candidates import CandidateColumns, candidate_arrays
from planner.perf.efficiency import DefaultEfficiency
from planner.perf.engine import evaluate
from planner.perf.optimizer import master_bytes_per_param
from planner.scenario import parse_scenario
from planner.specs import Scenario

_SCALAR = {"Real": float, "Flag": bool, "Count": int}
_DTYPE_KIND = {"Real": "f", "Flag": "b", "Count": "iu"}


def _scenarios() -> list[Scenario]:
    """A dense and an MoE scenario with pipeline, context and expert parallelism."""
    docs = [
        {
            "model": {"preset": "llama3-8b"},
            "hardware": {"gpu": "h100-sxm", "num_gpus": 16},
            "parallelism": {
                "tensor_parallel": 2,
                "pipeline_parallel": 2,
                "context_parallel": 2,
                "virtual_pipeline": 2,
                "micro_batch_size": 1,
                "global_batch_size": 32,
                "recompute": "selective",
            },
            "training": {"framework": "megatron", "train_iters": 100},
        },
        {
            "model": {"preset": "qwen3-30b-a3b"},
            "hardware": {"gpu": "b200", "num_gpus": 16},
            "parallelism": {
                "tensor_parallel": 1,
                "expert_parallel": 8,
                "micro_batch_size": 1,
                "global_batch_size": 64,
                "precision": "fp8",
            },
            "training": {"framework": "nemo"},
        },
    ]
    return [parse_scenario(doc) for doc in docs]


def _kind_errors(obj: object, n: int | None) -> list[str]:
    """Each field of the dataclass ``obj`` whose value is not of its annotation's kind:
    Python numbers when ``n`` is None, arrays of shape ``(n,)`` otherwise."""
    errors: list[str] = []
    assert dataclasses.is_dataclass(obj)
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        kind = str(f.type)
        if kind in _SCALAR:
            if n is None:
                # bool is an int in Python: a Count must not be a bool, a Flag must be one
                ok = isinstance(value, _SCALAR[kind]) and (
                    kind == "Flag" or not isinstance(value, bool)
                )
                if kind == "Real":
                    ok = type(value) is float
            else:
                ok = (
                    isinstance(value, np.ndarray)
                    and value.shape == (n,)
                    and value.dtype.kind in _DTYPE_KIND[kind]
                )
            if not ok:
                errors.append(f"{f.name}: {kind} but {type(value).__name__} {value!r:.60}")
        elif kind == "DeviceArrays":
            errors.extend(f"device.{e}" for e in _kind_errors(value, n))
        elif kind == "tuple[str, ...]":
            if not (isinstance(value, tuple) and all(isinstance(v, str) for v in value)):
                errors.append(f"{f.name}: {kind} but {value!r:.60}")
        elif kind == "int":
            if type(value) is not int:
                errors.append(f"{f.name}: int but {type(value).__name__}")
        else:
            errors.append(f"{f.name}: annotation {kind} has no kind check here")
    return errors


@pytest.mark.parametrize("index", [0, 1], ids=["dense", "moe"])
def test_the_one_scenario_form_holds_python_numbers_of_each_fields_kind(index: int) -> None:
    arrays = ScenarioArrays.from_scenario(_scenarios()[index])
    assert _kind_errors(arrays, None) == []


def test_a_batch_and_the_scenarios_taken_from_it_hold_arrays_of_each_fields_kind() -> None:
    batch = ScenarioArrays.from_scenarios(_scenarios())
    assert _kind_errors(batch, 2) == []
    taken = batch.take(np.array([1, 1, 0], dtype=np.int64))
    assert _kind_errors(taken, 3) == []


@pytest.mark.parametrize("one_form", [True, False], ids=["from-numbers", "from-arrays"])
def test_candidate_layouts_hold_arrays_of_each_fields_kind(one_form: bool) -> None:
    scenario = _scenarios()[1]
    base = (
        ScenarioArrays.from_scenario(scenario)
        if one_form
        else ScenarioArrays.from_scenarios([scenario])
    )
    ints = np.array([1, 2, 4], dtype=np.int64)
    cand = CandidateColumns(
        tensor_parallel=ints,
        pipeline_parallel=np.ones(3, dtype=np.int64),
        context_parallel=np.ones(3, dtype=np.int64),
        expert_parallel=np.array([8, 4, 2], dtype=np.int64),
        data_parallel=16 // ints,
        virtual_pipeline=np.ones(3, dtype=np.int64),
        sequence_parallel=ints > 1,
        micro_batch_size=np.ones(3, dtype=np.int64),
        global_batch_size=np.full(3, 64, dtype=np.int64),
        recompute=np.zeros(3, dtype=np.int64),
        zero_stage=np.zeros(3, dtype=np.int64),
        num_gpus=np.full(3, 16, dtype=np.int64),
    )
    assert _kind_errors(candidate_arrays(base, cand), 3) == []


def test_a_zero3_candidate_of_a_zero1_base_has_the_master_its_stage_reads() -> None:
    # NeMo keeps a 2-byte master remainder under its distributed Adam and a whole fp32 master
    # under Megatron-FSDP (planner.perf.frameworks): a candidate that changes the ZeRO stage
    # must get the master of its own stage, as the scenario read directly does
    doc: dict[str, Any] = {
        "model": {"preset": "llama3-8b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
        "parallelism": {"micro_batch_size": 1, "global_batch_size": 16, "zero_stage": 1},
        "training": {"framework": "nemo", "train_iters": 100},
    }
    base = ScenarioArrays.from_scenario(parse_scenario(doc))
    ones = np.ones(2, dtype=np.int64)
    cand = CandidateColumns(
        tensor_parallel=ones,
        pipeline_parallel=ones,
        context_parallel=ones,
        expert_parallel=ones,
        data_parallel=np.full(2, 8, dtype=np.int64),
        virtual_pipeline=ones,
        sequence_parallel=np.zeros(2, dtype=bool),
        micro_batch_size=ones,
        global_batch_size=np.full(2, 16, dtype=np.int64),
        recompute=np.zeros(2, dtype=np.int64),
        zero_stage=np.array([1, 3], dtype=np.int64),
        num_gpus=np.full(2, 8, dtype=np.int64),
    )
    from_candidates = master_bytes_per_param(candidate_arrays(base, cand, framework="nemo"))
    direct = [
        float(
            master_bytes_per_param(
                ScenarioArrays.from_scenario(
                    parse_scenario({**doc, "parallelism": {**doc["parallelism"], "zero_stage": z}})
                )
            )
        )
        for z in (1, 3)
    ]
    assert direct == [2.0, 4.0]
    assert [float(x) for x in from_candidates] == direct


def test_zero_0_2_candidates_of_a_deepspeed_zero3_base_reduce_as_their_stage_does() -> None:
    # DeepSpeed's overlap_comm defaults to false at ZeRO 0-2 and true at ZeRO-3: a ZeRO-1 or
    # ZeRO-2 candidate of a ZeRO-3 base must time its gradient reduction as the scenario of
    # its own stage does, not inherit the base's overlap
    doc: dict[str, Any] = {
        "model": {"preset": "llama3-8b"},
        "hardware": {"gpu": "a100-sxm4-80gb", "num_gpus": 16, "gpus_per_node": 8},
        "parallelism": {"micro_batch_size": 1, "global_batch_size": 64, "zero_stage": 3},
        "training": {"framework": "deepspeed", "train_iters": 100},
    }
    stages = (1, 2, 3)
    base = ScenarioArrays.from_scenario(parse_scenario(doc))
    n = len(stages)
    ones = np.ones(n, dtype=np.int64)
    cand = CandidateColumns(
        tensor_parallel=ones,
        pipeline_parallel=ones,
        context_parallel=ones,
        expert_parallel=ones,
        data_parallel=np.full(n, 16, dtype=np.int64),
        virtual_pipeline=ones,
        sequence_parallel=np.zeros(n, dtype=bool),
        micro_batch_size=ones,
        global_batch_size=np.full(n, 64, dtype=np.int64),
        recompute=np.zeros(n, dtype=np.int64),
        zero_stage=np.array(stages, dtype=np.int64),
        num_gpus=np.full(n, 16, dtype=np.int64),
    )
    eff = DefaultEfficiency()
    swept = evaluate(candidate_arrays(base, cand, framework="deepspeed"), eff)
    for i, z in enumerate(stages):
        scenario = parse_scenario({**doc, "parallelism": {**doc["parallelism"], "zero_stage": z}})
        direct = evaluate(ScenarioArrays.from_scenario(scenario), eff)
        assert float(swept.breakdown_s["dp_comm_exposed"][i]) == pytest.approx(
            float(direct.breakdown_s["dp_comm_exposed"]), rel=1e-9
        ), f"zero_stage {z}"
        assert float(swept.iteration_time_s[i]) == pytest.approx(
            float(direct.iteration_time_s), rel=1e-9
        ), f"zero_stage {z}"


@pytest.mark.parametrize(
    ("framework", "tensor", "expert", "resolved"),
    [("automodel", 2, 8, 1), ("megatron", 4, 8, 2), ("megatron", 2, 8, 2)],
)
def test_candidates_leaving_expert_tensor_parallel_unset_resolve_it_as_their_scenario(
    framework: str, tensor: int, expert: int, resolved: int
) -> None:
    # an unset expert tensor-parallel column is the degree the candidate's scenario runs with:
    # 1 under NeMo Automodel (experts kept whole), else tensor_parallel, or its largest divisor
    # whose expert groups fold into the stage (tp 4 x ep 8 does not fold into 16 ranks; 2 does)
    doc: dict[str, Any] = {
        "model": {"preset": "qwen3-30b-a3b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 16},
        "parallelism": {"micro_batch_size": 1, "global_batch_size": 64, "expert_parallel": 8},
        "training": {"framework": framework},
    }
    base = ScenarioArrays.from_scenario(parse_scenario(doc))
    one = np.ones(1, dtype=np.int64)
    sequence_parallel = framework != "automodel"  # Automodel refuses it for MoE under tp
    cand = CandidateColumns(
        tensor_parallel=tensor * one,
        pipeline_parallel=one,
        context_parallel=one,
        expert_parallel=expert * one,
        data_parallel=(16 // tensor) * one,
        virtual_pipeline=one,
        sequence_parallel=np.full(1, sequence_parallel),
        micro_batch_size=one,
        global_batch_size=64 * one,
        recompute=0 * one,
        zero_stage=one,
        num_gpus=16 * one,
    )
    swept = candidate_arrays(base, cand, framework=framework)
    layout = {"tensor_parallel": tensor, "sequence_parallel": sequence_parallel, "zero_stage": 1}
    scenario = parse_scenario({**doc, "parallelism": {**doc["parallelism"], **layout}})
    direct = ScenarioArrays.from_scenario(scenario)
    assert float(direct.expert_tensor_parallel) == resolved
    assert float(np.asarray(swept.expert_tensor_parallel)[0]) == resolved
    eff = DefaultEfficiency()
    assert float(evaluate(swept, eff).iteration_time_s[0]) == pytest.approx(
        float(evaluate(direct, eff).iteration_time_s), rel=1e-9
    )
