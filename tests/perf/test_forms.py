"""One engine, two forms: ``predict`` (Python numbers) equals the batch (numpy arrays)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.catalog import gpu_catalog
from planner.errors import SpecError
from planner.perf import DefaultEfficiency, Prediction, ops, predict, predict_batch
from planner.perf.batch import ScenarioArrays
from planner.perf.engine import BatchResult, evaluate
from planner.perf.memory import memory_per_gpu
from planner.scenario import parse_scenario
from planner.specs import Scenario
from planner.specs.hardware import Precision

PRESETS = (
    "llama3-8b",  # SwiGLU, GQA
    "gpt3-175b",  # GeLU with dropout, tied embeddings
    "nemotron4-15b",  # squared ReLU
    "mixtral-8x7b",  # MoE, 8 experts
    "qwen3-30b-a3b",  # MoE, 128 experts
)
FRAMEWORKS = ("megatron", "nemo", "torchtitan", "fsdp", "deepspeed", "maxtext", "llm_foundry")
_OPTIONAL_FLAGS = (
    "grad_reduce_in_fp32",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "tp_comm_overlap",
)
"""Optional ``parallelism`` flags: each left out (the framework's default), true or false."""


def _varied_scenarios() -> list[Scenario]:
    """Valid scenarios over every catalog GPU, dense and MoE models, ZeRO stages, recompute
    modes, precisions, frameworks, gradient-reduction flags and tp/pp/vp/cp/ep/sp layouts
    (deterministic)."""
    rng = np.random.default_rng(7)
    out: list[Scenario] = []
    for gpu_key, gpu in gpu_catalog().items():
        precisions = [str(p) for p in Precision if gpu.supports(p)]
        tried = 0
        kept = 0
        while kept < 16 and tried < 400:
            tried += 1
            preset = PRESETS[(tried + kept) % len(PRESETS)]
            moe = preset in ("mixtral-8x7b", "qwen3-30b-a3b")
            tp = int(rng.choice([1, 2, 4, 8]))
            pp = int(rng.choice([1, 1, 2, 4]))
            cp = int(rng.choice([1, 1, 2]))
            dp = int(rng.choice([1, 2, 4, 8]))
            vp = int(rng.choice([1, 2])) if pp > 1 else 1
            ep = int(rng.choice([1, 2, 4, 8])) if moe else 1
            mbs = int(rng.choice([1, 2]))
            training: dict[str, Any] = {"framework": str(rng.choice(FRAMEWORKS))}
            goal = int(rng.integers(0, 3))
            if goal == 1:
                training["total_tokens"] = 1e12
            elif goal == 2:
                training["train_iters"] = 5000
            # optional flags: left out (the framework's default), true or false
            flags = {
                key: bool(choice)
                for key in _OPTIONAL_FLAGS
                if (choice := int(rng.integers(0, 3))) < 2
            }
            doc = {
                "model": {"preset": preset},
                "hardware": {"gpu": gpu_key, "num_gpus": tp * pp * cp * dp},
                "parallelism": {
                    "tensor_parallel": tp,
                    "pipeline_parallel": pp,
                    "context_parallel": cp,
                    "expert_parallel": ep,
                    "virtual_pipeline": vp,
                    "sequence_parallel": bool(tp > 1 and rng.integers(0, 2)),
                    "micro_batch_size": mbs,
                    "global_batch_size": dp * mbs * int(rng.choice([1, 4, 16])),
                    "recompute": str(rng.choice(["none", "selective", "full"])),
                    "zero_stage": int(rng.integers(0, 4)),
                    "precision": str(rng.choice(precisions)),
                    "flash_attention": bool(rng.integers(0, 4)),
                    **flags,
                },
                "training": training,
            }
            try:
                out.append(parse_scenario(doc))
            except SpecError:
                continue
            kept += 1
    return out


SCENARIOS = _varied_scenarios()


def _flat(p: Prediction) -> dict[str, Any]:
    fields = dataclasses.asdict(p)
    flat = {k: v for k, v in fields.items() if not isinstance(v, dict)}
    for k in ("breakdown", "memory"):
        flat.update({f"{k}.{name}": v for name, v in fields[k].items()})
    return flat


def _same(one: Any, other: Any) -> bool:
    if type(one) is not type(other):
        return False
    if isinstance(one, float):
        return one == pytest.approx(other, rel=1e-12, abs=0.0)
    return bool(one == other)


def test_the_varied_set_covers_every_knob() -> None:
    par = [s.parallelism for s in SCENARIOS]
    assert {s.hardware.gpu.key for s in SCENARIOS} == set(gpu_catalog())
    assert {p.zero_stage for p in par} == {0, 1, 2, 3}
    assert {str(p.recompute) for p in par} == {"none", "selective", "full"}
    assert {str(p.precision) for p in par} >= {"bf16", "fp16", "fp8", "mxfp8", "nvfp4"}
    assert {str(s.training.framework) for s in SCENARIOS} == set(FRAMEWORKS)
    assert any(s.model.num_moe_layers > 0 for s in SCENARIOS)
    assert any(p.virtual_pipeline > 1 for p in par)
    assert any(p.context_parallel > 1 for p in par)
    assert any(p.expert_parallel > 1 for p in par)
    assert any(p.sequence_parallel for p in par)
    assert any(not p.flash_attention for p in par)
    for flag in _OPTIONAL_FLAGS:
        assert {getattr(p, flag) for p in par} == {None, True, False}
    assert len(SCENARIOS) == 16 * len(gpu_catalog())


def test_one_scenario_form_equals_the_batch_in_every_field() -> None:
    batch = predict_batch(SCENARIOS)
    for scenario, together in zip(SCENARIOS, batch, strict=True):
        alone = predict(scenario)
        flat_alone, flat_together = _flat(alone), _flat(together)
        differ = {
            k: (v, flat_together[k])
            for k, v in flat_alone.items()
            if not _same(v, flat_together[k])
        }
        assert not differ, (scenario, differ)


def _values(r: BatchResult) -> list[Any]:
    memory = [getattr(r.memory, f.name) for f in dataclasses.fields(r.memory)]
    return [r.iteration_time_s, r.model_flops, r.hardware_flops, *r.breakdown_s.values(), *memory]


def test_engine_forms_agree_and_one_scenario_stays_in_python_floats() -> None:
    """Python numbers all the way through (a numpy scalar would slow every later operation),
    and the same numbers as the array form of a batch of one."""
    eff = DefaultEfficiency()
    for scenario in SCENARIOS[::7]:
        scalar = evaluate(ScenarioArrays.from_scenario(scenario), eff)
        arrays = evaluate(ScenarioArrays.from_scenarios([scenario]), eff)
        for one, other in zip(_values(scalar), _values(arrays), strict=True):
            assert type(one) is float
            assert isinstance(other, np.ndarray)
            assert other.shape == (1,)
            assert one == pytest.approx(float(other[0]), rel=1e-12, abs=0.0)


def test_from_scenario_reads_what_from_scenarios_reads() -> None:
    for scenario in SCENARIOS[::11]:
        one = ScenarioArrays.from_scenario(scenario)
        many = ScenarioArrays.from_scenarios([scenario, scenario])
        assert one.scalar
        assert not many.scalar
        for f in dataclasses.fields(ScenarioArrays):
            if f.name in ("num_scenarios", "device"):
                continue
            value, column = getattr(one, f.name), getattr(many, f.name)
            assert type(value) in (float, bool, int), f.name
            assert np.array_equal(column, [value, value], equal_nan=True), f.name
        for f in dataclasses.fields(one.device):
            value, column = getattr(one.device, f.name), getattr(many.device, f.name)
            if f.name == "gpu_keys":
                assert value == column
            else:
                assert np.array_equal(column, [value, value]), f.name


def test_memory_per_gpu_is_the_prediction_memory() -> None:
    for scenario in SCENARIOS[::13]:
        assert memory_per_gpu(scenario) == predict(scenario).memory


finite = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False)
positive = st.floats(min_value=1e-6, max_value=1e12)


