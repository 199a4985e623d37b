"""The Megatron-LM reader: which programs it takes, the flags read as Megatron's argparse and
validate_args read them (each with its source), ``--yaml-cfg`` files, tokenizer vocabularies and
sample-based step counts with a batch ramp-up."""

from __future__ import annotations

import random
import shlex

import pytest

from planner.errors import PlannerError
from planner.launch.describe import LaunchDescription, describe_launch, finish
from planner.launch.readers.megatron import READER
from planner.launch.types import Facts, Invocation, Launch, MemoryFiles
from planner.scenario import parse_scenario
from planner.scenario.megatron_args import train_iters_from_samples
from tests.launch import reader_support as support

JOB = "/jobs/mlm"

BASE = (
    "--num-layers 16 --hidden-size 1536 --num-attention-heads 12 --seq-length 2048 "
    "--micro-batch-size 2 --global-batch-size 96 --bf16 --train-iters 5000"
)


def _files() -> MemoryFiles:
    return support.data_files("megatron", JOB)


def _invocation(args: str, program: str = "pretrain_gpt.py") -> Invocation:
    return Invocation(
        program=program,
        args=tuple(shlex.split(args)),
        cwd=JOB,
        launcher="torchrun",
        where="job.sh:9",
    )


def _read(args: str, *, gpus: int = 8, finished: bool = True) -> Facts:
    facts = support.read(
        READER, _invocation(args), _files(), given=support.allocation(gpus), invocations=()
    )
    if finished:
        facts.set("hardware.num_gpus", gpus, "launch")
        finish(facts)
    return facts


@pytest.mark.parametrize(
    ("program", "args", "expected"),
    [
        ("pretrain_gpt.py", "--lr 1e-4", True),
        ("/opt/Megatron-LM/pretrain_gpt.py", BASE, True),
        ("examples/train_moe.py", "--num-layers=4 --hidden-size 64", True),
        ("launch.py", "--yaml-cfg cfg.yaml", True),
        ("train.py", "--num_layers 32 --hidden_width 4096", False),  # not Megatron's spelling
        ("pretrain_bert.py", BASE, False),
        ("pretrain_mamba.py", BASE, False),
        ("torchtitan.train", BASE, False),
    ],
)
def test_recognised_programs(program: str, args: str, expected: bool) -> None:
    assert READER.recognises(_invocation(args, program)) is expected


def test_flags_with_their_sources_and_megatron_defaults() -> None:
    facts = _read(BASE + " --swiglu --tensor-model-parallel-size 2")
    assert facts.get("model.num_layers") == 16
    assert facts.values["model.num_layers"].source == "job.sh:9 (--num-layers)"
    # swiglu without --ffn-hidden-size: int(8 * 1536 / 3 / 64) * 64
    assert facts.get("model.ffn_hidden_size") == 4096
    assert "int(8 x hidden 1536 / 3 / 64)" in facts.values["model.ffn_hidden_size"].source
    assert facts.get("model.num_query_groups") == 12  # multi-head attention
    assert facts.get("parallelism.data_parallel") == 4
    assert facts.get("launch.gradient_accumulation") == 12
    assert facts.get("parallelism.zero_stage") == 0
    assert "parallelism.zero_stage" in facts.assumed
    assert "Megatron-LM" in facts.values["parallelism.zero_stage"].source
    assert "@10e7b74" in facts.values["parallelism.pipeline_parallel"].source
    assert facts.get("parallelism.precision") == "bf16"
    assert facts.get("training.train_iters") == 5000
    assert facts.get("training.mode") == "pretrain"


def test_gelu_ffn_is_four_times_the_width_and_gqa_needs_its_switch() -> None:
    facts = _read(BASE + " --num-query-groups 4")
    assert facts.get("model.ffn_hidden_size") == 4 * 1536
    assert facts.get("model.num_query_groups") == 12
    assert any("--num-query-groups is ignored" in note for note in facts.notes)
    grouped = _read(BASE + " --group-query-attention --num-query-groups 4")
    assert grouped.get("model.num_query_groups") == 4
    default = _read(BASE + " --group-query-attention")
    assert default.get("model.num_query_groups") == 1  # argparse default of --num-query-groups


