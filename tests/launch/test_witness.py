"""The job's log as a witness: each framework's printed configuration read back (values cited
by their log line), the log filling what the launch left open, a disagreement noted with the
launch's value kept, and logs that are garbage, huge or hostile read quickly and safely."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from planner.launch.describe import describe_launch
from planner.launch.types import Facts, Launch, MemoryFiles
from planner.launch.witness import check_witness, weigh_witness, witness_facts
from planner.launch.witness_log import LOG_HEAD_CHARS, LogView

LOGS = Path(__file__).resolve().parents[1] / "data" / "launch" / "logs"

SCRIPT = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --gpus-per-node=8
MODEL="--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --group-query-attention \\
    --num-query-groups 4 --ffn-hidden-size 5632 --swiglu --untie-embeddings-and-output-weights"
srun torchrun --nnodes 2 --nproc_per_node 8 pretrain_gpt.py $MODEL \\
    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --bf16 {extra}
"""
"""A launch of the model the Megatron-LM log was written for, leaving sequence length, batch
and steps open (``{extra}`` adds arguments)."""


def _log(name: str) -> str:
    return (LOGS / name).read_text(encoding="utf-8")


def _line(name: str, source: str) -> str:
    """The line of log ``name`` that ``source`` (``log:<n>``, maybe with a note) cites."""
    number = int(source.removeprefix("log:").split()[0].rstrip(":"))
    return _log(name).splitlines()[number - 1]


def _values(facts: Facts) -> dict[str, object]:
    return {name: found.value for name, found in facts if name not in facts.assumed}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "megatron_lm.log",
            {
                "model.num_layers": 24,
                "model.num_query_groups": 4,
                "model.ffn_hidden_size": 5632,
                "model.seq_length": 4096,
                "model.vocab_size": 50257,
                "launch.padded_vocab_size": 50432,
                "parallelism.tensor_parallel": 2,
                "parallelism.pipeline_parallel": 2,
                "parallelism.data_parallel": 4,
                "parallelism.micro_batch_size": 2,
                "parallelism.global_batch_size": 256,
                "parallelism.precision": "bf16",
                "parallelism.recompute": "selective",
                "parallelism.zero_stage": 1,
                "training.train_iters": 20000,
                "hardware.num_gpus": 16,
            },
        ),
        (
            "megatron_deepspeed.log",
            {
                "model.num_layers": 20,
                "model.num_query_groups": 4,
                "parallelism.tensor_parallel": 2,
                "parallelism.data_parallel": 4,
                "parallelism.micro_batch_size": 4,
                "parallelism.global_batch_size": 512,
                "launch.gradient_accumulation": 32,
                "parallelism.zero_stage": 2,
                "parallelism.recompute": "full",
                "training.train_iters": 287,
                "hardware.num_gpus": 8,
            },
        ),
        (
            "trl_sft.log",
            {
                "model.seq_length": 3072,
                "parallelism.micro_batch_size": 8,
                "parallelism.global_batch_size": 512,
                "launch.gradient_accumulation": 4,
                "parallelism.precision": "bf16",
                "parallelism.recompute": "full",
                "training.train_iters": 378,
                "hardware.num_gpus": 16,
            },
        ),
        (
            "llamafactory.log",
            {
                "hardware.num_gpus": 8,
                "parallelism.precision": "bf16",
                "parallelism.micro_batch_size": 2,
                "parallelism.global_batch_size": 128,
                "training.train_iters": 282,
            },
        ),
        (
            "torchtitan.log",
            {
                "launch.model_name": "llama3 8B",
                "model.hidden_size": 4096,
                "model.ffn_hidden_size": 14336,
                "model.num_query_groups": 8,
                "model.seq_length": 32768,
                "parallelism.context_parallel": 2,
                "parallelism.data_parallel": 4,
                "launch.fsdp_shard": 4,
                "parallelism.global_batch_size": 4,
                "parallelism.recompute": "full",
                "training.train_iters": 3000,
                "hardware.num_gpus": 8,
            },
        ),
        (
            "nemo1.log",
            {
                "model.num_layers": 16,
                "model.num_query_groups": 16,
                "model.seq_length": 2048,
                "parallelism.tensor_parallel": 2,
                "parallelism.global_batch_size": 64,
                "parallelism.precision": "bf16",
                "training.train_iters": 60000,
                "hardware.num_gpus": 8,
            },
        ),
        (
            "megatron_bridge.log",
            {
                "model.num_query_groups": 8,
                "model.seq_length": 8192,
                "parallelism.context_parallel": 2,
                "parallelism.global_batch_size": 128,
                "parallelism.precision": "bf16",
                "training.train_iters": 1500,
                "launch.padded_vocab_size": 128256,
            },
        ),
        (
            "torchtune.log",
            {
                "training.mode": "lora",
                "training.lora_rank": 16,
                "model.num_layers": 32,
                "model.seq_length": 4096,
                "parallelism.micro_batch_size": 4,
                "launch.gradient_accumulation": 8,
                "training.train_iters": 500,
            },
        ),
    ],
)
def test_each_format_is_read_back(name: str, expected: dict[str, object]) -> None:
    facts = witness_facts(_log(name))
    assert {key: _values(facts).get(key) for key in expected} == expected
    assert not facts.notes


