"""One rule for numbers in documents: a number, or text holding a decimal/scientific literal.

YAML 1.1 resolvers (PyYAML's ``safe_load``, ``yq``) read ``1.0e12`` as the string
``"1.0e12"``; the CLI's loader reads it as a number. The same document must give the same
answer whichever produced it.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from planner.cli import app
from planner.errors import SpecError
from planner.scenario import parse_scenario, predict_documents, read_documents
from planner.scenario.numbers import integer_or_value, number_or_value
from planner.scenario.plans import explore_document, parse_request, parse_space
from tests.recommend.test_allocation import JOB
from tests.scenario.conftest import BASE
from tests.search.conftest import SMALL

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "llama3-8b-h100.yaml"


def _as_yaml_11_json(text: str) -> Any:
    """What ``yq -o json`` (a YAML 1.1 resolver) makes of a YAML document, read back."""
    return json.loads(json.dumps(yaml.safe_load(text)))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.0e12", 1.0e12),
        ("1e12", 1.0e12),
        (" 2.5E-3 ", 2.5e-3),
        ("+8", 8),
        ("-3", -3),
        ("8", 8),
        (".5", 0.5),
        ("7.", 7.0),
    ],
)
def test_literals_become_numbers(text: str, expected: float) -> None:
    value = number_or_value(text)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize("value", ["abc", "inf", "nan", "1e", "0x10", "1,000", "", True, None, 3])
def test_anything_else_is_left_alone(value: object) -> None:
    assert number_or_value(value) is value


def test_integer_fields_take_whole_floats() -> None:
    assert integer_or_value("1e3") == 1000
    assert type(integer_or_value("1e3")) is int
    assert integer_or_value(8.0) == 8
    assert integer_or_value("8.5") == 8.5
    assert math.isinf(number_or_value("1e999"))  # type: ignore[arg-type]


def test_cli_and_json_paths_predict_the_example_alike() -> None:
    """``planner predict deploy/examples/llama3-8b-h100.yaml`` and ``POST /v1/predict`` with
    the same document converted to JSON by a YAML 1.1 tool give the same prediction."""
    text = EXAMPLE.read_text(encoding="utf-8")
    converted = _as_yaml_11_json(text)
    assert converted["training"]["total_tokens"] == "1.0e12"  # the drift this rule removes
    cli_path = predict_documents(read_documents(text, "yaml", source=str(EXAMPLE)))
    json_path = predict_documents([converted])  # what POST /v1/predict runs on its body
    assert "error" not in cli_path[0], cli_path
    assert json_path == cli_path
    assert cli_path[0]["time_to_train_s"] == pytest.approx(
        1.0e12 / cli_path[0]["tokens_per_s"], rel=1e-12
    )
    cli = CliRunner().invoke(app, ["predict", str(EXAMPLE), "--json"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.output) == json_path[0]


def test_every_numeric_scenario_field_takes_text() -> None:
    doc = copy.deepcopy(BASE)
    doc["model"] = {
        "num_layers": "32",
        "hidden_size": "4096",
        "num_attention_heads": "32",
        "num_query_groups": "8",
        "ffn_hidden_size": "14336",
        "vocab_size": "128256",
        "seq_length": "8.192e3",
    }
    doc["hardware"] = {
        "gpu": "h100-sxm",
        "num_gpus": "1.024E3",
        "gpus_per_node": "8",
        "nvlink_domain_size": "8",
        "inter_node_bandwidth_gbit_per_s": "400",
    }
    doc["parallelism"] = {
        "tensor_parallel": "8",
        "pipeline_parallel": "4",
        "micro_batch_size": "1",
        "global_batch_size": "512",
        "zero_stage": "1",
    }
    doc["training"] = {"total_tokens": "1.5e13", "train_iters": "1e4"}
    numbers = copy.deepcopy(BASE)
    numbers["model"] = {
        "num_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_query_groups": 8,
        "ffn_hidden_size": 14336,
        "vocab_size": 128256,
        "seq_length": 8192,
    }
    numbers["hardware"] = {
        "gpu": "h100-sxm",
        "num_gpus": 1024,
        "gpus_per_node": 8,
        "nvlink_domain_size": 8,
        "inter_node_bandwidth_gbit_per_s": 400.0,
    }
    numbers["parallelism"] = {
        "tensor_parallel": 8,
        "pipeline_parallel": 4,
        "micro_batch_size": 1,
        "global_batch_size": 512,
        "zero_stage": 1,
    }
    numbers["training"] = {"total_tokens": 1.5e13, "train_iters": 10000}
    text_scenario = parse_scenario(doc)
    assert text_scenario == parse_scenario(numbers)
    assert text_scenario.training.total_tokens == 1.5e13
    assert text_scenario.hardware.num_gpus == 1024


def test_text_that_is_no_number_names_the_field() -> None:
    doc = copy.deepcopy(BASE)
    doc["training"]["total_tokens"] = "lots"
    with pytest.raises(SpecError) as err:
        parse_scenario(doc)
    assert err.value.field == "training.total_tokens"
    doc["training"]["total_tokens"] = "1e999"
    with pytest.raises(SpecError, match="finite"):
        parse_scenario(doc)


def test_explore_documents_follow_the_rule() -> None:
    small = copy.deepcopy(SMALL)
    converted = copy.deepcopy(small)
    converted["hardware"]["num_gpus"] = ["8", "1.6e1"]
    converted["parallelism"]["tensor_parallel"] = ["1", "2"]
    converted["training"]["total_tokens"] = "1.0e9"
    numeric = copy.deepcopy(small)
    numeric["hardware"]["num_gpus"] = [8, 16]
    numeric["parallelism"]["tensor_parallel"] = [1, 2]
    assert [s.num_gpus for s in parse_space(converted).subspaces] == [8, 16]
    assert explore_document(converted, top_k=2) == explore_document(numeric, top_k=2)


def test_recommend_documents_follow_the_rule() -> None:
    converted = copy.deepcopy(JOB)
    converted["training"]["total_tokens"] = "1.0e10"
    converted["recommend"] = {
        "deadline_s": "2.6e6",
        "gpu_counts": ["4", "8"],
        "marginal_efficiency_threshold": "0.5",
        "restart": {"checkpoint_bandwidth_gb_per_s": "20", "relaunch_s": "3e2"},
    }
    request = parse_request(converted)
    assert request.total_tokens == 1.0e10
    assert request.deadline_s == 2.6e6
    assert request.gpu_counts == (4, 8)
    assert request.restart.relaunch_s == 300.0
    assert request.restart.checkpoint_bandwidth_bytes_per_s == 20e9
