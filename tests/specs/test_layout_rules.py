"""Layout rules of MoE and uneven pipelines: MoE parallel folding, the uneven-split fields, the
interleaved schedule's micro-batch rule per framework (planner.specs.feasibility)."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from planner.cli import app
from planner.errors import SpecError
from planner.perf.batch import ScenarioArrays
from planner.perf.candidates import CandidateColumns
from planner.scenario import parse_scenario
from planner.specs import ParallelismSpec, Scenario
from planner.specs.feasibility import (
    EXPERT_BIAS_SOURCE,
    Violation,
    default_sequence_parallel,
    expert_tensor_parallel_of,
    first_violation,
    layout_violations,
)
from planner.specs.scenario import Framework, TrainingSpec
from tests.specs.test_specs import _hardware, _model

MOE = _model(
    num_layers=8,
    num_attention_heads=16,
    num_query_groups=8,
    kv_channels=64,
    hidden_size=1024,
    ffn_hidden_size=4096,
    seq_length=1024,
    num_experts=64,
    moe_router_topk=4,
    moe_ffn_hidden_size=768,
)


@dataclasses.dataclass(frozen=True)
class _One:
    """One candidate with the folding and split knobs, without ParallelismSpec's checks."""

    tensor_parallel: int
    pipeline_parallel: int
    context_parallel: int
    expert_parallel: int
    data_parallel: int
    virtual_pipeline: int
    sequence_parallel: bool
    micro_batch_size: int
    global_batch_size: int
    expert_tensor_parallel: int | None = None
    account_for_embedding_in_pipeline_split: bool = False
    account_for_loss_in_pipeline_split: bool = False


def _scenario(framework: str = "megatron", num_gpus: int = 64, **par: object) -> Scenario:
    tp = int(par.get("tensor_parallel", 1))  # type: ignore[call-overload]
    # Megatron-Core trains MoE layers with tensor parallelism only under sequence parallelism,
    # NeMo Automodel only without it: the scenario's default
    sp = default_sequence_parallel(tp, framework)
    defaults = {"global_batch_size": 256, "sequence_parallel": sp}
    parallelism = ParallelismSpec(**{**defaults, **par})  # type: ignore[arg-type]
    return Scenario(
        model=MOE,
        hardware=_hardware(num_gpus),
        parallelism=parallelism,
        training=TrainingSpec(framework=Framework(framework)),
    )


def test_qwen3_style_folding_is_accepted_as_megatron_core_folds_it() -> None:
    """tp 2 x ep 64 on 64 GPUs: the expert groups take all 64 ranks of the stage with expert
    tensor parallel 1 (Megatron-Core parallel_state: world % (etp·ep·pp) == 0)."""
    s = _scenario(tensor_parallel=2, data_parallel=32, expert_parallel=64, expert_tensor_parallel=1)
    assert s.parallelism.expert_tensor_parallel == 1
    unset = _scenario(tensor_parallel=2, data_parallel=32, expert_parallel=64)
    assert expert_tensor_parallel_of(MOE, 64, unset.parallelism) == 1
    # where Megatron-Core's default (expert tensor parallel = tensor parallel) folds, it is kept
    default = _scenario(tensor_parallel=2, data_parallel=32, expert_parallel=32)
    assert expert_tensor_parallel_of(MOE, 64, default.parallelism) == 2
    with pytest.raises(SpecError, match="expert_tensor_parallel·expert_parallel = 2·64") as err:
        _scenario(tensor_parallel=2, data_parallel=32, expert_parallel=64, expert_tensor_parallel=2)
    assert err.value.field == "parallelism.expert_parallel"
    assert "Megatron-Core parallel_state" in err.value.message
    with pytest.raises(SpecError, match=r"768") as err:
        _scenario(tensor_parallel=1, data_parallel=64, expert_parallel=8, expert_tensor_parallel=5)
    assert err.value.field == "parallelism.expert_tensor_parallel"