def test_gpt2_vocabulary_padded_to_the_tensor_parallel_multiple() -> None:
    facts = _read(BASE + " --tensor-model-parallel-size 4 --vocab-file /data/gpt2-vocab.json")
    assert facts.get("model.vocab_size") == 50257  # pretrain_gpt.py's GPT2BPETokenizer
    assert facts.get("launch.padded_vocab_size") == 50688  # multiple of 128 x 4
    assert facts.values["model.vocab_size"].source.startswith("catalog:gpt2")


@pytest.mark.parametrize(
    ("flags", "vocab", "padded"),
    [
        ("--tokenizer-type NullTokenizer --vocab-size 1000", 1001, 1024),
        (
            "--tokenizer-type HuggingFaceTokenizer --tokenizer-model meta-llama/Llama-3.1-8B",
            128256,
            128256,
        ),
        ("--tokenizer-type GPT2BPETokenizer --make-vocab-size-divisible-by 64", 50257, 50304),
        ("--padded-vocab-size 51200", 50257, 51200),
    ],
)  # fmt: skip
def test_tokenizer_vocabularies(flags: str, vocab: int, padded: int) -> None:
    facts = _read(f"{BASE} {flags}")
    assert (facts.get("model.vocab_size"), facts.get("launch.padded_vocab_size")) == (vocab, padded)


def test_a_tokenizer_file_outside_the_launch_leaves_the_vocabulary_unknown() -> None:
    facts = _read(BASE + " --tokenizer-type SentencePieceTokenizer --tokenizer-model ./tok.model")
    assert not facts.has("model.vocab_size")
    assert "model.vocab_size" in facts.unknown
    assert any("tok.model is not part of the launch" in note for note in facts.notes)


def test_zero_stage_recompute_and_precision_flags() -> None:
    facts = _read(BASE + " --use-distributed-optimizer --recompute-activations --fp8-format hybrid")
    assert facts.get("parallelism.zero_stage") == 1
    assert facts.get("parallelism.recompute") == "selective"
    assert facts.get("parallelism.precision") == "fp8"
    assert _read(BASE + " --use-torch-fsdp2").get("parallelism.zero_stage") == 3
    fp32 = _read(BASE.replace(" --bf16", ""), finished=False)
    assert not fp32.has("parallelism.precision")
    assert any("fp32" in note for note in fp32.notes)


def test_global_batch_defaults_to_micro_times_data_parallel() -> None:
    facts = _read(BASE.replace(" --global-batch-size 96", "") + " --pipeline-model-parallel-size 2")
    assert facts.get("parallelism.global_batch_size") == 2 * 4
    assert "validate_args" in facts.values["parallelism.global_batch_size"].source


def test_moe_flags_and_their_defaults() -> None:
    facts = _read(
        BASE + " --num-experts 8 --expert-model-parallel-size 4 --swiglu --ffn-hidden-size 4096 "
        '--moe-layer-freq "[0]*2+[1]*14" --tensor-model-parallel-size 2'
    )
    assert facts.get("model.num_experts") == 8
    assert facts.get("model.moe_router_topk") == 2  # TransformerConfig.moe_router_topk
    assert "model.moe_router_topk" in facts.assumed
    assert facts.get("model.moe_ffn_hidden_size") == 4096  # the FFN width when not given
    assert facts.get("model.moe_layer_freq") == [0, 0] + [1] * 14
    assert facts.get("parallelism.expert_parallel") == 4
    assert facts.get("parallelism.expert_tensor_parallel") == 2
    assert facts.get("model.moe_token_dispatcher_type") == "allgather"