@given(finite, finite, st.booleans())
def test_ops_on_numbers_equal_numpy(x: float, y: float, cond: bool) -> None:
    pairs = [
        (ops.maximum(x, y), np.maximum(x, y)),
        (ops.minimum(x, y), np.minimum(x, y)),
        (ops.where(cond, x, y), np.where(cond, x, y)),
        (ops.floor(x), np.floor(x)),
        (ops.ceil(x), np.ceil(x)),
    ]
    for number, array in pairs:
        assert type(number) is float
        assert number == float(array)
    assert ops.logical_not(cond) is (not cond)
    assert ops.any_(cond) is cond
    assert ops.all_(np.array([cond, True])) is cond


@given(positive)
def test_log2_and_exp2_on_numbers_equal_numpy(x: float) -> None:
    assert ops.log2(x) == pytest.approx(float(np.log2(x)), rel=1e-15)
    exponent = math.ceil(math.log2(x))
    assert ops.exp2(float(exponent)) == float(np.exp2(exponent))


def test_ops_on_arrays_are_numpy() -> None:
    x, y = np.array([1.0, 5.0]), np.array([3.0, 2.0])
    assert np.array_equal(ops.maximum(x, 2.5), [2.5, 5.0])
    assert np.array_equal(ops.where(x > 2, x, y), [3.0, 5.0])
    assert np.array_equal(ops.where(True, x, 0.0), x)  # a number with an array: numpy
    assert np.array_equal(ops.logical_not(x > 2), [True, False])
    assert ops.take(np.array([0.5, 0.7]), 1) == 0.7
    assert np.array_equal(ops.take(np.array([0.5, 0.7]), np.array([1, 0])), [0.7, 0.5])