@settings(max_examples=400, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 4, 8]),
    cp=st.sampled_from([1, 2, 4]),
    etp=st.sampled_from([1, 2, 3, 4, 8, 16]),
    ep=st.sampled_from([1, 2, 3, 4, 8, 16, 32, 64]),
)
def test_folding_product_rule(tp: int, cp: int, etp: int, ep: int) -> None:
    """Property: with the other rules met, a layout is accepted exactly when
    expert_tensor_parallel · expert_parallel divides tensor · context · data (and ep divides
    the experts, etp the expert FFN); its expert data-parallel group is the quotient."""
    num_gpus = 64
    dp = num_gpus // (tp * cp)
    one = _One(tp, 1, cp, ep, dp, 1, tp > 1, 1, 256, etp)
    folds = (tp * cp * dp) % (etp * ep) == 0
    fits_model = 64 % ep == 0 and 768 % etp == 0
    violation = first_violation(MOE, num_gpus, one)
    assert (violation is not Violation.EXPERT_PARALLEL_INVALID) == (folds and fits_model)
    if violation is None:
        from planner.perf.batch import ScenarioArrays

        a = ScenarioArrays.from_scenario(
            _scenario(
                tensor_parallel=tp,
                context_parallel=cp,
                data_parallel=dp,
                expert_parallel=ep,
                expert_tensor_parallel=etp,
                sequence_parallel=tp > 1,
            )
        )
        assert a.expert_data_parallel_size * etp * ep == tp * cp * dp


def _random_columns(n: int, seed: int) -> CandidateColumns:
    rng = np.random.default_rng(seed)

    def pick(values: list[int]) -> np.ndarray:
        return rng.choice(np.asarray(values, dtype=np.int64), n)

    return CandidateColumns(
        tensor_parallel=pick([1, 2, 4, 8]),
        pipeline_parallel=pick([1, 2, 3, 4, 5]),
        context_parallel=pick([1, 2, 4]),
        expert_parallel=pick([1, 2, 4, 8, 16, 32]),
        data_parallel=pick([1, 2, 4, 8, 16]),
        virtual_pipeline=pick([1, 2, 3]),
        sequence_parallel=rng.random(n) < 0.5,
        micro_batch_size=pick([1, 2, 4]),
        global_batch_size=pick([24, 48, 96, 128]),
        recompute=np.zeros(n, dtype=np.int64),
        zero_stage=np.ones(n, dtype=np.int64),
        num_gpus=np.full(n, 64, dtype=np.int64),
        expert_tensor_parallel=pick([1, 2, 4, 8]),
        account_for_embedding_in_pipeline_split=rng.random(n) < 0.5,
        account_for_loss_in_pipeline_split=rng.random(n) < 0.5,
    )


@pytest.mark.parametrize("framework", ["megatron", "nemo", "torchtitan", "deepspeed", "other"])
def test_batch_and_one_candidate_readers_agree_on_the_new_knobs(framework: str) -> None:
    cols = _random_columns(4000, seed=len(framework))
    codes = layout_violations(MOE, 64, cols, framework=framework)
    assert -1 in codes.tolist()
    for i in range(cols.n):
        one = _One(
            **{
                f.name: (bool if isinstance(getattr(cols, f.name)[i], np.bool_) else int)(
                    getattr(cols, f.name)[i]
                )
                for f in dataclasses.fields(_One)
            }
        )
        first = first_violation(MOE, 64, one, framework=framework)
        assert (-1 if first is None else first.code) == codes[i]


BIASED = dataclasses.replace(MOE, moe_expert_bias=True)
"""``MOE`` with biases on its routed experts (as GPT-OSS's)."""
BIAS_RULE = Violation.BIASED_EXPERTS_NEED_EXPERT_TENSOR_PARALLEL_1


def _one_of(cols: CandidateColumns, i: int) -> _One:
    def item(name: str) -> object:
        column = getattr(cols, name)
        if column is None:  # a knob the columns leave unset
            return None
        return bool(column[i]) if isinstance(column[i], np.bool_) else int(column[i])

    return _One(**{f.name: item(f.name) for f in dataclasses.fields(_One)})  # type: ignore[arg-type]


