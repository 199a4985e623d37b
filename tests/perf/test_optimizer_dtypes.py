"""The optimizer's state dtypes as scenario fields (``parallelism.main_params_dtype``,
``exp_avg_dtype``, ``exp_avg_sq_dtype``, ``store_param_remainders``): memory, the optimizer
step's HBM traffic, validation and the explorer."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from planner.errors import SpecError
from planner.perf import DefaultEfficiency, memory_per_gpu
from planner.perf.batch import ScenarioArrays
from planner.perf.frameworks import profile_of
from planner.perf.optimizer import ADAM_HBM_BYTES_PER_PARAM, optimizer_times
from planner.perf.parameters import stage_params, total_params
from planner.perf.step import predict
from planner.scenario import parse_scenario
from planner.scenario.plans import explore_document, parse_space
from planner.search import explore
from planner.specs import Scenario
from planner.specs.scenario import Framework

DP = 8


def _scenario(framework: str = "megatron", *, zero_stage: int = 1, **par: Any) -> Scenario:
    return parse_scenario(
        {
            "model": {"preset": "llama3-8b", "seq_length": 1024},
            "hardware": {"gpu": "h100-sxm", "num_gpus": DP},
            "parallelism": {
                "micro_batch_size": 1,
                "global_batch_size": DP,
                "zero_stage": zero_stage,
                **par,
            },
            "training": {"framework": framework},
        }
    )


def _states(s: Scenario) -> float:
    m = memory_per_gpu(s)
    return m.weights_bytes + m.gradients_bytes + m.optimizer_bytes


def _hbm(*scenarios: Scenario) -> list[float]:
    a = ScenarioArrays.from_scenarios(list(scenarios))
    hbm = optimizer_times(a, DefaultEfficiency(), stage_params(a).busiest()).hbm_bytes
    return [float(x) for x in np.asarray(hbm)]


PURE_BF16: dict[str, Any] = {
    "main_params_dtype": "bf16",
    "exp_avg_dtype": "bf16",
    "exp_avg_sq_dtype": "bf16",
    "grad_reduce_in_fp32": False,
}


@pytest.mark.parametrize("framework", ["megatron", "nemo", "automodel", "torchtitan", "fsdp"])
@pytest.mark.parametrize("zero_stage", [0, 1, 3])
def test_absent_fields_read_the_framework_profile(framework: str, zero_stage: int) -> None:
    """Leaving the fields out reads the profile (every existing scenario predicts as before)."""
    bare = ScenarioArrays.from_scenario(_scenario(framework, zero_stage=zero_stage))
    profile = profile_of(Framework(framework))
    assert bare.master_weight_bytes == profile.master_weight_bytes
    assert bare.zero3_master_weight_bytes == profile.zero3_master_weight_bytes
    assert bare.adam_moment_bytes == profile.adam_moment_bytes
    assert bare.exp_avg_sq_bytes == profile.adam_moment_bytes / 2
    # a profile keeping no master (NeMo Automodel) updates the 16-bit weights itself
    no_master = profile.master_weight_bytes == 0 and profile.zero3_master_weight_bytes == 0
    assert bare.optimizer_updates_weights is (framework == "automodel")
    assert bare.optimizer_updates_weights is no_master


def test_pure_bf16_keeps_8_bytes_per_parameter_of_model_states() -> None:
    """A bf16 model under ``torch.optim.AdamW``: bf16 weights (2), bf16 gradients (2), no
    master, two bf16 moments (4): 8 bytes per parameter at ZeRO-0, against Megatron's
    mixed-precision 2 + 4 + 12 = 18."""
    params = total_params(_scenario().model)
    pure = _scenario("fsdp", zero_stage=0, **PURE_BF16)
    assert _states(pure) == pytest.approx(8 * params)
    mixed = _scenario("megatron", zero_stage=0)
    assert _states(mixed) == pytest.approx(18 * params)


def test_pure_bf16_under_fsdp_counts_its_bf16_shard_as_weights() -> None:
    """Under PyTorch FSDP the sharded parameter is what the optimizer updates: with fp32
    parameters it is the 4-byte master, with a pure-bf16 model the 2-byte bf16 shard, which
    then counts among the weights; the moments stay 4 bytes per owned parameter."""
    params = total_params(_scenario().model)
    foreach = {"optimizer_implementation": "foreach"}  # torchtitan's default is fused
    titan = memory_per_gpu(_scenario("torchtitan", zero_stage=3, **foreach))
    pure = memory_per_gpu(_scenario("torchtitan", zero_stage=3, **PURE_BF16, **foreach))
    assert pure.weights_bytes - titan.weights_bytes == pytest.approx(2 * params / DP)
    assert pure.optimizer_bytes == pytest.approx(4 * params / DP)
    assert titan.optimizer_bytes == pytest.approx(12 * params / DP)
    assert pure.gradients_bytes == pytest.approx(2 * params / DP)
    # torch's foreach Adam allocates sqrt(exp_avg_sq) in the second moment's dtype
    assert pure.optimizer_step_bytes == pytest.approx(2 * params / DP)
    assert titan.optimizer_step_bytes == pytest.approx(4 * params / DP)


def test_megatron_fsdp_keeps_its_model_weight_shard_once_without_a_master() -> None:
    """Megatron-FSDP (``nemo`` at ZeRO-3) counts its 16-bit model-weight shard already: with no
    master the optimizer updates that shard, so nothing is added for it and the master's 4
    bytes go."""
    owned = total_params(_scenario().model) / DP
    fsdp = memory_per_gpu(_scenario("nemo", zero_stage=3))
    pure = memory_per_gpu(_scenario("nemo", zero_stage=3, **PURE_BF16))
    assert pure.weights_bytes == pytest.approx(fsdp.weights_bytes)
    assert fsdp.optimizer_bytes - pure.optimizer_bytes == pytest.approx((4 + 4) * owned)


def test_megatron_precision_aware_optimizer_keeps_what_its_distributed_optimizer_allocates() -> (
    None
):
    """Under the precision-aware optimizer Transformer Engine's ``FusedAdam`` holds, per owned
    parameter, ``exp_avg`` and ``exp_avg_sq`` in their dtypes (FP8 as one-byte ``Float8Tensor``
    with a per-tensor scale) and the master as ``torch.int16`` remainders of bf16 weights
    (``store_param_remainders``), else in ``master_weight_dtype``
    (``transformer_engine/pytorch/optimizers/fused_adam.py`` ``_initialize_state`` @ v2.7);
    Megatron-Core's distributed optimizer allocates the same for a checkpoint load
    (``megatron/core/optimizer/distrib_optimizer.py`` ``load_state_dict`` @ core_v0.14.0)."""
    params = total_params(_scenario().model)
    plain = memory_per_gpu(_scenario())
    assert plain.optimizer_bytes == pytest.approx(12 * params / DP)
    defaults = memory_per_gpu(_scenario(main_params_dtype="fp32", store_param_remainders=True))
    assert defaults.optimizer_bytes == pytest.approx((2 + 8) * params / DP)
    low = memory_per_gpu(
        _scenario(main_params_dtype="fp16", exp_avg_dtype="bf16", exp_avg_sq_dtype="fp8")
    )
    assert low.optimizer_bytes == pytest.approx((2 + 2 + 1) * params / DP)
    # the 16-bit weights and fp32 gradients are unchanged
    assert low.weights_bytes == plain.weights_bytes
    assert low.gradients_bytes == plain.gradients_bytes


def test_remainders_follow_the_profile_and_stop_under_zero3() -> None:
    """NeMo's distributed Adam keeps remainders: a stated fp32 master stays 2 bytes there
    unless ``store_param_remainders`` is false; Megatron keeps the whole fp32 master unless
    told; ZeRO-3 shards keep the whole master."""
    params = total_params(_scenario().model)
    owned = params / DP
    nemo = memory_per_gpu(_scenario("nemo", main_params_dtype="fp32"))
    assert nemo.optimizer_bytes == pytest.approx(10 * owned)
    whole = memory_per_gpu(
        _scenario("nemo", main_params_dtype="fp32", store_param_remainders=False)
    )
    assert whole.optimizer_bytes == pytest.approx(12 * owned)
    assert memory_per_gpu(_scenario(main_params_dtype="fp32")).optimizer_bytes == pytest.approx(
        12 * owned
    )
    zero3 = memory_per_gpu(_scenario(zero_stage=3, store_param_remainders=True))
    assert zero3.optimizer_bytes == pytest.approx(12 * owned)


def test_an_fp32_automodel_model_keeps_torchtitans_fp32_shards_and_moments() -> None:
    """NeMo Automodel with ``model.torch_dtype: float32``: FSDP2 shards fp32 parameters that
    ``torch.optim.Adam`` updates with fp32 moments, as torchtitan's: 12 bytes per owned
    parameter against the profile's 4 (bf16 moments, no master)."""
    fp32 = dict.fromkeys(("main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype"), "fp32")
    owned = total_params(_scenario().model) / DP
    assert memory_per_gpu(_scenario("automodel", zero_stage=3)).optimizer_bytes == pytest.approx(
        4 * owned
    )
    automodel = memory_per_gpu(_scenario("automodel", zero_stage=3, **fp32))
    titan = memory_per_gpu(_scenario("torchtitan", zero_stage=3))
    assert automodel.optimizer_bytes == pytest.approx(12 * owned)
    assert automodel.weights_bytes == pytest.approx(titan.weights_bytes)
    assert automodel.optimizer_step_bytes == pytest.approx(4 * owned)  # foreach sqrt, fp32


