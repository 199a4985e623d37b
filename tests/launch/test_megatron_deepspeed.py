"""The Megatron-DeepSpeed reader: its programs, GQA by --num-key-value-heads, the DeepSpeed JSON
(ZeRO stage, precision, batch disagreements), DeepSpeed-MoE (expert interval, top-1, EP capped at
the data-parallel ranks) and the --train-tokens stop."""

from __future__ import annotations

import shlex

import pytest

from planner.errors import PlannerError
from planner.launch.describe import describe_launch
from planner.launch.readers.megatron_deepspeed import READER
from planner.launch.types import Facts, Invocation, Launch, MemoryFiles
from tests.launch import reader_support as support

JOB = "/jobs/mds"

MODEL = (
    "--num-layers 20 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
    "--max-position-embeddings 1024 --micro-batch-size 2 --global-batch-size 64"
)
DS = "--deepspeed --deepspeed_config configs/ds_zero1_bf16.json"


def _files(extra: dict[str, str] | None = None) -> MemoryFiles:
    return support.data_files("megatron", JOB, extra=extra)


def _invocation(args: str, program: str = "pretrain_gpt.py") -> Invocation:
    return Invocation(
        program=program,
        args=tuple(shlex.split(args)),
        cwd=JOB,
        launcher="deepspeed",
        where="run.sh:30",
    )


def _read(args: str, *, gpus: int = 8, files: MemoryFiles | None = None) -> Facts:
    given = support.allocation(world_size=gpus)
    facts = support.read(READER, _invocation(args), files or _files(), given=given, invocations=())
    facts.set("hardware.num_gpus", gpus, "launch")
    return support.finished(facts)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (f"{MODEL} {DS}", True),
        (f"{MODEL} --deepspeed-config=ds.json", True),
        (MODEL, False),  # plain Megatron-LM
        (f"{MODEL} --deepspeed-activation-checkpointing", False),
        ("--deepspeed ds.json --model_name_or_path gpt2", False),  # an HF Trainer script
    ],
)
def test_recognised_programs(args: str, expected: bool) -> None:
    assert READER.recognises(_invocation(args)) is expected


def test_deepspeed_json_gives_zero_stage_and_batch_disagreements_are_noted() -> None:
    facts = _read(f"{MODEL} {DS} --tensor-model-parallel-size 2 --num-key-value-heads 4")
    assert facts.get("parallelism.zero_stage") == 1
    assert facts.values["parallelism.zero_stage"].source == "ds_zero1_bf16.json:6"
    assert facts.get("parallelism.precision") == "bf16"  # from the JSON: no --bf16 flag
    assert facts.values["parallelism.precision"].source == "ds_zero1_bf16.json:9"
    # Megatron's flags drive the batch: 64 = 2 x 8 x dp 4; the JSON's 48 / 2 / 3 is noted
    assert facts.get("parallelism.global_batch_size") == 64
    assert facts.get("launch.gradient_accumulation") == 8
    assert any("train_batch_size 48 differs" in note for note in facts.notes)
    assert facts.get("model.num_query_groups") == 4
    assert facts.get("training.framework") == "deepspeed"


def test_a_heredoc_written_config_is_read_through_the_launch_files() -> None:
    written = {f"{JOB}/tmp/ds.json": '{"train_batch_size": 64, "zero_optimization": {"stage": 2}}'}
    facts = _read(
        f"{MODEL} --fp16 --deepspeed --deepspeed_config=./tmp/ds.json",
        files=_files(written),
    )
    assert facts.get("parallelism.zero_stage") == 2
    assert facts.get("parallelism.precision") == "fp16"
    assert not any("differs" in note for note in facts.notes)


def test_a_config_written_at_run_time_falls_back_to_the_flag_then_deepspeeds_default() -> None:
    missing = f"{MODEL} --fp16 --deepspeed --deepspeed_config out/generated.json"
    facts = _read(missing + " --zero-stage 2")
    assert facts.get("parallelism.zero_stage") == 2
    assert any("not among the launch's files" in note for note in facts.notes)
    default = _read(missing)
    assert default.get("parallelism.zero_stage") == 0
    assert "parallelism.zero_stage" in default.assumed
    assert "deepspeed/runtime/zero/config.py" in default.values["parallelism.zero_stage"].source


