"""read_documents and predict_documents: formats, batches, bad lines, JSON-safe output."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from planner.errors import SpecError
from planner.scenario import predict_documents, read_documents
from tests.scenario.conftest import BASE

CONTRACT_KEYS = {
    "name",
    "iteration_time_s",
    "tokens_per_s",
    "tokens_per_s_per_gpu",
    "model_flops_per_iteration",
    "model_tflops_per_gpu",
    "mfu",
    "memory_per_gpu_bytes",
    "fits_in_memory",
    "breakdown_s",
    "time_to_train_s",
}

YAML_TWO = """
name: a
model: {preset: llama3-8b}
hardware: {gpu: h100-sxm, num_gpus: 8}
parallelism: {global_batch_size: 8}
training: {total_tokens: 1.5e13}
---
- name: b
  model: {preset: llama2-7b}
  hardware: {gpu: a100-80gb, num_gpus: 8}
  parallelism: {global_batch_size: 16, tensor_parallel: 2}
- name: c
  model: {preset: llama2-7b}
  hardware: {gpu: a100-80gb, num_gpus: 8}
  parallelism: {global_batch_size: 15}
"""


def test_yaml_documents_and_batches_keep_order() -> None:
    docs = read_documents(YAML_TWO, "yaml", "s.yaml")
    assert [d["name"] for d in docs] == ["a", "b", "c"]  # type: ignore[index]
    assert docs[0]["training"]["total_tokens"] == 1.5e13  # type: ignore[index]
    out = predict_documents(docs)
    assert [o["name"] for o in out] == ["a", "b", "c"]
    assert set(out[0]) >= CONTRACT_KEYS
    assert out[0]["time_to_train_s"] > 0
    assert out[1]["time_to_train_s"] is None
    assert out[2]["error"].startswith("parallelism.global_batch_size: ")
    json.dumps(out, allow_nan=False)


def test_yaml_syntax_error_names_source_and_line() -> None:
    with pytest.raises(SpecError) as info:
        read_documents("model:\n  num_layers: [1, 2\nhardware: {}\n", "yaml", "bad.yaml")
    assert info.value.field == "bad.yaml"
    assert "line" in info.value.message
    assert "column" in info.value.message


def test_yaml_duplicate_key_is_an_error() -> None:
    with pytest.raises(SpecError, match="line 2, column 1: duplicate key 'model'"):
        read_documents("model: {}\nmodel: {}\n", "yaml", "dup.yaml")


def test_json_single_and_batch() -> None:
    one = read_documents(json.dumps(BASE), "json", "s.json")
    assert len(one) == 1
    batch = read_documents(json.dumps([BASE, BASE]), "json", "s.json")
    assert len(batch) == 2
    with pytest.raises(SpecError) as info:
        read_documents('{"model": }', "json", "s.json")
    assert info.value.field == "s.json"
    assert "line 1, column 11" in info.value.message


def test_jsonl_bad_line_does_not_stop_the_batch() -> None:
    good = json.dumps(BASE)
    text = f"{good}\n\n{{not json\n{good}\n"
    docs = read_documents(text, "jsonl", "batch.jsonl")
    assert len(docs) == 3
    assert isinstance(docs[1], SpecError)
    assert docs[1].field == "batch.jsonl:3"
    out = predict_documents(docs)
    assert "error" not in out[0]
    assert "error" not in out[2]
    assert out[1] == {"name": None, "error": str(docs[1])}


def test_unknown_format() -> None:
    with pytest.raises(SpecError):
        read_documents("", "toml", "x")  # type: ignore[arg-type]


@pytest.mark.parametrize("doc", [None, 3, "text", [], {"name": "x"}, {"name": 5, "model": 1}])
def test_predict_documents_never_raises(doc: object) -> None:
    (out,) = predict_documents([doc])
    assert set(out) == {"name", "error"}
    if isinstance(doc, dict):
        assert out["name"] == str(doc["name"])
    else:
        assert out["name"] is None


def test_output_is_plain_json(base_doc: dict[str, Any]) -> None:
    (out,) = predict_documents([base_doc])
    for key in ("iteration_time_s", "mfu", "memory_per_gpu_bytes", "model_flops_per_iteration"):
        assert type(out[key]) is float
        assert math.isfinite(out[key])
    assert type(out["fits_in_memory"]) is bool
    assert set(out["breakdown_s"]) >= {
        "compute",
        "tp_comm_exposed",
        "pp_bubble",
        "dp_comm_exposed",
        "optimizer",
    }
    total = sum(out["breakdown_s"].values())
    assert total == pytest.approx(out["iteration_time_s"])


def test_a_calibrated_prediction_keeps_every_field_the_calibration_adds() -> None:
    """The typed result holds exactly what ``ObservedCalibration.apply`` returns, in its order
    (a field it adds that ``PredictedJson`` lacks would make the prediction an error)."""
    from planner.calibration.observed import observe_runs
    from planner.calibration.observed_runs import read_observed_runs
    from planner.perf.step import predict_batch
    from planner.scenario.documents import predict_results, prediction_json
    from planner.scenario.parse import parse_scenario
    from tests.calibration.test_observed import _runs_text, _scenario

    runs, _ = read_observed_runs(_runs_text(1.25, cluster="east"), "runs.jsonl")
    calibration = observe_runs(runs).calibration
    doc = _scenario(2, 8)
    scenario = parse_scenario(doc)
    (prediction,) = predict_batch([scenario], None)
    applied = calibration.apply(
        prediction_json(prediction, scenario.name), scenario, cluster="east"
    )
    (result,) = predict_results([doc], calibration=calibration, cluster="east")
    assert "calibrated_iteration_time_s" in applied
    assert json.dumps(result) == json.dumps(applied)