@pytest.mark.parametrize("zero_stage", [0, 1, 3])
def test_automodel_profile_counts_its_bf16_shard_as_a_stated_bf16_master(zero_stage: int) -> None:
    """NeMo Automodel's profile keeps no master: ``torch.optim.Adam`` updates the bf16 FSDP2
    parameter shard (``MixedPrecisionPolicy(param_dtype=torch.bfloat16)`` over a bf16 model,
    ``nemo_automodel/components/moe/parallelizer.py`` @ 36044ad3d1), so the profile's model
    states and step traffic are those of a stated ``main_params_dtype: bf16``; under ZeRO-3
    the shard is 2 bytes per owned parameter among the weights, beside the 4 of the moments."""
    profile = _scenario("automodel", zero_stage=zero_stage)
    stated = _scenario("automodel", zero_stage=zero_stage, main_params_dtype="bf16")
    implicit, explicit = memory_per_gpu(profile), memory_per_gpu(stated)
    assert implicit.weights_bytes == pytest.approx(explicit.weights_bytes)
    assert implicit.optimizer_bytes == pytest.approx(explicit.optimizer_bytes)
    assert _states(profile) == pytest.approx(_states(stated))
    hbm_implicit, hbm_explicit = _hbm(profile, stated)
    assert hbm_implicit == pytest.approx(hbm_explicit)
    if zero_stage == 3:
        owned = total_params(_scenario().model) / DP
        titan = memory_per_gpu(_scenario("torchtitan", zero_stage=3, **PURE_BF16))
        assert implicit.weights_bytes == pytest.approx(titan.weights_bytes)
        assert implicit.optimizer_bytes == pytest.approx(4 * owned)