def test_an_invalid_deepspeed_json_is_an_error_naming_the_file() -> None:
    with pytest.raises(PlannerError, match=r"ds_broken\.json"):
        _read(f"{MODEL} --deepspeed --deepspeed_config configs/ds_broken.json")


def test_deepspeed_moe_interval_topk_and_expert_parallel_cap() -> None:
    facts = _read(
        f"{MODEL} {DS} --num-experts 32 --moe-expert-parallel-size 16 --checkpoint-activations"
    )
    assert facts.get("model.num_experts") == 32
    assert facts.get("model.moe_router_topk") == 1  # --topk default
    assert facts.get("model.moe_layer_freq") == [0, 1] * 10  # layers 2, 4, ... are MoE
    assert facts.get("model.moe_ffn_hidden_size") == 4 * 1024
    assert facts.get("parallelism.expert_parallel") == 8  # capped at the 8 data-parallel ranks
    assert any("exceeds the 8 data-parallel ranks" in note for note in facts.notes)
    assert facts.get("parallelism.expert_tensor_parallel") == 1
    assert facts.get("parallelism.recompute") == "full"


def test_expert_counts_per_layer_and_a_custom_interval() -> None:
    facts = _read(f"{MODEL} {DS} --num-experts 8 16 8 16 --expert-interval 5 --topk 2")
    assert facts.get("model.num_experts") == 16
    assert facts.get("model.moe_router_topk") == 2
    assert facts.get("model.moe_layer_freq") == ([0] * 4 + [1]) * 4
    assert any("vary by layer" in note for note in facts.notes)


def test_dense_runs_take_the_expert_parallel_default() -> None:
    facts = _read(f"{MODEL} {DS}")
    assert not facts.has("model.num_experts")
    assert facts.get("parallelism.expert_parallel") == 1
    assert "Megatron-DeepSpeed" in facts.values["parallelism.expert_parallel"].source


def test_train_tokens_stop_before_train_iters() -> None:
    # 64 x 1024 tokens a step: 10,000,000 tokens end after ceil(152.6) = 153 steps
    facts = _read(f"{MODEL} {DS} --train-iters 1000 --train-tokens 10000000")
    assert facts.get("training.train_iters") == 153
    assert any("--train-iters 1000 is not reached" in note for note in facts.notes)
    later = _read(f"{MODEL} {DS} --train-iters 100 --train-tokens 10000000")
    assert later.get("training.train_iters") == 100


def test_ulysses_sequence_parallel_divides_the_data_parallel_ranks() -> None:
    facts = _read(f"{MODEL} {DS} --ds-sequence-parallel-size 2 --pipeline-model-parallel-size 2")
    assert facts.get("parallelism.context_parallel") == 2
    assert facts.get("parallelism.data_parallel") == 2
    assert facts.get("launch.gradient_accumulation") == 16


def test_gpt2_vocabulary_by_default() -> None:
    facts = _read(f"{MODEL} {DS} --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt")
    assert facts.get("model.vocab_size") == 50257
    assert facts.get("launch.padded_vocab_size") == 50304


def test_a_batch_script_writing_its_deepspeed_json_described_end_to_end() -> None:
    script = (support.DATA / "megatron" / "jobs" / "mds_job.sbatch").read_text()
    description = describe_launch(Launch(batch_script=script, work_dir=JOB), _files())
    assert description.described_by == "megatron_deepspeed"
    par = description.scenario["parallelism"]
    assert par["zero_stage"] == 2  # from the heredoc's JSON, $ZERO expanded
    assert description.provenance["parallelism.zero_stage"] == "ds_generated.json:3"
    assert par["precision"] == "bf16"
    assert (par["data_parallel"], par["expert_parallel"]) == (8, 4)
    assert description.launch["gradient_accumulation"] == 2
    assert description.scenario["model"]["num_experts"] == 4
    assert description.train_iters == 100