@pytest.mark.parametrize("etp_stated", [True, False])
@pytest.mark.parametrize("framework", ["megatron", "nemo", "torchtitan", "automodel", "other"])
def test_batch_and_one_candidate_readers_agree_on_biased_experts(
    framework: str, etp_stated: bool
) -> None:
    """Arrays and one candidate find the same first rule for biased experts, with the expert
    tensor-parallel degree stated or left to its default; the rule refuses only under
    Megatron-Core (Megatron-LM, NeMo) and only biased experts."""
    cols = _random_columns(4000, seed=len(framework) + 10 * etp_stated)
    if not etp_stated:
        cols = dataclasses.replace(cols, expert_tensor_parallel=None)
    codes = layout_violations(BIASED, 64, cols, framework=framework)
    assert (BIAS_RULE.code in codes.tolist()) == (framework in ("megatron", "nemo"))
    assert BIAS_RULE.code not in layout_violations(MOE, 64, cols, framework=framework).tolist()
    for i in range(cols.n):
        first = first_violation(BIASED, 64, _one_of(cols, i), framework=framework)
        assert (-1 if first is None else first.code) == codes[i]


def _biased(framework: str = "megatron", **par: object) -> Scenario:
    tp = int(par.get("tensor_parallel", 1))  # type: ignore[call-overload]
    sp = default_sequence_parallel(tp, framework)
    defaults = {"global_batch_size": 256, "sequence_parallel": sp}
    return Scenario(
        model=BIASED,
        hardware=_hardware(64),
        parallelism=ParallelismSpec(**{**defaults, **par}),
        training=TrainingSpec(framework=Framework(framework)),
    )


@pytest.mark.parametrize("framework", ["megatron", "nemo"])
def test_biased_experts_need_expert_tensor_parallel_1_under_megatron_core(framework: str) -> None:
    """Megatron-Core asserts expert tensor parallelism 1 for biased experts
    (``EXPERT_BIAS_SOURCE``): the scenario names the field that set the degree (the
    expert tensor-parallel degree, or the tensor-parallel one it defaults to) and the fix."""
    layout = {"tensor_parallel": 2, "expert_parallel": 8, "data_parallel": 32}
    with pytest.raises(SpecError) as unset:
        _biased(framework, **layout)
    assert unset.value.field == "parallelism.tensor_parallel"
    assert "Bias in Moe is only supported when ETP==1" in unset.value.message
    assert "expert_tensor_parallel to 1" in unset.value.message
    with pytest.raises(SpecError) as stated:
        _biased(framework, **layout, expert_tensor_parallel=2)
    assert stated.value.field == "parallelism.expert_tensor_parallel"
    assert "expert_tensor_parallel=2" in stated.value.message
    assert _biased(framework, **layout, expert_tensor_parallel=1).parallelism.tensor_parallel == 2
    assert "a329dd6da586261a45a8f7d04c1e659ffedd80ae" in EXPERT_BIAS_SOURCE


def test_biased_experts_split_by_tensor_parallel_run_outside_megatron_core() -> None:
    layout = {"tensor_parallel": 2, "expert_parallel": 8, "data_parallel": 32}
    for framework in ("torchtitan", "automodel"):
        assert _biased(framework, **layout).model.moe_expert_bias
    unbiased = _scenario(tensor_parallel=2, expert_parallel=8, data_parallel=32)  # no biases
    assert int(expert_tensor_parallel_of(MOE, 64, unbiased.parallelism)) == 2