def test_optimizer_step_moves_the_stated_bytes() -> None:
    """HBM bytes per owned parameter: 34 with an fp32 master and moments; an fp16 master and
    FP8 moments read and write 2 and 1 + 1; without a master the step reads and writes the
    16-bit weight (4), the bf16 gradient and its norm pass (4) and the moments: 16 with bf16
    ones (a pure-bf16 torchtitan run: Megatron-Core's optimizer keeps a master)."""
    base, low, pure = _hbm(
        _scenario(),
        _scenario(main_params_dtype="fp16", exp_avg_dtype="fp8", exp_avg_sq_dtype="fp8"),
        _scenario("torchtitan", **PURE_BF16),
    )
    assert base / ADAM_HBM_BYTES_PER_PARAM == pytest.approx(low / (34 - 4 - 12))
    assert base / ADAM_HBM_BYTES_PER_PARAM == pytest.approx(pure / 16)


@pytest.mark.parametrize(
    ("framework", "par", "per_param"),
    [
        # Megatron-Core casts the bf16 main gradient to an fp32 copy (read 2, write 4) first
        ("megatron", {}, 34 + 6),
        # its precision-aware optimizer hands TE FusedAdam the bf16 shard: norm and step read 2
        ("megatron", {"main_params_dtype": "fp32", "store_param_remainders": False}, 34 - 4),
        # NeMo's optimizers read the gradient as reduced (and keep a 2-byte master remainder)
        ("nemo", {}, 34 - 4 - 4),
        # no master: the step reads the bf16 gradient the weights have
        ("torchtitan", PURE_BF16, 16),
        # a stack not checked keeps the fp32 gradient read
        ("fsdp", {}, 34),
    ],
)
def test_the_step_reads_a_16_bit_gradient_as_its_stack_does(
    framework: str, par: dict[str, Any], per_param: float
) -> None:
    """Per owned parameter, the bytes of the step with gradients reduced in bf16 against the
    same scenario reducing them in fp32 (34 bytes: fp32 master, moments and gradient) on
    Megatron-LM, ZeRO 1 (``FrameworkProfile.optimizer_grad_read``)."""
    fp32 = _scenario(grad_reduce_in_fp32=True)
    bf16 = _scenario(framework, **{**par, "grad_reduce_in_fp32": False})
    reference, measured = _hbm(fp32, bf16)
    assert measured / reference == pytest.approx(per_param / ADAM_HBM_BYTES_PER_PARAM)
    # under FSDP (ZeRO 3) the master path reads the fp32 gradient of its fp32 shards
    if framework in ("megatron", "nemo") and not par:
        sharded = _hbm(_scenario(framework, zero_stage=3, grad_reduce_in_fp32=False))[0]
        fp32_sharded = _hbm(_scenario(framework, zero_stage=3, grad_reduce_in_fp32=True))[0]
        assert sharded == pytest.approx(fp32_sharded)


