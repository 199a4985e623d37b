"""Models named by a launch: catalog presets by Hugging Face id / alias / key, local
``config.json`` directories, and Hugging Face configs of each family read as scenario fields."""

from __future__ import annotations

import builtins
import io
import os
from pathlib import Path

import pytest

from planner.catalog import (
    model_preset,
    model_preset_hf_ids,
    model_preset_key_for_name,
    model_preset_keys,
)
from planner.errors import SourceError, SpecError
from planner.launch.models import resolve_model
from planner.launch.types import Facts, MemoryFiles
from planner.scenario import parse_scenario

DATA = Path(__file__).resolve().parents[1] / "data" / "launch" / "models"
JOB = "/job"


class RecordingFiles:
    """``MemoryFiles`` that records every path asked for."""

    def __init__(self, files: dict[str, str]) -> None:
        self.inner = MemoryFiles(files)
        self.asked: list[str] = []

    def read_text(self, path: str) -> str:
        self.asked.append(path)
        return self.inner.read_text(path)

    def exists(self, path: str) -> bool:
        self.asked.append(path)
        return self.inner.exists(path)


def job_files() -> RecordingFiles:
    """The fixture directories as ``/job/models/<name>/config.json``."""
    return RecordingFiles(
        {
            f"{JOB}/models/{path.parent.name}/config.json": path.read_text(encoding="utf-8")
            for path in DATA.glob("*/config.json")
        }
    )


def line_of(name: str, key: str) -> int:
    text = (DATA / name / "config.json").read_text(encoding="utf-8")
    return next(i for i, line in enumerate(text.splitlines(), 1) if f'"{key}"' in line)


def resolve(reference: str, files: RecordingFiles | None = None) -> tuple[bool, Facts]:
    facts = Facts()
    found = resolve_model(
        reference, facts=facts, files=files or job_files(), cwd=JOB, source="train.yaml:3"
    )
    return found, facts


def test_hugging_face_id_is_case_insensitive() -> None:
    found, facts = resolve("META-LLAMA/llama-3.1-8b")
    assert found
    assert facts.get("model.num_layers") == 32
    assert facts.get("model.num_query_groups") == 8
    assert facts.get("model.ffn_hidden_size") == 14336
    assert facts.get("model.vocab_size") == 128256
    assert (
        facts.values["model.hidden_size"].source == "catalog:llama3.1-8b (meta-llama/Llama-3.1-8B)"
    )
    assert facts.get("launch.hf_id") == "meta-llama/Llama-3.1-8B"
    assert facts.get("launch.model_name") == "META-LLAMA/llama-3.1-8b"
    assert facts.values["launch.model_name"].source == "train.yaml:3"


def test_the_model_length_is_not_the_training_sequence() -> None:
    facts = Facts()
    facts.set("model.seq_length", 2048, "train.yaml:9")
    resolve_model("Qwen/Qwen3-8B", facts=facts, files=job_files(), cwd=JOB, source="x")
    assert facts.get("model.seq_length") == 2048
    _, fresh = resolve("Qwen/Qwen3-8B")
    assert not fresh.has("model.seq_length")
    assert fresh.get("launch.model_seq_length") == 4096
    fresh.default("model.seq_length", 1024, "default of a framework")  # its default wins
    assert fresh.get("model.seq_length") == 1024
    assert "model.num_layers" not in fresh.assumed


@pytest.mark.parametrize(
    ("reference", "key", "hf_id"),
    [
        ("casperhansen/llama-3-70b-fp16", "llama3-70b", "casperhansen/llama-3-70b-fp16"),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama3.1-8b", None),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b", None),
        ("Qwen/Qwen3-4B-Instruct-2507", "qwen3-4b", None),
        ("HuggingFaceH4/zephyr-orpo-141b-A35b-v0.1", "mixtral-8x22b", None),
        ("mistral-community/Mixtral-8x22B-v0.1", "mixtral-8x22b", None),
        ("hf://openai/gpt-oss-20b", "gpt-oss-20b", "openai/gpt-oss-20b"),
        ("llama3_1_70b", "llama3.1-70b", "meta-llama/Llama-3.1-70B"),
        ("llama4_scout_17b_16e", "llama4-scout-17b-16e", "meta-llama/Llama-4-Scout-17B-16E"),
        ("qwen3-30b-a3b", "qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B"),
        ("gpt2", "gpt2-124m", "gpt2"),
    ],
)
def test_aliases_and_keys(reference: str, key: str, hf_id: str | None) -> None:
    found, facts = resolve(reference)
    assert found
    assert facts.values["model.num_layers"].source.startswith(f"catalog:{key} (")
    expected = model_preset(key)
    for field in ("num_layers", "hidden_size", "ffn_hidden_size", "vocab_size"):
        assert facts.get(f"model.{field}") == expected[field]
    spelled = hf_id or reference.removeprefix("hf://")
    assert facts.get("launch.hf_id") == spelled