@pytest.mark.parametrize(
    ("name", "field", "printed"),
    [
        ("megatron_lm.log", "model.seq_length", "seq_length ...."),
        ("megatron_lm.log", "launch.padded_vocab_size", "padded vocab"),
        ("megatron_deepspeed.log", "parallelism.zero_stage", "zero_optimization_stage"),
        ("trl_sft.log", "model.seq_length", "max_length=3072,"),
        ("torchtitan.log", "parallelism.data_parallel", "dp_shard=4"),
        ("torchtitan.log", "parallelism.recompute", '"mode": "full"'),
        ("nemo1.log", "model.seq_length", "encoder_seq_length: 2048"),
        ("megatron_bridge.log", "training.train_iters", "train_iters: 1500"),
        ("torchtune.log", "model.seq_length", "max_seq_len: 4096"),
    ],
)
def test_values_cite_the_line_that_prints_them(name: str, field: str, printed: str) -> None:
    source = witness_facts(_log(name)).values[field].source
    assert source.startswith("log:")
    assert printed in _line(name, source)


def test_a_launch_that_leaves_sequence_and_batch_open_is_filled_from_the_argument_dump() -> None:
    launch = Launch(batch_script=SCRIPT.format(extra=""), work_dir="/jobs/mlm")
    without = describe_launch(launch, MemoryFiles(), predict=False)
    assert "model.seq_length" in without.unknown
    assert "parallelism.global_batch_size" in without.unknown

    launch = Launch(
        batch_script=SCRIPT.format(extra=""), work_dir="/jobs/mlm", log_text=_log("megatron_lm.log")
    )
    described = describe_launch(launch, MemoryFiles(), predict=False)
    parallelism = described.scenario["parallelism"]
    assert described.scenario["model"]["seq_length"] == 4096
    assert (parallelism["micro_batch_size"], parallelism["global_batch_size"]) == (2, 256)
    assert (parallelism["tensor_parallel"], parallelism["pipeline_parallel"]) == (2, 2)
    assert parallelism["data_parallel"] == 4
    assert described.launch["gradient_accumulation"] == 32  # derived from the log's values
    assert described.provenance["model.seq_length"].startswith("log:")
    assert described.provenance["model.num_layers"].startswith("job.sbatch:")  # the launch's
    assert not {"model.seq_length", "parallelism.global_batch_size"} & set(described.unknown)
    assert "parallelism.tensor_parallel" not in described.assumed
    assert any(note.startswith("from the job's log: ") for note in described.notes)
    assert not any("the launch's value is kept" in note for note in described.notes)


def test_a_disagreement_is_noted_and_the_launch_value_kept() -> None:
    launch = Launch(
        batch_script=SCRIPT.format(extra="--seq-length 2048 --global-batch-size 256"),
        work_dir="/jobs/mlm",
        log_text=_log("megatron_lm.log"),
    )
    described = describe_launch(launch, MemoryFiles(), predict=False)
    assert described.scenario["model"]["seq_length"] == 2048
    assert described.provenance["model.seq_length"].startswith("job.sbatch:")
    notes = [note for note in described.notes if note.startswith("model.seq_length:")]
    assert len(notes) == 1
    assert "the launch gives 2048 (job.sbatch:" in notes[0]
    assert "the job's log 4096 (log:40); the launch's value is kept" in notes[0]
    assert not [note for note in described.notes if "the launch's value is kept" in note][1:]