@pytest.mark.parametrize(
    ("par", "field", "message"),
    [
        ({"main_params_dtype": "fp8"}, "main_params_dtype", "fp32"),
        ({"exp_avg_dtype": "int8"}, "exp_avg_dtype", "fp8"),
        (
            {"main_params_dtype": "bf16", "precision": "fp16"},
            "main_params_dtype",
            "set main_params_dtype to fp32 or fp16",
        ),
        (
            {
                "main_params_dtype": "bf16",
                "precision": "fp8",
                "fp8_recipe": "tensorwise",
                "fp8_param_gather": True,
            },
            "main_params_dtype",
            "fp8_param_gather",
        ),
        (
            {"main_params_dtype": "fp16", "store_param_remainders": True},
            "store_param_remainders",
            "set main_params_dtype to fp32",
        ),
        (
            {"precision": "fp16", "store_param_remainders": True},
            "store_param_remainders",
            "precision to bf16",
        ),
    ],
)
def test_invalid_optimizer_dtypes_name_the_field_and_the_fix(
    par: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(SpecError, match=rf"parallelism\.{field}.*{message}"):
        _scenario(**par)


def test_the_optimizer_dtypes_are_carried_into_every_candidate() -> None:
    """One value per explore document: each candidate keeps them, the sweep predicts as
    ``predict`` does, and the output states them."""
    doc: dict[str, Any] = {
        "model": {"preset": "llama3-8b", "seq_length": 1024},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
        "parallelism": {
            "global_batch_size": 32,
            "recompute": ["none"],
            "zero_stage": [1, 3],
            "main_params_dtype": "fp16",
            "exp_avg_dtype": "bf16",
            "exp_avg_sq_dtype": "bf16",
        },
        "training": {"framework": "megatron"},
    }
    assert_carried_into_candidates(
        doc, {"main_params_dtype": "fp16", "exp_avg_dtype": "bf16", "exp_avg_sq_dtype": "bf16"}
    )


def assert_carried_into_candidates(doc: dict[str, Any], fields: dict[str, object]) -> None:
    """Every candidate ``explore`` keeps of the explore document ``doc`` holds the one-value
    ``parallelism`` ``fields``, is predicted by the sweep as ``predict`` predicts it, and the
    best entry of ``explore_document`` states them."""
    result = explore(parse_space(copy.deepcopy(doc)), top_k=10, tolerance=None)
    assert result.top
    for entry in result.top:
        for name, value in fields.items():
            assert getattr(entry.scenario.parallelism, name) == value
        assert predict(entry.scenario) == entry.prediction
    out = explore_document(copy.deepcopy(doc), top_k=1)
    assert "top" in out
    (best,) = out["top"]
    for name, value in fields.items():
        assert best["parallelism"][name] == value


@pytest.mark.parametrize(
    ("par", "per_param"),
    [
        ({}, 84),  # fp32 master, moments and gradient
        # stated fp32 master with bf16 moments: 5·2 + 11·2 + 2·4 + 3·4
        ({"main_params_dtype": "fp32", "exp_avg_dtype": "bf16", "exp_avg_sq_dtype": "bf16"}, 52),
        # a bf16 model with bf16 moments and gradients (no master): 5·2 + 11·2 + 2·2 + 3·2
        (PURE_BF16, 42),
    ],
)
def test_composer_decoupled_adamw_moves_the_stated_dtypes_through_its_eager_kernels(
    par: dict[str, Any], per_param: float
) -> None:
    """llm-foundry's ``DecoupledAdamW`` runs one eager kernel per operation: 5 first-moment,
    11 second-moment, 2 parameter and 3 gradient element accesses per owned parameter, each at
    the stated dtype's bytes, against the fused 34 bytes of Megatron-LM's fp32 step."""
    fused, eager = _hbm(_scenario(), _scenario("llm_foundry", **par))
    assert eager / fused == pytest.approx(per_param / ADAM_HBM_BYTES_PER_PARAM)