def test_experts_are_biased_unless_the_launch_passes_disable_bias_linear() -> None:
    moe = BASE + " --num-experts 8 --expert-model-parallel-size 8"
    biased = _read(moe)
    assert biased.get("model.moe_expert_bias") is True  # add_bias_linear defaults to true
    assert "model.moe_expert_bias" in biased.assumed
    assert "transformer_config.py" in biased.values["model.moe_expert_bias"].source
    plain = _read(moe + " --disable-bias-linear --swiglu")
    assert plain.get("model.moe_expert_bias") is False
    assert plain.values["model.moe_expert_bias"].source.endswith("(--disable-bias-linear)")
    assert plain.get("model.activation") == "swiglu"  # the switch takes no value
    assert _read(BASE).get("model.moe_expert_bias") is None  # a dense model has no experts
    # Megatron-Core refuses biased experts split by expert tensor parallelism
    split = _read(moe + " --tensor-model-parallel-size 2")
    assert any("Bias in Moe is only supported when ETP==1" in n for n in split.notes)
    assert not any("Bias in Moe" in n for n in _read(moe).notes)
    assert not any(
        "Bias in Moe" in n
        for n in _read(moe + " --tensor-model-parallel-size 2 --disable-bias-linear").notes
    )


def test_biased_experts_reach_the_prediction() -> None:
    biased = _describe_job("mlm_sink_yarn.sbatch")  # a GPT-OSS-style launch: no disable flag
    plain = _describe_job(
        "mlm_sink_yarn.sbatch", ("--moe-grouped-gemm", "--moe-grouped-gemm --disable-bias-linear")
    )
    assert biased.scenario["model"]["moe_expert_bias"] is True
    assert plain.scenario["model"]["moe_expert_bias"] is False
    with_bias = (biased.predicted or {})["iteration_time_s"]
    without = (plain.predicted or {})["iteration_time_s"]
    assert with_bias > without  # the experts' bias adds are charged


def test_biased_experts_split_by_expert_tensor_parallel_are_refused_not_timed() -> None:
    """Megatron-Core stops a launch whose biased experts run with expert tensor parallelism 2:
    the description keeps the reader's note and its prediction is the scenario's refusal,
    naming the field; the same launch with ``--expert-tensor-parallel-size 1`` is timed."""
    split = "--expert-model-parallel-size 4 --tensor-model-parallel-size 2 --sequence-parallel"
    refused = _describe_job("mlm_sink_yarn.sbatch", ("--expert-model-parallel-size 8", split))
    parallelism = refused.scenario["parallelism"]
    assert isinstance(parallelism, dict)
    assert parallelism["expert_tensor_parallel"] == 2
    assert any("Bias in Moe is only supported when ETP==1" in n for n in refused.notes)
    prediction: dict[str, object] = dict(refused.to_json()["prediction"])
    assert "iteration_time_s" not in prediction
    assert str(prediction["error"]).startswith("parallelism.expert_tensor_parallel:")
    one = split + " --expert-tensor-parallel-size 1"
    timed = _describe_job("mlm_sink_yarn.sbatch", ("--expert-model-parallel-size 8", one))
    time_s = dict(timed.to_json()["prediction"]).get("iteration_time_s")
    assert isinstance(time_s, float)
    assert time_s > 0


def test_cuda_graph_flags_are_read_with_their_source() -> None:
    facts = _read(BASE + " --cuda-graph-impl local --cuda-graph-scope full_iteration")
    assert facts.get("training.cuda_graphs") == "full_iteration"
    assert "--cuda-graph-scope" in facts.values["training.cuda_graphs"].source
    layers = _read(BASE + " --cuda-graph-impl transformer_engine --cuda-graph-scope attn")
    assert layers.get("training.cuda_graphs") == "per_layer"
    assert _read(BASE).get("training.cuda_graphs") is None  # Megatron-LM's default: none


def test_sample_based_training_walks_the_batch_rampup() -> None:
    # batches 16, 16, 32, 48 over the first 96 samples (112 consumed), then 13 x 64
    args = BASE.replace(" --train-iters 5000", "").replace("96", "64")
    facts = _read(args + " --train-samples 1000 --rampup-batch-size 16 16 96")
    assert facts.get("training.train_iters") == 17
    assert facts.get("launch.train_samples") == 1000
    assert "update_train_iters" in facts.values["training.train_iters"].source
    constant = _read(args + " --train-samples 1000")
    assert constant.get("training.train_iters") == 1000 // 64