def test_the_log_replaces_a_default_the_reader_assumed_but_not_a_value_it_read() -> None:
    facts = Facts()
    facts.default("parallelism.tensor_parallel", 1, "default of Megatron-LM")
    facts.set("model.seq_length", 2048, "job.sbatch:5 (--seq-length)")
    witness = Facts()
    witness.set("parallelism.tensor_parallel", 4, "log:12")
    witness.set("model.seq_length", 8192, "log:30")
    witness.default("parallelism.zero_stage", 0, "default of DeepSpeed")
    assert weigh_witness(facts, witness) == ["parallelism.tensor_parallel"]
    assert facts.values["parallelism.tensor_parallel"].source == "log:12"
    assert "parallelism.tensor_parallel" not in facts.assumed
    assert not facts.has("parallelism.zero_stage")  # the log's own assumptions are not witnessed
    check_witness(facts, witness)
    assert facts.values["model.seq_length"].value == 2048
    assert [note for note in facts.notes if note.startswith("model.seq_length")] == [
        "model.seq_length: the launch gives 2048 (job.sbatch:5 (--seq-length)), the job's log "
        "8192 (log:30); the launch's value is kept"
    ]


TITAN_PP = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --gpus-per-node=8
srun torchrun --nnodes 2 --nproc_per_node 8 -m torchtitan.train --job.config_file configs/pp.toml
"""
"""The torchtitan launch ``torchtitan_pp.log`` was written for (its TOML: ``_titan_files``)."""


def _titan_files(microbatch_size: bool) -> MemoryFiles:
    """The launch's TOML, with or without its ``pipeline_parallel_microbatch_size``."""
    toml = (LOGS.parent / "torchtitan/configs/llama3_8b_pp.toml").read_text(encoding="utf-8")
    if not microbatch_size:
        toml = toml.replace("pipeline_parallel_microbatch_size = 2\n", "")
    return MemoryFiles(files={"/jobs/titan/configs/pp.toml": toml})


def test_torchtitan_under_pp_the_local_batch_is_the_pipeline_batch() -> None:
    name = "torchtitan_pp.log"
    facts = witness_facts(_log(name))
    expected = {
        "parallelism.pipeline_parallel": 4,
        "parallelism.micro_batch_size": 2,
        "parallelism.pipeline_batch_size": 16,
        "parallelism.global_batch_size": 256,
        "launch.gradient_accumulation": 4,
    }
    assert {key: _values(facts).get(key) for key in expected} == expected
    assert not facts.notes
    assert "with 8 microbatches" in _line(name, facts.values["parallelism.micro_batch_size"].source)
    # The mesh, schedule and trainer lines alone: 16 samples in 8 microbatches.
    lines = ("device mesh", "Using pipeline schedule", "Trainer is initialized")
    bare = witness_facts(
        "\n".join(line for line in _log(name).splitlines() if any(k in line for k in lines))
    )
    assert _values(bare)["parallelism.micro_batch_size"] == 2
    assert _values(bare)["parallelism.pipeline_batch_size"] == 16


@pytest.mark.parametrize("microbatch_size", [True, False])
def test_torchtitan_pp_launch_and_log_agree_on_the_micro_batch(microbatch_size: bool) -> None:
    launch = Launch(
        batch_script=TITAN_PP, work_dir="/jobs/titan", log_text=_log("torchtitan_pp.log")
    )
    described = describe_launch(launch, _titan_files(microbatch_size), predict=False)
    parallelism = described.scenario["parallelism"]
    assert isinstance(parallelism, dict)
    assert (parallelism["micro_batch_size"], parallelism["pipeline_batch_size"]) == (2, 16)
    assert (parallelism["global_batch_size"], parallelism["data_parallel"]) == (256, 4)
    source = described.provenance["parallelism.micro_batch_size"]
    # the launch's own size, or (left at the default) the log's schedule line
    assert source.startswith("pp.toml:" if microbatch_size else "log:")
    assert not any("the launch's value is kept" in note for note in described.notes)


def test_nemo2_padding_line_gives_the_vocabulary() -> None:
    line = (
        "[NeMo I 2025-03-09 07:00:12 base:48] Padded vocab_size: 128512, original vocab_size: "
        "128256, dummy tokens: 256.\n"
    )
    facts = witness_facts("starting\n" + line)
    assert _values(facts) == {"model.vocab_size": 128256, "launch.padded_vocab_size": 128512}
    assert facts.values["model.vocab_size"].source == "log:2"


