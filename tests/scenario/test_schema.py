"""The scenario schema (``planner.scenario.schema``) and the parser agree: every scenario the
parser accepts (the test data, the published runs, the format's own variants) validates against
the schema, unknown fields are refused by both, values of the wrong type by both, and the field
tables of ``docs/scenario-format.md`` are the schema's."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from benchmarks.accuracy.convert import Dataset, build_dataset
from planner.errors import SpecError
from planner.scenario import parse_scenario
from planner.scenario import schema_doc as schema_module
from planner.scenario.loading import load_yaml
from planner.scenario.numbers import number_or_value
from planner.scenario.parse import SECTION_KEYS
from planner.scenario.schema import NUMBER_TEXT_PATTERN, SECTIONS, ScenarioSchema
from planner.service.api.models import ScenarioDocument, as_document

from .conftest import BASE

TESTS = Path(__file__).resolve().parents[1]


def _scenarios_in(doc: object) -> Iterator[dict[str, Any]]:
    """Every mapping inside ``doc`` that has the three required sections of a scenario."""
    if isinstance(doc, dict):
        if {"model", "hardware", "parallelism"} <= doc.keys():
            yield doc
        for value in doc.values():
            yield from _scenarios_in(value)
    elif isinstance(doc, list):
        for value in doc:
            yield from _scenarios_in(value)


def _data_scenarios() -> list[dict[str, Any]]:
    """The scenario documents in the test data files (YAML, JSON, JSON lines)."""
    found: list[dict[str, Any]] = []
    for root in (TESTS / "data", TESTS / "golden"):
        for path in sorted(root.rglob("*")):
            if path.suffix not in {".yaml", ".yml", ".json", ".jsonl"} or not path.is_file():
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if "parallelism" not in text:
                continue
            try:
                if path.suffix == ".jsonl":
                    docs: list[object] = [json.loads(x) for x in text.splitlines() if x.strip()]
                elif path.suffix == ".json":
                    docs = [json.loads(text)]
                else:
                    docs = load_yaml(text, str(path))
            except (ValueError, SpecError):
                continue
            for doc in docs:
                found.extend(_scenarios_in(doc))
    return found


def _accepted(doc: dict[str, Any]) -> bool:
    try:
        parse_scenario(copy.deepcopy(doc))
    except SpecError:
        return False
    return True


def _variants() -> list[dict[str, Any]]:
    """The format's spellings of one scenario: numbers as text, integral floats, enumerations
    in other cases, one name for a list, the list forms of the layer pattern and the layout."""
    docs = []
    for model, hardware, parallelism, training in (
        (
            {
                "num_layers": "80",
                "hidden_size": 8192.0,
                "num_attention_heads": " 64 ",
                "vocab_size": "1.28256e5",
                "seq_length": 8192,
                "activation": "SwiGLU",
                "num_experts": None,
                "untie_embeddings": False,
            },
            {
                "gpu": "H100 SXM5",
                "num_gpus": "1.024e3",
                "inter_node_bandwidth_gbit_per_s": "400",
                "memory_headroom_gib": 2,
            },
            {
                "tensor_parallel": 8.0,
                "pipeline_parallel": "4",
                "global_batch_size": "512",
                "recompute": "Selective",
                "recompute_modules": "core_attn",
                "precision": "BF16",
            },
            {
                "framework": "NeMo",
                "total_tokens": "1.5e13",
                "mode": "LoRA",
                "lora_targets": "linear_qkv",
                "lora_rank": "16",
            },
        ),
        (
            {
                "preset": "mixtral-8x7b",
                "moe_layer_freq": [1.0, 1] * 16,
                "moe_token_dispatcher_type": "AllGather",
                "moe_expert_capacity_factor": "1.25",
            },
            {"gpu": "h100-sxm", "num_gpus": 64},
            {
                "tensor_parallel": 2,
                "pipeline_parallel": 2,
                "expert_parallel": 8,
                "global_batch_size": 256,
                "sequence_parallel": True,
                "pipeline_layout": [8, 8, 8, 8],
                "recompute": "SELECTIVE",
                "recompute_modules": ["moe_act", "LayerNorm"],
            },
            {"framework": "megatron", "train_iters": 1e3},
        ),
        (
            {"preset": "llama3-8b"},
            {"gpu": "h100-sxm", "num_gpus": 16},
            {
                "pipeline_parallel": 2,
                "global_batch_size": 64,
                "pipeline_layout": ["Et*8", "t*8", "t*8", "t*8L"],
                "fp8_recipe": "Tensorwise",
                "precision": "fp8",
            },
            None,
        ),
    ):
        doc = {"name": 7, "model": model, "hardware": hardware, "parallelism": parallelism}
        if training is not None:
            doc["training"] = training
        docs.append(doc)
    return docs


def test_the_format_variants_are_valid_scenarios() -> None:
    for doc in _variants():
        parse_scenario(copy.deepcopy(doc))
        ScenarioSchema.model_validate(doc)


def test_every_scenario_of_the_test_data_the_parser_accepts_validates() -> None:
    docs = [d for d in _data_scenarios() if _accepted(d)]
    assert len(docs) >= 3
    for doc in docs:
        ScenarioSchema.model_validate(doc)


@pytest.fixture(scope="module")
def dataset() -> Dataset:
    """The published runs as scenario documents (``benchmarks.accuracy``)."""
    return build_dataset()


def test_every_published_run_validates(dataset: Dataset) -> None:
    cases = dataset.cases + dataset.memory_cases
    assert cases
    for case in cases:
        parse_scenario(copy.deepcopy(case.document))
        ScenarioSchema.model_validate(case.document)


def test_the_sections_hold_the_parsers_fields() -> None:
    for section, keys in SECTION_KEYS.items():
        assert set(SECTIONS[section].model_fields) == set(keys), section


@pytest.mark.parametrize("section", ["", "model", "hardware", "parallelism", "training"])
def test_an_unknown_field_is_refused_by_both(section: str) -> None:
    doc = copy.deepcopy(BASE)
    (doc[section] if section else doc)["tensor_paralel"] = 8
    with pytest.raises(SpecError, match="unknown"):
        parse_scenario(copy.deepcopy(doc))
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        ScenarioSchema.model_validate(doc)


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("model", "num_layers", True),
        ("model", "num_layers", 1.5),
        ("model", "num_layers", "abc"),
        ("model", "num_layers", "1.5"),
        ("model", "num_layers", 2**60),
        ("model", "num_layers", "9" * 401),
        ("model", "num_layers", [80]),
        ("model", "untie_embeddings", "yes"),
        ("model", "untie_embeddings", 1),
        ("model", "activation", "relu"),
        ("model", "activation", 1),
        ("model", "moe_layer_freq", "2"),
        ("model", "moe_layer_freq", [1, "x"]),
        ("model", "moe_layer_freq", [1, 2**60]),
        ("model", "preset", 70),
        ("hardware", "gpu", 100),
        ("hardware", "num_gpus", None),
        ("hardware", "memory_headroom_gib", False),
        ("hardware", "inter_node_bandwidth_gbit_per_s", "fast"),
        ("parallelism", "global_batch_size", None),
        ("parallelism", "recompute", "partial"),
        ("parallelism", "recompute_modules", {"core_attn": True}),
        ("parallelism", "recompute_modules", ["everything"]),
        ("parallelism", "sequence_parallel", "true"),
        ("parallelism", "pipeline_layout", {"stages": 4}),
        ("parallelism", "pipeline_layout", [2**60]),
        ("training", "framework", "jax"),
        ("training", "lora_targets", 3),
        ("training", "total_tokens", [1e12]),
        ("training", "train_iters", 10.5),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_by_both(
    section: str, key: str, value: object
) -> None:
    doc = copy.deepcopy(BASE)
    if key == "moe_layer_freq":  # a dense model ignores the MoE layer pattern
        doc["model"]["preset"] = "mixtral-8x7b"
    doc.setdefault(section, {})[key] = value
    with pytest.raises(SpecError) as error:
        parse_scenario(copy.deepcopy(doc))
    assert error.value.field.startswith(f"{section}.{key}")
    with pytest.raises(ValidationError) as invalid:
        ScenarioSchema.model_validate(doc)
    assert invalid.value.errors()[0]["loc"][:2] == (section, key)


#: Valid scenarios of a dense, an MoE (LoRA) and an MLA model to put each probe value into.
PROBE_BASES: list[dict[str, Any]] = [
    BASE,
    {
        "model": {"preset": "mixtral-8x7b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 64},
        "parallelism": {
            "tensor_parallel": 2,
            "pipeline_parallel": 2,
            "expert_parallel": 8,
            "global_batch_size": 256,
            "sequence_parallel": True,
            "recompute": "selective",
        },
        "training": {"mode": "lora"},
    },
    {
        "model": {"preset": "deepseek-v3"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 2048},
        "parallelism": {
            "pipeline_parallel": 16,
            "expert_parallel": 64,
            "global_batch_size": 4096,
            "decoder_first_pipeline_num_layers": 1,
            "decoder_last_pipeline_num_layers": 4,
        },
    },
]
#: Values of every kind a YAML or JSON document can hold, for every field.
PROBES: list[object] = [
    True, False, 0, 1, 2, -1, 1.0, 1.5, 2**60, "abc", "8", "1e3", " 4 ", "true", "", "9" * 401,
    "SELECTIVE", "core_attn", "linear_qkv", "Et|tL", None, [], [1], [1, 0], [1.0, 2.0],
    [True, False], ["a"], ["core_attn", 1], [None], [8, 8, 8, 8], {"a": 1},
]  # fmt: skip


@pytest.mark.parametrize("base", range(len(PROBE_BASES)))
def test_whatever_the_parser_accepts_in_a_field_the_schema_accepts(base: int) -> None:
    accepted_only_by_the_parser = []
    fields = [("", "name")] + [(s, k) for s, keys in SECTION_KEYS.items() for k in keys]
    for section, key in fields:
        for value in PROBES:
            doc = copy.deepcopy(PROBE_BASES[base])
            (doc.setdefault(section, {}) if section else doc)[key] = value
            if not _accepted(doc):
                continue
            try:
                ScenarioSchema.model_validate(doc)
            except ValidationError:
                accepted_only_by_the_parser.append((section, key, value))
    assert accepted_only_by_the_parser == []


@pytest.mark.parametrize(
    "text", ["8", " 1.5e3 ", ".5", "-2.", "+3E-2", "abc", "inf", "nan", "1e", "1.5.2", "", "0x10"]
)
def test_the_json_schemas_number_text_is_the_text_the_parser_reads_as_a_number(text: str) -> None:
    assert (re.search(NUMBER_TEXT_PATTERN, text) is not None) == (number_or_value(text) != text)


def test_the_json_schema_states_the_numbers_rule_and_the_enumerations() -> None:
    model = ScenarioSchema.model_json_schema()["$defs"]["ModelSection"]
    layers = model["properties"]["num_layers"]
    kinds = {branch.get("type") for branch in layers["anyOf"]}
    assert kinds == {"integer", "string", "null"}
    assert "Transformer layers" in layers["description"]
    assert model["additionalProperties"] is False
    parallelism = ScenarioSchema.model_json_schema()["$defs"]["ParallelismSection"]
    assert parallelism["required"] == ["global_batch_size"]


def test_the_docs_field_tables_are_the_schemas() -> None:
    text = schema_module.DOC_PATH.read_text(encoding="utf-8")
    assert schema_module.render_doc(text) == text, (
        f"docs/scenario-format.md is stale: run `{schema_module.COMMAND}`"
    )


def test_a_stale_doc_is_reported_with_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "scenario-format.md"
    stale.write_text(
        f"# prose\n\n{schema_module.BEGIN}\n| old | table |\n{schema_module.END}\n\nmore prose\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(schema_module, "DOC_PATH", stale)
    assert schema_module.main(["--markdown", "--check"]) == 1
    assert schema_module.COMMAND in capsys.readouterr().err
    assert schema_module.main(["--markdown"]) == 0
    fresh = stale.read_text(encoding="utf-8")
    assert "| `num_layers` | integer |" in fresh
    assert fresh.startswith("# prose\n")
    assert fresh.endswith("\nmore prose\n")
    assert schema_module.main(["--markdown", "--check"]) == 0


def test_the_apis_scenario_document_is_the_schema_and_keeps_what_was_sent() -> None:
    spec = ScenarioDocument.model_json_schema()
    for section, model in SECTIONS.items():
        own = model.model_json_schema()
        assert spec["$defs"][model.__name__]["properties"] == own["properties"]
        assert {"$ref": f"#/$defs/{model.__name__}"} in spec["properties"][section]["anyOf"]
    bad = {"model": {"num_layers": "many", "tensor_paralel": 8}, "hardware": [1]}
    assert as_document(ScenarioDocument.model_validate(bad)) == bad


@pytest.mark.parametrize("value", ["abc", 1.5, True, [True, False], ["1"]])
def test_a_dense_model_refuses_a_moe_layer_pattern_of_the_wrong_type(value: object) -> None:
    doc = copy.deepcopy(BASE)
    doc["model"]["moe_layer_freq"] = value
    with pytest.raises(SpecError, match=r"model\.moe_layer_freq: must be an integer N"):
        parse_scenario(doc)
