"""Config files of launches read as data, with the line of each value; the override syntaxes."""

from __future__ import annotations

import time

import pytest

from planner.errors import PlannerError, SourceError, SpecError
from planner.launch.configs import dotted_overrides, load_config, parse_scalar
from planner.launch.describe import finish, scenario_from_facts
from planner.launch.types import BoundedFiles, Facts, MemoryFiles, resolve_path

YAML = """\
model:
  name: tiny
  layers: 4
data:
  batch: [1, 2]
trainer:
  devices: 8
"""

TOML = """\
[job]
dump_folder = "./out"

[training]
seq_len = 2048  # tokens
steps = 100

[parallelism]
tensor_parallel_degree = 2
"""

JSON = """{
  "train_batch_size": 64,
  "zero_optimization": {
    "stage": 3
  },
  "bf16": {"enabled": true}
}
"""


def test_yaml_values_keep_their_lines() -> None:
    tree = load_config(YAML, "conf/run.yaml")
    assert tree.get("model.layers") == 4
    assert tree.where("model.layers") == "conf/run.yaml:3"
    assert tree.get("data.batch.1") == 2
    assert tree.where("trainer.devices") == "conf/run.yaml:7"
    assert tree.get("model.missing", "x") == "x"
    assert dict(tree.items("model")) == {"model.name": "tiny", "model.layers": 4}


def test_toml_and_json_values_keep_their_lines() -> None:
    toml = load_config(TOML, "/jobs/a/train.toml")
    assert toml.get("training.seq_len") == 2048
    assert toml.where("training.seq_len") == "train.toml:5"
    assert toml.where("parallelism.tensor_parallel_degree") == "train.toml:9"
    config = load_config(JSON, "ds.json")
    assert config.get("zero_optimization.stage") == 3
    assert config.where("zero_optimization.stage") == "ds.json:4"
    assert config.where("train_batch_size") == "ds.json:2"


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("a: [1, 2\n", "bad.yaml"),
        ("[training\nx = 1\n", "bad.toml"),
        ('{"a": 1,}', "bad.json"),
        ("- just\n- a list\n", "list.yaml"),
    ],
)
def test_broken_configs_are_spec_errors_naming_the_file(text: str, path: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_config(text, path)
    assert path in str(caught.value)


def test_a_yaml_alias_bomb_is_refused_quickly() -> None:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for level in range(1, 10):
        refs = ", ".join([f"*a{level - 1}"] * 9)
        lines.append(f"a{level}: &a{level} [{refs}]")
    started = time.process_time()
    with pytest.raises(PlannerError):
        load_config("\n".join(lines) + "\n", "bomb.yaml")
    assert time.process_time() - started < 5.0


def test_override_syntax() -> None:
    args = [
        "trainer.max_steps=100",
        "+model.extra=true",
        "--flag",
        "data.micro_batch_size=4",
        "not an override",
        "lr=1e-4",
        "layers=[1,2]",
    ]
    found = {key: value for key, value, _ in dotted_overrides(args)}
    assert found == {
        "trainer.max_steps": 100,
        "model.extra": True,
        "data.micro_batch_size": 4,
        "lr": 1e-4,
        "layers": [1, 2],
    }
    assert parse_scalar("'quoted'") == "quoted"
    assert parse_scalar("None") is None
    assert parse_scalar("bf16-mixed") == "bf16-mixed"


def test_bounded_files_refuse_past_their_bounds() -> None:
    inner = MemoryFiles({f"/j/f{i}": "x" * 10 for i in range(5)} | {"/j/big": "y" * 100})
    bounded = BoundedFiles(inner, max_files=3, max_file_bytes=50, max_total_bytes=25)
    assert bounded.read_text("/j/f0") == "x" * 10
    assert bounded.read_text("/j/f0") == "x" * 10  # cached, counted once
    bounded.read_text("/j/f1")
    with pytest.raises(SourceError, match="exceed"):
        bounded.read_text("/j/f2")
    with pytest.raises(SourceError, match="over 50 bytes"):
        BoundedFiles(inner, max_file_bytes=50).read_text("/j/big")
    many = BoundedFiles(inner, max_files=2)
    many.read_text("/j/f0")
    many.read_text("/j/f1")
    with pytest.raises(SourceError, match="at most 2 files"):
        many.read_text("/j/f2")


def test_paths_resolve_against_the_working_directory() -> None:
    assert resolve_path("conf/a.yaml", "/jobs/x") == "/jobs/x/conf/a.yaml"
    assert resolve_path("../y/a.yaml", "/jobs/x") == "/jobs/y/a.yaml"
    assert resolve_path("/abs/a.yaml", "/jobs/x") == "/abs/a.yaml"


def test_finish_derives_what_the_reader_left_open() -> None:
    facts = Facts()
    facts.set("hardware.num_gpus", 16, "launch")
    facts.set("hardware.gpus_per_node", 8, "launch")
    facts.set("parallelism.tensor_parallel", 2, "cfg.yaml:3")
    facts.set("parallelism.micro_batch_size", 2, "cfg.yaml:4")
    facts.set("launch.gradient_accumulation", 4, "cfg.yaml:5")
    finish(facts, gpu="h100")
    assert facts.get("parallelism.data_parallel") == 8
    assert facts.get("parallelism.global_batch_size") == 2 * 4 * 8
    assert facts.get("launch.num_nodes") == 2
    assert facts.get("hardware.gpu") == "h100-sxm"
    assert "parallelism.pipeline_parallel" in facts.assumed
    assert "model.num_layers" in facts.unknown
    document = scenario_from_facts(facts, name="j")
    assert document["parallelism"]["tensor_parallel"] == 2
    assert "launch" not in document
    assert document["name"] == "j"


def test_a_value_set_later_overrides_and_defaults_never_do() -> None:
    facts = Facts()
    facts.default("model.seq_length", 8192, "default of x")
    facts.set("model.seq_length", 4096, "cfg.yaml:2")
    facts.default("model.seq_length", 1024, "default of y")
    assert facts.get("model.seq_length") == 4096
    assert "model.seq_length" not in facts.assumed
    assert facts.values["model.seq_length"].source == "cfg.yaml:2"