def test_launcher_prefixes_and_colour_codes_are_removed() -> None:
    view = LogView.of("0: [rank3]:\x1b[34mhello\x1b[0m\n[default1]:  x ... 1\nplain 12: kept\n")
    assert view.lines == ("hello", "  x ... 1", "plain 12: kept")


def test_a_dump_cut_by_the_head_limit_gives_what_it_printed() -> None:
    text = _log("megatron_lm.log")
    cut = text.index("  num_attention_heads")
    view = LogView.of(text, limit=cut + 5)
    assert view.lines[-1] == text[:cut].splitlines()[-1]  # the line the limit cuts is dropped
    facts = witness_facts(text[:cut])
    assert _values(facts)["model.hidden_size"] == 2048
    assert "model.num_layers" not in _values(facts)


def test_garbage_and_huge_logs_are_read_quickly_and_give_nothing() -> None:
    noise = random.Random(7)
    garbage = bytes(noise.randrange(256) for _ in range(400_000)).decode("latin-1")
    huge = "x" * (64 << 20)
    lines = ("iteration 10 | loss 3.2 |\n" * 3_000_000)[: 80 << 20]
    for text in (garbage, huge, lines, "", "\n" * 100_000):
        started = time.process_time()  # CPU time: the work, not the machine's load
        facts = witness_facts(text)
        assert time.process_time() - started < 0.5
        assert not facts.values
    launch = Launch(batch_script=SCRIPT.format(extra=""), work_dir="/j", log_text=garbage)
    plain = Launch(batch_script=SCRIPT.format(extra=""), work_dir="/j")
    assert (
        describe_launch(launch, MemoryFiles()).to_json()
        == describe_launch(plain, MemoryFiles()).to_json()
    )


def test_a_printed_config_that_does_not_parse_is_noted_not_raised() -> None:
    bomb = "\n".join(
        [
            "INFO:torchtune.utils._logging:Running FullFinetuneRecipeDistributed with resolved "
            "config:",
            "",
        ]
        + ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
        + [
            f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]"
            for i in range(1, 12)
        ]
    )
    facts = witness_facts(bomb)
    assert not facts.values
    assert len(facts.notes) == 1
    assert facts.notes[0].startswith("log:1: ")
    broken = '[titan] - root - INFO - Building llama3 8Bwith {\n  "dim": 4096,,\n}\n'
    facts = witness_facts(broken)
    assert not facts.values
    assert facts.notes
    assert "not read" in facts.notes[0]


def test_only_the_head_is_read() -> None:
    padding = "step 1 | loss 2.0\n" * (LOG_HEAD_CHARS // 18 + 10)
    assert not witness_facts(padding + _log("megatron_lm.log")).values
    assert witness_facts(_log("megatron_lm.log") + padding).values


def test_megatron_fsdps_printed_sharding_strategy_replaces_the_assumed_default() -> None:
    """A launch with ``--use-megatron-fsdp`` and no strategy is read at the newest default
    (``optim_grads_params``, ZeRO 3, assumed); the argument dump prints the strategy the run
    resolved (here ``no_shard``, the default before Megatron Core 0.18), which is ZeRO 0."""
    lines = _log("megatron_lm.log").splitlines(keepends=True)
    at = {line.split()[0]: i for i, line in enumerate(lines) if line.startswith("  ")}
    lines.insert(at["use_distributed_optimizer"] + 1, f"  use_megatron_fsdp {'.' * 32} True\n")
    lines.insert(
        at["data_parallel_size"] + 1, f"  data_parallel_sharding_strategy {'.' * 18} no_shard\n"
    )
    log = "".join(lines)
    launch = Launch(batch_script=SCRIPT.format(extra="--use-megatron-fsdp"), work_dir="/jobs/mlm")
    assert (
        describe_launch(launch, MemoryFiles(), predict=False).scenario["parallelism"]["zero_stage"]
        == 3
    )
    witnessed = describe_launch(
        Launch(batch_script=launch.batch_script, work_dir="/jobs/mlm", log_text=log),
        MemoryFiles(),
        predict=False,
    )
    assert witnessed.scenario["parallelism"]["zero_stage"] == 0
    assert witnessed.scenario["parallelism"]["megatron_fsdp"] is True
    assert witnessed.provenance["parallelism.zero_stage"].startswith("log:")
    assert (
        "data_parallel_sharding_strategy"
        in log.splitlines()[
            int(witnessed.provenance["parallelism.zero_stage"].removeprefix("log:").split()[0]) - 1
        ]
    )