def test_moe_preset_fields() -> None:
    _, facts = resolve("Qwen/Qwen3-30B-A3B")
    assert facts.get("model.num_experts") == 128
    assert facts.get("model.moe_router_topk") == 8
    assert facts.get("model.moe_ffn_hidden_size") == 768
    assert facts.get("model.ffn_hidden_size") == 6144
    assert facts.get("model.kv_channels") == 128
    _, scout = resolve("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert scout.get("model.num_shared_experts") == 1
    assert scout.get("model.moe_router_topk") == 1


def test_latent_attention_preset_has_no_query_groups() -> None:
    _, facts = resolve("deepseek-ai/DeepSeek-V3-Base")
    assert facts.get("model.multi_latent_attention") is True
    assert facts.get("model.kv_lora_rank") == 512
    assert not facts.has("model.num_query_groups")


def test_mha_preset_gets_query_groups_equal_to_heads() -> None:
    _, facts = resolve("mosaicml/mpt-7b")
    assert facts.get("model.num_query_groups") == 32


@pytest.mark.parametrize(
    ("reference", "key", "how"),
    [
        ("/workspace/models/Qwen3-8B", "qwen3-8b", "last component"),
        ("/ckpt/meta-llama/Llama-3.1-8B/", "llama3.1-8b", "the id in its path"),
        (
            "/root/.cache/huggingface/hub/models--Qwen--Qwen2-0.5B/snapshots/abc123",
            "qwen2-0.5b",
            "cache entry",
        ),
    ],
)
def test_paths_naming_an_id(reference: str, key: str, how: str) -> None:
    found, facts = resolve(reference)
    assert found
    assert facts.values["model.num_layers"].source.startswith(f"catalog:{key} (")
    assert any(how in note and key in note for note in facts.notes)


def test_local_directory_config() -> None:
    files = job_files()
    found, facts = resolve("models/tiny-llama", files)
    assert found
    expected = {
        "num_layers": 6,
        "hidden_size": 1536,
        "num_attention_heads": 16,
        "num_query_groups": 4,
        "kv_channels": 128,
        "ffn_hidden_size": 4352,
        "vocab_size": 48000,
        "activation": "swiglu",
        "untie_embeddings": True,
    }
    assert {field: facts.get(f"model.{field}") for field in expected} == expected
    assert facts.get("launch.model_seq_length") == 16384
    line = line_of("tiny-llama", "num_key_value_heads")
    assert facts.values["model.num_query_groups"].source == f"models/tiny-llama/config.json:{line}"
    assert not facts.has("launch.hf_id")
    assert facts.get("launch.model_name") == "models/tiny-llama"
    assert f"{JOB}/models/tiny-llama/config.json" in files.asked


def test_local_moe_directory_by_absolute_path_and_file() -> None:
    found, facts = resolve(f"{JOB}/models/small-moe/")
    assert found
    assert facts.get("model.num_experts") == 24
    assert facts.get("model.moe_router_topk") == 3
    assert facts.get("model.moe_ffn_hidden_size") == 256
    assert facts.get("model.ffn_hidden_size") == 3072
    assert facts.get("model.moe_layer_freq") == [0, 1, 1, 1]
    assert facts.get("model.kv_channels") == 128
    assert facts.get("model.untie_embeddings") is False
    line = line_of("small-moe", "num_experts")
    assert facts.values["model.num_experts"].source == f"{JOB}/models/small-moe/config.json:{line}"
    found, by_file = resolve("models/small-moe/config.json")
    assert found
    assert by_file.values["model.num_experts"].source == f"models/small-moe/config.json:{line}"


def test_local_directory_wins_over_catalog() -> None:
    text = (DATA / "tiny-llama" / "config.json").read_text(encoding="utf-8")
    files = RecordingFiles({f"{JOB}/Qwen/Qwen3-8B/config.json": text})
    found, facts = resolve("Qwen/Qwen3-8B", files)
    assert found
    assert facts.get("model.num_layers") == 6
    assert facts.values["model.num_layers"].source.startswith("Qwen/Qwen3-8B/config.json:")


def test_hub_scheme_never_reads_local_files() -> None:
    text = (DATA / "tiny-llama" / "config.json").read_text(encoding="utf-8")
    files = RecordingFiles({f"{JOB}/Qwen/Qwen3-8B/config.json": text})
    _, facts = resolve("hf://Qwen/Qwen3-8B", files)
    assert facts.get("model.num_layers") == 36
    assert files.asked == []


@pytest.mark.parametrize(
    ("directory", "field", "message"),
    [
        ("broken-negative", "hidden_size", "positive integer, got -64"),
        ("broken-missing", "num_hidden_layers", "is missing"),
    ],
)
def test_broken_local_config_names_file_and_field(directory: str, field: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        resolve(f"models/{directory}")
    assert caught.value.field == f"models/{directory}/config.json"
    assert field in caught.value.message
    assert message in caught.value.message


def test_invalid_json_names_the_file() -> None:
    files = RecordingFiles({f"{JOB}/models/bad/config.json": '{"hidden_size": 12,'})
    with pytest.raises(SpecError, match=r"models/bad/config.json: invalid JSON"):
        resolve("models/bad", files)


def test_refused_file_is_a_source_error() -> None:
    class Refusing(RecordingFiles):
        def read_text(self, path: str) -> str:
            raise SourceError(path, "outside the job's directory")

    files = Refusing({f"{JOB}/models/x/config.json": "{}"})
    with pytest.raises(SourceError):
        resolve("models/x", files)


@pytest.mark.parametrize("reference", ["acme/SuperModel-13B", "/models/Llama-3.1", "", "  "])
def test_unknown_name_is_a_note(reference: str) -> None:
    found, facts = resolve(reference)
    assert not found
    assert not any(name.startswith("model.") for name, _ in facts)
    assert len(facts.notes) == 1
    assert "train.yaml:3" in facts.notes[0]
    if reference.strip():
        assert repr(reference) in facts.notes[0]
        assert "config.json" in facts.notes[0]
        assert "scenario" in facts.notes[0]


def test_unknown_name_suggests_the_closest() -> None:
    _, facts = resolve("meta-llama/Llama-3.1-8C")
    assert "did you mean 'meta-llama/Llama-3.1-8B'?" in facts.notes[0]


def test_no_io_outside_the_files_port(monkeypatch: pytest.MonkeyPatch) -> None:
    model_preset_keys()  # the catalog is package data, read once per process
    model_preset_key_for_name("warm")
    files = job_files()
    on_disk = str(DATA / "tiny-llama")  # exists on disk, not behind the port

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("I/O outside the LaunchFiles port")

    with monkeypatch.context() as patched:
        for target, name in ((builtins, "open"), (io, "open"), (os, "open"), (os, "stat")):
            patched.setattr(target, name, refuse)
        outcomes = [
            resolve(on_disk, files),
            resolve("models/tiny-llama", files),
            resolve("Qwen/Qwen2.5-7B-Instruct", files),
        ]
    assert [found for found, _ in outcomes] == [False, True, True]
    assert outcomes[1][1].get("model.num_layers") == 6
    assert files.asked == [
        f"{on_disk}/config.json",
        f"{JOB}/models/tiny-llama/config.json",
        f"{JOB}/models/tiny-llama/config.json",
        f"{JOB}/Qwen/Qwen2.5-7B-Instruct/config.json",
    ]


def test_every_preset_parses_and_answers_to_its_ids() -> None:
    seen: dict[str, str] = {}
    for key in model_preset_keys():
        doc = {
            "model": {"preset": key},
            "hardware": {"gpu": "h200", "num_gpus": 8},
            "parallelism": {"global_batch_size": 8},
        }
        assert parse_scenario(doc).model.preset == key
        for hf_id in model_preset_hf_ids(key):
            assert model_preset_key_for_name(hf_id.upper()) == key
            assert seen.setdefault(hf_id.lower(), key) == key
        assert not {"hf_ids", "aliases", "source"} & set(model_preset(key))