def test_predict_refuses_biased_experts_split_by_tensor_parallel(tmp_path: Path) -> None:
    """``planner predict`` answers a GPT-OSS layout Megatron-Core refuses with the field and the
    fix (exit status 2), not a traceback."""
    doc: dict[str, dict[str, object]] = {
        "model": {"preset": "gpt-oss-20b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 16},
        "parallelism": {"tensor_parallel": 2, "expert_parallel": 8, "global_batch_size": 64},
        "training": {"framework": "megatron"},
    }
    path = tmp_path / "gpt-oss.yaml"
    path.write_text(yaml.safe_dump(doc))
    refused = CliRunner().invoke(app, ["predict", str(path)])
    assert refused.exit_code == 2, refused.output
    assert "Traceback" not in refused.output
    assert "INVALID parallelism.tensor_parallel:" in refused.output
    assert "set parallelism.expert_tensor_parallel to 1" in refused.output
    doc["parallelism"]["expert_tensor_parallel"] = 1
    path.write_text(yaml.safe_dump(doc))
    accepted = CliRunner().invoke(app, ["predict", str(path)])
    assert accepted.exit_code == 0, accepted.output


@pytest.mark.parametrize(
    ("framework", "micro", "p", "refused"),
    [
        ("megatron", 12, 4, False),
        ("megatron", 6, 4, True),  # Megatron-Core: a last micro-batch group smaller than p
        ("megatron", 2, 4, True),  # Megatron-Core: fewer micro-batches than p
        ("nemo", 10, 4, True),
        ("torchtitan", 10, 4, False),  # 2 rounds of 5
        ("torchtitan", 9, 4, True),  # 2 rounds do not divide 9
        ("torchtitan", 3, 4, False),  # one round: m < p runs
        ("deepspeed", 9, 4, False),
        ("other", 1, 4, False),
    ],
)
def test_interleaved_schedule_microbatch_rule(
    framework: str, micro: int, p: int, refused: bool
) -> None:
    layout = {
        "tensor_parallel": 1,
        "pipeline_parallel": p,
        "data_parallel": 16,
        "virtual_pipeline": 2,
        "global_batch_size": 16 * micro,
    }
    if refused:
        with pytest.raises(SpecError) as err:
            _scenario(framework, **layout)
        assert err.value.field == "parallelism.virtual_pipeline"
        rule = "Megatron-Core interleaved 1F1B" if framework != "torchtitan" else "rounds"
        assert rule in err.value.message
        assert f"= {micro})" in err.value.message
    else:
        _scenario(framework, **layout)
    # without interleaving every framework runs any micro-batch count
    _scenario(framework, **{**layout, "virtual_pipeline": 1})


@pytest.mark.parametrize(
    ("fields", "field", "text"),
    [
        (
            {"decoder_first_pipeline_num_layers": 1, "account_for_loss_in_pipeline_split": True},
            "parallelism.decoder_first_pipeline_num_layers",
            "cannot be combined with account_for",
        ),
        (
            {"pipeline_layout": "Ett|ttL", "decoder_last_pipeline_num_layers": 2},
            "parallelism.pipeline_layout",
            "cannot be combined",
        ),
        ({"pipeline_layout": "Ett|tt|ttL"}, "parallelism.pipeline_layout", "3 virtual stages"),
        (
            {"pipeline_layout": "Et|t|t|tL", "virtual_pipeline": 1},
            "parallelism.virtual_pipeline",
            "virtual_pipeline is 2",
        ),
        ({"pipeline_layout": 7}, "parallelism.pipeline_layout", "layout string"),
        ({"pipeline_layout": (4, -1)}, "parallelism.pipeline_layout[1]", ">= 0"),
        ({"account_for_loss_in_pipeline_split": 1}, "parallelism.account_for_loss", "true or"),
    ],
)
def test_split_fields_are_checked_on_construction(
    fields: dict[str, object], field: str, text: str
) -> None:
    layout = {"pipeline_parallel": 2, "data_parallel": 1, "global_batch_size": 8, **fields}
    with pytest.raises(SpecError, match=text) as err:
        ParallelismSpec(**layout)  # type: ignore[arg-type]
    assert err.value.field.startswith(field)


def test_automodel_keeps_the_routed_experts_whole_under_tensor_parallelism() -> None:
    """NeMo Automodel's MoE tensor-parallel plan may not target the routed experts
    (``_resolve_moe_tp_plan``): an unset expert tensor-parallel degree is 1 there (the
    tensor-parallel degree under Megatron-Core), the engine times the experts whole, and a
    stated degree above 1 is refused naming the field."""
    layout = {"tensor_parallel": 2, "expert_parallel": 8, "data_parallel": 32}
    automodel = _scenario("automodel", **layout)
    megatron = _scenario("megatron", **layout)
    assert int(expert_tensor_parallel_of(MOE, 64, automodel.parallelism, "automodel")) == 1
    assert int(expert_tensor_parallel_of(MOE, 64, megatron.parallelism, "megatron")) == 2
    arrays = ScenarioArrays.from_scenarios([automodel, megatron])
    assert list(np.asarray(arrays.expert_tensor_parallel)) == [1.0, 2.0]
    with pytest.raises(SpecError) as stated:
        _scenario("automodel", **layout, expert_tensor_parallel=2)
    assert stated.value.field == "parallelism.expert_tensor_parallel"
    assert "_resolve_moe_tp_plan" in stated.value.message
    assert "expert_tensor_parallel=2" in stated.value.message
    whole = _scenario("automodel", **layout, expert_tensor_parallel=1)
    assert whole.parallelism.expert_tensor_parallel == 1
    # the same candidates as arrays: only the stated degree 2 under Automodel is refused
    cols = CandidateColumns(
        tensor_parallel=np.array([2, 2]),
        pipeline_parallel=np.ones(2, dtype=np.int64),
        context_parallel=np.ones(2, dtype=np.int64),
        expert_parallel=np.full(2, 8),
        data_parallel=np.full(2, 32),
        virtual_pipeline=np.ones(2, dtype=np.int64),
        sequence_parallel=np.ones(2, dtype=np.bool_),
        micro_batch_size=np.ones(2, dtype=np.int64),
        global_batch_size=np.full(2, 256),
        recompute=np.zeros(2, dtype=np.int64),
        zero_stage=np.ones(2, dtype=np.int64),
        num_gpus=np.full(2, 64),
        expert_tensor_parallel=np.array([1, 2]),
    )
    refused = Violation.EXPERTS_NOT_SPLIT_BY_FRAMEWORK.code
    # Automodel runs MoE tensor parallelism without sequence parallelism, Megatron-Core with it
    unsequenced = dataclasses.replace(cols, sequence_parallel=np.zeros(2, dtype=np.bool_))
    codes = layout_violations(MOE, 64, unsequenced, framework="automodel")
    assert list(codes) == [-1, refused]
    assert list(layout_violations(MOE, 64, cols, framework="megatron")) == [-1, -1]


def test_automodel_moe_tensor_parallelism_runs_without_sequence_parallelism() -> None:
    """NeMo Automodel's MoE tensor-parallel plan raises for sequence parallelism
    (``MOE_SEQUENCE_PARALLEL_REFUSED_SOURCE``): a scenario that leaves it out runs without it
    there (with it under Megatron-LM, which needs it), one that states it is refused naming
    the field and the fix."""
    doc: dict[str, Any] = {
        "model": {"preset": "gpt-oss-20b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 16},
        "parallelism": {"tensor_parallel": 2, "expert_parallel": 8, "global_batch_size": 64},
        "training": {"framework": "automodel"},
    }
    assert parse_scenario(copy.deepcopy(doc)).parallelism.sequence_parallel is False
    megatron = copy.deepcopy(doc)
    megatron["training"]["framework"] = "megatron"
    megatron["parallelism"]["expert_tensor_parallel"] = 1
    assert parse_scenario(megatron).parallelism.sequence_parallel is True
    doc["parallelism"]["sequence_parallel"] = True
    with pytest.raises(SpecError) as refused:
        parse_scenario(copy.deepcopy(doc))
    assert refused.value.field == "parallelism.sequence_parallel"
    assert "_resolve_moe_tp_plan" in refused.value.message
    assert "set sequence_parallel to false" in refused.value.message


DENSE_TP2: dict[str, Any] = {
    "model": {"preset": "llama2-7b"},
    "hardware": {"gpu": "h100-sxm", "num_gpus": 16},
    "parallelism": {"tensor_parallel": 2, "global_batch_size": 64},
}
"""Llama-2 7B with tensor parallelism 2 on 16 H100, the framework to be set."""


@pytest.mark.parametrize(
    ("framework", "expected"),
    [("automodel", False), ("megatron", True), ("nemo", True), ("torchtitan", True)],
)
def test_sequence_parallel_default_follows_the_framework_for_dense_models(
    framework: str, expected: bool
) -> None:
    """NeMo Automodel's ``FSDP2Config.sequence_parallel`` is false unless a run turns it on,
    for dense models too (``SEQUENCE_PARALLEL_OFF_BY_DEFAULT``): a dense scenario that leaves
    it out runs without it there, with it (tensor parallelism > 1) elsewhere; a stated value
    is kept, and Automodel runs a dense model with it."""
    doc = copy.deepcopy(DENSE_TP2)
    doc["training"] = {"framework": framework}
    assert parse_scenario(copy.deepcopy(doc)).parallelism.sequence_parallel is expected
    for stated in (True, False):
        doc["parallelism"]["sequence_parallel"] = stated
        assert parse_scenario(copy.deepcopy(doc)).parallelism.sequence_parallel is stated


def test_automodel_refuses_async_tensor_parallelism_for_moe() -> None:
    """NeMo Automodel's MoE parallelizer raises for ``enable_async_tensor_parallel`` with a
    tensor-parallel mesh larger than 1 (``ASYNC_TENSOR_PARALLEL_SOURCE``): a scenario stating
    ``tp_comm_overlap: true`` is refused naming that field and the fix; with tensor parallelism
    1, or async TP off (its default), it is not; Megatron-LM runs it."""
    doc: dict[str, Any] = {
        "model": {"preset": "gpt-oss-20b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 16},
        "parallelism": {
            "tensor_parallel": 2,
            "expert_parallel": 8,
            "global_batch_size": 64,
            "tp_comm_overlap": True,
        },
        "training": {"framework": "automodel"},
    }
    with pytest.raises(SpecError) as refused:
        parse_scenario(copy.deepcopy(doc))
    assert refused.value.field == "parallelism.tp_comm_overlap"
    assert "not supported by the custom MoE TP path" in refused.value.message
    assert "set tp_comm_overlap to false, or tensor_parallel to 1" in refused.value.message
    one = copy.deepcopy(doc)
    one["parallelism"]["tensor_parallel"] = 1
    assert parse_scenario(one).parallelism.tp_comm_overlap is True
    off = copy.deepcopy(doc)
    del off["parallelism"]["tp_comm_overlap"]
    assert parse_scenario(off).parallelism.tensor_parallel == 2
    megatron = copy.deepcopy(doc)
    megatron["training"]["framework"] = "megatron"
    megatron["parallelism"]["expert_tensor_parallel"] = 1
    assert parse_scenario(megatron).parallelism.tp_comm_overlap is True


@pytest.mark.parametrize("framework", ["automodel", "torchtitan"])
def test_automodel_async_tensor_parallelism_needs_sequence_parallelism(framework: str) -> None:
    """NeMo Automodel's dense parallelizer raises for ``enable_async_tensor_parallel`` without
    sequence parallelism (``ASYNC_TENSOR_PARALLEL_SOURCE``), which it leaves off by default: a
    dense scenario stating ``tp_comm_overlap: true`` with tensor parallelism 2 and no
    ``sequence_parallel`` is refused there naming ``parallelism.sequence_parallel`` and the fix,
    and runs once it states it; torchtitan is not refused (its sequence parallelism is on by
    the planner's default)."""
    doc = copy.deepcopy(DENSE_TP2)
    doc["parallelism"]["tp_comm_overlap"] = True
    doc["training"] = {"framework": framework}
    if framework == "automodel":
        with pytest.raises(SpecError) as refused:
            parse_scenario(copy.deepcopy(doc))
        assert refused.value.field == "parallelism.sequence_parallel"
        assert "requires sequence_parallel=True" in refused.value.message
        assert "set sequence_parallel to true, or tp_comm_overlap to false" in (
            refused.value.message
        )
        doc["parallelism"]["sequence_parallel"] = True
    scenario = parse_scenario(copy.deepcopy(doc))
    assert scenario.parallelism.sequence_parallel is True
    assert scenario.parallelism.tp_comm_overlap is True


@pytest.mark.parametrize("framework", ["megatron", "nemo", "torchtitan"])
def test_megatron_lm_tp_comm_overlap_needs_sequence_parallelism(framework: str) -> None:
    """Megatron-LM's ``validate_args`` asserts sequence parallelism for ``--tp-comm-overlap``
    and turns it off at tensor parallelism 1 first (``TP_COMM_OVERLAP_SEQUENCE_SOURCE``): a
    scenario stating ``tp_comm_overlap: true`` with tensor parallelism 2 and
    ``sequence_parallel: false`` is refused naming ``parallelism.sequence_parallel``, one with
    tensor parallelism 1 naming ``parallelism.tp_comm_overlap``, each with the fix; with
    sequence parallelism it runs, and an unset ``tp_comm_overlap`` (the profile's default, on
    for Megatron-LM) is never refused. NeMo drops the overlap with a warning instead, and
    torchtitan is not checked: neither refuses."""
    refused_here = framework == "megatron"
    for tp, sp, field in (
        (2, False, "parallelism.sequence_parallel"),
        (1, False, "parallelism.tp_comm_overlap"),
    ):
        doc = copy.deepcopy(DENSE_TP2)
        doc["parallelism"].update(tensor_parallel=tp, sequence_parallel=sp, tp_comm_overlap=True)
        doc["training"] = {"framework": framework}
        unset = copy.deepcopy(doc)
        del unset["parallelism"]["tp_comm_overlap"]
        assert parse_scenario(unset).parallelism.tp_comm_overlap is None
        if not refused_here:
            assert parse_scenario(copy.deepcopy(doc)).parallelism.tp_comm_overlap is True
            continue
        with pytest.raises(SpecError) as refused:
            parse_scenario(copy.deepcopy(doc))
        assert refused.value.field == field
        assert "can happen only when sequence parallelism is enabled" in refused.value.message
        fix = (
            "set sequence_parallel to true, or tp_comm_overlap to false"
            if tp > 1
            else "set tp_comm_overlap to false, or tensor_parallel above 1 with sequence_parallel"
        )
        assert fix in refused.value.message
    doc = copy.deepcopy(DENSE_TP2)
    doc["parallelism"].update(sequence_parallel=True, tp_comm_overlap=True)
    doc["training"] = {"framework": framework}
    assert parse_scenario(doc).parallelism.tp_comm_overlap is True


def test_megatron_lm_refuses_tp_comm_overlap_for_moe_at_tensor_parallel_1() -> None:
    """The assertion reads no model: an MoE model at tensor parallelism 1 stating
    ``tp_comm_overlap: true`` is refused under Megatron-LM as a dense one is (NeMo runs it,
    without the overlap); with the overlap off or unset it runs."""
    doc: dict[str, Any] = {
        "model": {"preset": "gpt-oss-20b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 16},
        "parallelism": {"expert_parallel": 8, "global_batch_size": 64, "tp_comm_overlap": True},
        "training": {"framework": "megatron"},
    }
    with pytest.raises(SpecError) as refused:
        parse_scenario(copy.deepcopy(doc))
    assert refused.value.field == "parallelism.tp_comm_overlap"
    doc["parallelism"]["tp_comm_overlap"] = False
    scenario = parse_scenario(doc)
    model, gpus = scenario.model, scenario.hardware.num_gpus
    for overlap, framework, expected in (
        (True, "megatron", Violation.ASYNC_TENSOR_PARALLEL_NEEDS_SEQUENCE_PARALLEL),
        (True, "nemo", None),
        (False, "megatron", None),
        (None, "megatron", None),
    ):
        par = dataclasses.replace(scenario.parallelism, tp_comm_overlap=overlap)
        assert first_violation(model, gpus, par, framework=framework) is expected
