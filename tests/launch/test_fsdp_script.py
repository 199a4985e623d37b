"""The plain FSDP-script reader (AWS awsome-distributed-training ``train.py`` flags): argparse
defaults, the config each ``--model_type`` builds, the dataloader's sequence length and the
world from torchrun."""

from __future__ import annotations

from planner.launch.readers.fsdp_script import READER
from planner.launch.types import Facts, Invocation, MemoryFiles
from tests.launch import reader_support as support


def _read(invocation: Invocation, allocation: Facts | None = None) -> Facts:
    return support.finished(support.read(READER, invocation, MemoryFiles(), given=allocation))


def _torchrun(*args: str, nodes: str = "2", per_node: str = "4") -> Invocation:
    return Invocation(
        program="/workspace/fsdp/train.py",
        args=args,
        launcher="torchrun",
        launcher_args={"nnodes": nodes, "nproc_per_node": per_node},
    )


def test_recognised_by_its_flags_not_its_name() -> None:
    assert READER.recognises(_torchrun("--model_type=llama_v2", "--num_layers=4"))
    assert READER.recognises(
        Invocation(program="run.py", args=("--model_type", "mistral", "--hidden_width", "64"))
    )
    assert not READER.recognises(Invocation(program="train.py", args=("--num_layers=4",)))
    assert not READER.recognises(
        Invocation(program="run_clm.py", args=("--model_type", "gpt2", "--block_size", "512"))
    )
    tune = Invocation(program="tune", args=("--model_type=x", "--num_layers=2"))
    assert not READER.recognises(tune)


def test_llama_flags_with_defaults_and_the_dataloader_sequence() -> None:
    facts = _read(
        _torchrun(
            "--model_type=llama_v3",
            "--num_layers=16",
            "--hidden_width=2048",
            "--num_heads=16",
            "--num_key_value_heads=4",
            "--intermediate_size=5632",
            "--max_context_width",
            "16384",
            "--train_batch_size=3",
            "--max_steps=700",
        )
    )
    assert facts.get("model.num_layers") == 16
    assert facts.get("model.num_query_groups") == 4
    assert facts.get("model.ffn_hidden_size") == 5632
    assert facts.get("model.vocab_size") == 50432
    assert "model.vocab_size" in facts.assumed
    assert "aws-samples/awsome-distributed-training" in facts.values["model.vocab_size"].source
    assert facts.get("model.seq_length") == 4096
    assert any("max_position_embeddings" in note for note in facts.notes)
    assert facts.get("hardware.num_gpus") == 8
    assert facts.get("launch.num_nodes") == 2
    assert facts.get("launch.fsdp_shard") == 8
    assert facts.get("parallelism.global_batch_size") == 3 * 8
    assert facts.get("training.train_iters") == 700
    assert facts.get("parallelism.precision") == "bf16"
    assert facts.get("parallelism.recompute") == "full"
    assert facts.get("parallelism.zero_stage") == 3
    assert facts.get("training.mode") == "pretrain"


def test_mixtral_experts_come_from_the_code() -> None:
    facts = _read(
        _torchrun(
            "--model_type",
            "mixtral",
            "--num_heads",
            "8",
            "--vocab_size",
            "32000",
            "--max_training_steps",
            "9",
            "--bf16",
            "0",
            "--activation_checkpointing=0",
        )
    )
    assert facts.get("model.num_experts") == 8
    assert facts.get("model.moe_router_topk") == 2
    assert facts.get("model.moe_ffn_hidden_size") == 11008
    assert facts.get("model.num_query_groups") == 8
    assert facts.get("model.num_layers") == 12
    assert facts.get("training.train_iters") == 9
    assert not facts.has("parallelism.precision")
    assert not facts.has("parallelism.recompute")


def test_gpt_neox_is_mha_with_a_four_times_ffn() -> None:
    facts = _read(
        _torchrun(
            "--model_type=gpt_neox",
            "--hidden_width=1024",
            "--num_heads=16",
            "--num_key_value_heads=4",
        )
    )
    assert facts.get("model.ffn_hidden_size") == 4096
    assert facts.get("model.num_query_groups") == 16
    assert facts.get("model.activation") == "gelu"


def test_the_launchers_world_size_wins() -> None:
    allocation = Facts()
    allocation.set("launch.world_size", 64, "launch")
    allocation.set("hardware.num_gpus", 64, "launch")
    facts = _read(_torchrun("--model_type=llama_v2", "--num_layers=2"), allocation)
    assert facts.get("launch.fsdp_shard") == 64
    assert not facts.has("hardware.num_gpus")


def test_an_unknown_model_type_leaves_the_shape_open() -> None:
    facts = _read(_torchrun("--model_type=bert", "--num_layers=2"))
    assert not facts.has("model.num_layers")
    assert "model.num_layers" in facts.unknown
    assert any("bert" in note for note in facts.notes)