def test_an_impossible_rampup_is_noted_not_raised() -> None:
    args = BASE.replace(" --train-iters 5000", "")
    facts = _read(args + " --train-samples 1000 --rampup-batch-size 16 30 96")
    assert not facts.has("training.train_iters")
    assert any("rampup-batch-size" in note for note in facts.notes)


def _reference(samples: int, batch: int, rampup: tuple[int, int, int], capped: bool) -> int:
    """Megatron's update_train_iters, one step at a time."""
    start, step, ramp = rampup
    per = ramp / ((batch - start) // step)
    consumed = iterations = 0
    while consumed <= ramp and (not capped or consumed <= samples):
        consumed += batch if consumed > ramp else start + int(consumed / per) * step
        iterations += 1
    if not capped or samples > consumed:
        iterations += (samples - consumed) // batch
    return iterations


def test_rampup_rule_matches_megatrons_step_by_step_loop() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        start, step = rng.randint(1, 40), rng.randint(1, 16)
        batch = start + step * rng.randint(1, 20)
        rampup = (start, step, rng.randint(1, 20000))
        samples = rng.randint(0, 40000)
        capped = rng.random() < 0.5
        got = train_iters_from_samples(samples, batch, rampup, stop_at_train_samples=capped)
        assert got == _reference(samples, batch, rampup, capped)


def test_yaml_cfg_replaces_every_other_argument() -> None:
    facts = _read(
        "--yaml-cfg configs/small_gpt.yaml --num-layers 99 --tensor-model-parallel-size 8"
    )
    assert facts.get("model.num_layers") == 12
    assert facts.values["model.num_layers"].source == "small_gpt.yaml:3"
    assert any("ignores the other 2 arguments" in note for note in facts.notes)
    # activation_func swiglu decides, not the top-level swiglu: false
    assert facts.get("model.ffn_hidden_size") == 2048
    assert facts.get("model.num_query_groups") == 4  # used as given in the YAML path
    assert facts.get("parallelism.tensor_parallel") == 2
    assert facts.get("parallelism.sequence_parallel") is True
    assert facts.get("parallelism.data_parallel") == 4
    assert facts.get("parallelism.zero_stage") == 1
    assert facts.get("parallelism.recompute") == "selective"
    assert facts.get("parallelism.precision") == "bf16"
    assert facts.get("model.vocab_size") == 32001  # NullTokenizer: vocab_size + 1
    assert facts.get("launch.padded_vocab_size") == 32128  # multiple of 64 x 2
    assert facts.get("training.train_iters") == 17


def test_a_missing_yaml_cfg_is_an_error_naming_the_file() -> None:
    with pytest.raises(PlannerError, match=r"nowhere\.yaml"):
        _read("--yaml-cfg configs/nowhere.yaml")


def test_a_batch_script_described_end_to_end() -> None:
    script = (support.DATA / "megatron" / "jobs" / "mlm_job.sbatch").read_text()
    description = describe_launch(
        Launch(batch_script=script, work_dir=JOB), _files(), gpu="h100-sxm"
    )
    assert description.described_by == "megatron"
    model, par = description.scenario["model"], description.scenario["parallelism"]
    assert (model["num_layers"], model["hidden_size"]) == (8, 512)
    assert model["ffn_hidden_size"] == 1344  # int(8 * 512 / 3 / 64) * 64
    assert description.launch["padded_vocab_size"] == 50432  # 50257 to a multiple of 256
    assert (par["tensor_parallel"], par["data_parallel"]) == (2, 4)
    assert description.launch["gradient_accumulation"] == 4
    assert description.train_iters == 6400 // 32
    assert description.provenance["model.num_layers"].endswith("(--num-layers)")
    assert "iteration_time_s" in (description.predicted or {})


def test_gradients_reduced_in_bf16_as_validate_args_reads_the_flag() -> None:
    bf16 = _read(BASE + " --grad-reduce-in-bf16")
    assert bf16.get("parallelism.grad_reduce_in_fp32") is False
    assert (
        bf16.values["parallelism.grad_reduce_in_fp32"].source == "job.sh:9 (--grad-reduce-in-bf16)"
    )
    both = _read(BASE + " --accumulate-allreduce-grads-in-fp32 --grad-reduce-in-bf16")
    assert both.get("parallelism.grad_reduce_in_fp32") is False  # checked first under --bf16
    assert _read(BASE).get("parallelism.grad_reduce_in_fp32") is None  # the framework's default
    fp16 = BASE.replace("--bf16", "--fp16")
    ignored = _read(fp16 + " --grad-reduce-in-bf16")
    assert not ignored.has("parallelism.grad_reduce_in_fp32")  # fp16 gradients: fp16 reduce
    assert any("--grad-reduce-in-bf16 is ignored" in note for note in ignored.notes)
    kept = _read(fp16 + " --grad-reduce-in-bf16 --accumulate-allreduce-grads-in-fp32")
    assert kept.get("parallelism.grad_reduce_in_fp32") is True
    fp32 = _read(BASE.replace(" --bf16", "") + " --grad-reduce-in-bf16", finished=False)
    assert not fp32.has("parallelism.grad_reduce_in_fp32")  # fp32 gradients: fp32 reduce
    fsdp = _read(fp16 + " --grad-reduce-in-bf16 --use-megatron-fsdp")
    assert fsdp.get("parallelism.grad_reduce_in_fp32") is False  # its gradient communication


def test_fp16_under_fp8_gemms_reads_fp8_with_fp16_gradients_and_a_loss_scaling_note() -> None:
    fp16 = BASE.replace("--bf16", "--fp16")
    facts = _read(fp16 + " --fp8-format hybrid --fp8-recipe tensorwise")
    assert facts.get("parallelism.precision") == "fp8"
    assert facts.get("parallelism.fp8_recipe") == "tensorwise"
    # validate_args keeps fp16 gradients (fp32 accumulation only under --bf16)
    assert facts.get("parallelism.grad_reduce_in_fp32") is False
    assert facts.values["parallelism.grad_reduce_in_fp32"].source == "job.sh:9 (--fp16)"
    noted = [n for n in facts.notes if "fp16 parameters and activations" in n]
    assert len(noted) == 1
    assert "with fp8 GEMMs" in noted[0]
    assert "loss scaling" in noted[0]
    kept = _read(fp16 + " --fp8-format hybrid --accumulate-allreduce-grads-in-fp32")
    assert kept.get("parallelism.grad_reduce_in_fp32") is True
    bf16 = _read(BASE + " --fp8-format hybrid")
    assert not bf16.has("parallelism.grad_reduce_in_fp32")
    assert not any("fp16 parameters" in n for n in bf16.notes)
    alone = _read(fp16)
    assert alone.get("parallelism.precision") == "fp16"
    assert not alone.has("parallelism.grad_reduce_in_fp32")
    assert not any("fp16 parameters" in n for n in alone.notes)


def test_bf16_main_gradients_are_reduced_in_bf16_as_validate_args_reads_them() -> None:
    # validate_args sets accumulate_allreduce_grads_in_fp32 under --bf16 only while
    # --main-grads-dtype is fp32 (NVIDIA/Megatron-LM megatron/training/arguments.py at
    # 10e7b74597b47a57449599bf2780bd9e82ef79ff)
    aware = " --use-distributed-optimizer --use-precision-aware-optimizer"
    main = _read(BASE + aware + " --main-grads-dtype bf16")
    assert main.get("parallelism.grad_reduce_in_fp32") is False
    assert main.values["parallelism.grad_reduce_in_fp32"].source == "job.sh:9 (--main-grads-dtype)"
    assert _read(BASE + " --main-grads-dtype=fp32").get("parallelism.grad_reduce_in_fp32") is None
    fp16 = _read(BASE.replace("--bf16", "--fp16") + " --main-grads-dtype bf16")
    assert not fp16.has("parallelism.grad_reduce_in_fp32")  # fp16 gradients: fp16 reduce
    refused = _read(BASE + " --main-grads-dtype bf16 --accumulate-allreduce-grads-in-fp32")
    assert any("Megatron-LM stops" in note for note in refused.notes), refused.notes
    assert not any("Megatron-LM stops" in note for note in main.notes)


def _describe_job(name: str, edit: tuple[str, str] = ("", "")) -> LaunchDescription:
    script = (support.DATA / "megatron" / "jobs" / name).read_text().replace(*edit)
    description = describe_launch(
        Launch(batch_script=script, work_dir=JOB), _files(), gpu="h100-sxm"
    )
    assert description.described_by == "megatron"
    return description


def test_qk_layernorm_is_read_from_the_launch() -> None:
    description = _describe_job("mlm_qk_norm_moe.sbatch")
    model, provenance = description.scenario["model"], description.provenance
    assert model["qk_layernorm"] is True
    assert provenance["model.qk_layernorm"].endswith("(--qk-layernorm)")
    assert (model["num_experts"], model["kv_channels"]) == (16, 64)
    # the switch takes no value: the next flag is still read
    assert _read(BASE + " --qk-layernorm --swiglu").get("model.activation") == "swiglu"
    assert _read(BASE).get("model.qk_layernorm") is None  # Megatron-LM's default: no norms


def test_softmax_rope_and_clamp_are_read_as_the_scenario_spells_them() -> None:
    description = _describe_job("mlm_sink_yarn.sbatch")
    model, provenance = description.scenario["model"], description.provenance
    assert model["softmax_type"] == "off_by_one"  # Megatron spells it off-by-one
    assert model["rope_type"] == "yarn"
    assert model["activation_func_clamp_value"] == 7.0
    assert provenance["model.rope_type"].endswith("(--rope-type)")
    assert "iteration_time_s" in (description.predicted or {})
    # a choice Megatron-LM does not have reaches the scenario's error, naming the field
    wrong = _describe_job("mlm_sink_yarn.sbatch", ("off-by-one", "sparse")).predicted or {}
    assert "model.softmax_type: unknown value 'sparse'" in str(wrong.get("error"))


@pytest.mark.parametrize(
    ("tp", "flags", "expected"),
    [
        ("2", "--tp-comm-overlap", "parallelism.sequence_parallel:"),
        ("1", "--tp-comm-overlap --sequence-parallel", "parallelism.tp_comm_overlap:"),
        ("2", "--tp-comm-overlap --sequence-parallel", None),
    ],
)
def test_tp_comm_overlap_without_sequence_parallel_is_refused_not_timed(
    tp: str, flags: str, expected: str | None
) -> None:
    """Megatron-LM's ``validate_args`` asserts sequence parallelism for ``--tp-comm-overlap``
    (``TP_COMM_OVERLAP_SEQUENCE_SOURCE``): the launch at tensor parallelism 2 without
    ``--sequence-parallel`` is described with the flag and its prediction is the refusal,
    naming the field; at tensor parallelism 1, where Megatron-LM turns sequence parallelism
    off first, ``--sequence-parallel`` does not help; with it at 2 the launch is timed."""
    script = (support.DATA / "megatron" / "jobs" / "mlm_job.sbatch").read_text()
    script = script.replace("TP=2", f"TP={tp}").replace("--bf16", f"--bf16 {flags}")
    described = describe_launch(Launch(batch_script=script, work_dir=JOB), _files(), gpu="h100-sxm")
    parallelism = described.scenario["parallelism"]
    assert isinstance(parallelism, dict)
    assert parallelism["tp_comm_overlap"] is True
    prediction: dict[str, object] = dict(described.to_json()["prediction"])
    if expected is None:
        assert isinstance(prediction.get("iteration_time_s"), float)
    else:
        assert "iteration_time_s" not in prediction
        assert str(prediction["error"]).startswith(expected)


@pytest.mark.parametrize(("strategy", "stage"), support.MEGATRON_FSDP_STRATEGY_STAGES)
def test_megatron_fsdp_runs_the_zero_stage_of_its_sharding_strategy(
    strategy: str, stage: int
) -> None:
    # ParamAndGradBuffer distributes nothing, the main weights (and so the optimizer states),
    # those and the gradients, or those and the model weights; --use-distributed-optimizer
    # shards nothing more under Megatron-FSDP
    for extra in ("", " --use-distributed-optimizer"):
        facts = _read(
            f"{BASE} --use-megatron-fsdp --data-parallel-sharding-strategy {strategy}{extra}"
        )
        assert facts.get("parallelism.zero_stage") == stage
        assert facts.get("parallelism.megatron_fsdp") is True
        assert "parallelism.zero_stage" not in facts.assumed
        source = facts.values["parallelism.zero_stage"].source
        assert source == "job.sh:9 (--data-parallel-sharding-strategy)"
    # the strategy alone, without Megatron-FSDP, shards nothing
    alone = _read(f"{BASE} --data-parallel-sharding-strategy {strategy}")
    assert alone.get("parallelism.zero_stage") == 0
    assert not alone.has("parallelism.megatron_fsdp")


def test_megatron_fsdp_without_a_strategy_takes_the_newest_default_and_says_so() -> None:
    facts = _read(f"{BASE} --use-megatron-fsdp")
    assert facts.get("parallelism.zero_stage") == 3  # optim_grads_params since core 0.18.0
    assert "parallelism.zero_stage" in facts.assumed
    assert "optim_grads_params" in facts.values["parallelism.zero_stage"].source
    assert any(
        "optim_grads_params assumed (ZeRO 3)" in note and "newest release" in note
        for note in facts.notes
    )
    # --use-custom-fsdp, the name argparse takes at core 0.12-0.13 only: their no_shard
    custom = _read(f"{BASE} --use-custom-fsdp --use-distributed-optimizer")
    assert custom.get("parallelism.zero_stage") == 0
    assert custom.get("parallelism.megatron_fsdp") is True
    assert "core_v0.17.1" in custom.values["parallelism.zero_stage"].source
    assert any("no_shard assumed (ZeRO 0)" in note for note in custom.notes)
    bad = _read(f"{BASE} --use-megatron-fsdp --data-parallel-sharding-strategy full")
    assert bad.get("parallelism.zero_stage") == 3
    assert any("full is not one of Megatron-LM's choices" in note for note in bad.notes)


@pytest.mark.parametrize(("release", "stage"), [("25.11", 0), ("26.04", 0), ("26.06", 3)])
def test_megatron_fsdp_without_a_strategy_takes_the_default_of_the_containers_release(
    release: str, stage: int
) -> None:
    # no_shard through Megatron Core 0.17 (NeMo 26.04), optim_grads_params from 0.18 (26.06)
    script = (
        "#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gpus-per-node=8\n"
        f"srun --container-image=nvcr.io#nvidia/nemo:{release} python pretrain_gpt.py "
        f"{BASE} --use-megatron-fsdp\n"
    )
    described = describe_launch(
        Launch(batch_script=script, work_dir=JOB), MemoryFiles(), gpu="h100-sxm", predict=False
    )
    assert described.described_by == "megatron"
    assert parse_scenario(described.scenario).parallelism.zero_stage == stage
    provenance = described.provenance["parallelism.zero_stage"]
    assert ("core_v0.17.1" in provenance) is (stage == 0)
    assert any(f"NeMo Framework container {release}" in note for note in described.notes)
    stated = script.replace(
        "--use-megatron-fsdp", "--use-megatron-fsdp --data-parallel-sharding-strategy optim"
    )
    described = describe_launch(
        Launch(batch_script=stated, work_dir=JOB), MemoryFiles(), gpu="h100-sxm", predict=False
    )
    assert parse_scenario(described.scenario).parallelism.zero_stage == 1


@pytest.mark.parametrize(
    ("release", "expected"),
    [
        # Megatron-LM's get_model clears preserve_fp32_weights (core 0.15): FusedAdam's master
        ("25.11", ("fp16", "bf16", None)),
        ("26.02", (None, None, None)),  # Megatron-FSDP's fp32 copy and FusedAdam's master
        ("26.04", (None, None, None)),
        # core 0.18: FusedAdam keeps no master, Megatron-FSDP's main weights are it
        ("26.06", ("fp32", "bf16", False)),
    ],
)
def test_precision_aware_optimizer_under_megatron_fsdp_follows_the_containers_release(
    release: str, expected: tuple[object, ...]
) -> None:
    script = (
        "#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gpus-per-node=8\n"
        f"srun --container-image=nvcr.io#nvidia/nemo:{release} python pretrain_gpt.py "
        f"{BASE} --use-megatron-fsdp --use-precision-aware-optimizer --main-params-dtype fp16 "
        "--exp-avg-dtype bf16\n"
    )
    described = describe_launch(
        Launch(batch_script=script, work_dir=JOB), MemoryFiles(), gpu="h100-sxm", predict=False
    )
    par = described.scenario["parallelism"]
    fields = ("main_params_dtype", "exp_avg_dtype", "store_param_remainders")
    assert tuple(par.get(field) for field in fields) == expected
    both = any("FusedAdam its own master" in note for note in described.notes)
    assert both is (expected[0] is None)
    parse_scenario(described.scenario)


FP8 = " --fp8-format hybrid --fp8-recipe tensorwise --fp8-param-gather"


def _describe_mlm_job(flags: str) -> LaunchDescription:
    """``mlm_job.sbatch`` (no distributed optimizer, no FSDP) with ``flags`` after ``--bf16``."""
    script = (support.DATA / "megatron" / "jobs" / "mlm_job.sbatch").read_text()
    assert "--use-distributed-optimizer" not in script
    script = script.replace("--bf16", f"--bf16{flags}")
    return describe_launch(Launch(batch_script=script, work_dir=JOB), _files(), gpu="h100-sxm")


@pytest.mark.parametrize(
    "flags",
    [
        "--use-distributed-optimizer",
        "--use-megatron-fsdp --data-parallel-sharding-strategy no_shard",
        "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params",
    ],
)
def test_fp8_param_gather_is_read_under_a_sharded_optimizer_or_megatron_fsdp(flags: str) -> None:
    facts = _read(f"{BASE}{FP8} {flags}")
    assert facts.get("parallelism.fp8_param_gather") is True
    assert facts.values["parallelism.fp8_param_gather"].source == "job.sh:9 (--fp8-param-gather)"
    assert not any("--fp8-param-gather" in note for note in facts.notes)
    described = _describe_mlm_job(f"{FP8} {flags}")
    assert parse_scenario(described.scenario).parallelism.fp8_param_gather is True
    time_s = dict(described.to_json()["prediction"]).get("iteration_time_s")
    assert isinstance(time_s, float)


def test_fp8_param_gather_where_megatron_stops_is_noted_and_refused() -> None:
    """Without a sharded optimizer ``validate_args`` asserts: the field is read, the note says
    Megatron-LM stops, and the description's prediction is the layout rule's refusal naming the
    ZeRO stage; under bf16 GEMMs Megatron-Core stops and the field is not read."""
    plain = _read(BASE + FP8)
    assert plain.get("parallelism.fp8_param_gather") is True
    assert any("only supported with distributed optimizer" in n for n in plain.notes)
    described = _describe_mlm_job(FP8)
    parallelism = described.scenario["parallelism"]
    assert isinstance(parallelism, dict)
    assert parallelism["fp8_param_gather"] is True
    prediction: dict[str, object] = dict(described.to_json()["prediction"])
    assert "iteration_time_s" not in prediction
    assert str(prediction["error"]).startswith("parallelism.zero_stage:")
    sixteen_bit = _read(f"{BASE} --fp8-param-gather --use-distributed-optimizer")
    assert not sixteen_bit.has("parallelism.fp8_param_gather")
    assert any("fp8_param must be used together with fp8 mode" in n for n in sixteen_bit.notes)


def test_fp8_param_gather_under_torch_fsdp2_is_turned_off() -> None:
    facts = _read(f"{BASE}{FP8} --use-torch-fsdp2")
    assert facts.get("parallelism.fp8_param_gather") is False
    assert any("Transformer Engine 2.0" in note for note in facts.notes)
    assert not any("Megatron-LM stops" in note for note in facts.notes)
