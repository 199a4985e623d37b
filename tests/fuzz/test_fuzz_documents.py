"""Scenario documents: any text through ``read_documents`` (YAML, JSON, JSONL), any document
through ``parse_scenario`` and ``predict_documents``: a value or a ``PlannerError``, never a
traceback."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from planner.scenario import parse_scenario, predict_documents, read_documents
from planner.scenario.parse import SECTION_KEYS
from tests.fuzz.strategies import (
    FEW,
    FUZZ,
    NASTY_NUMBERS,
    NASTY_TEXT,
    edited_text,
    json_values,
    outcome,
    plain_json,
)
from tests.scenario.conftest import BASE

YAML_PIECES = st.sampled_from(
    ["a: 1\n", "- x\n", "&a [1]\n", "*a\n", "? [1]\n: 2\n", "!!binary x\n", "!!set {a}\n",
     "<<: *a\n", "---\n", "...\n", "%YAML 1.1\n", "{", "}", "[", "]", "'", '"', "|\n  x\n",
     "2024-13-45\n", "1e999\n", "!!int x\n", "!!float y\n", "!!timestamp 2024-02-30\n",
     "model: {preset: llama3-8b}\n", "  ", "\t", "#", ":", ",", "\x85", "\ufeff"]
)  # fmt: skip


def _documents_or_error(text: str, fmt: str) -> Any:
    docs = outcome(read_documents, text, fmt, "fuzz")
    if isinstance(docs, list):
        results = predict_documents(docs)  # never raises
        assert len(results) == len(docs)
        assert all("error" in r or "iteration_time_s" in r for r in results)
        json.dumps(results)
    return docs


@FUZZ
@given(st.lists(YAML_PIECES | st.text(max_size=10), max_size=12).map("".join))
def test_yaml_text(text: str) -> None:
    _documents_or_error(text, "yaml")


@FUZZ
@given(st.sampled_from(["json", "jsonl"]), st.text(max_size=200))
def test_json_text(fmt: str, text: str) -> None:
    _documents_or_error(text, fmt)


@FEW
@given(st.sampled_from(["yaml", "json", "jsonl"]), st.data())
def test_edited_scenarios(fmt: str, data: st.DataObject) -> None:
    text = (
        json.dumps(BASE)
        if fmt != "yaml"
        else "\n".join(f"{k}: {json.dumps(v)}" for k, v in BASE.items())
    )
    _documents_or_error(data.draw(edited_text(text)), fmt)


@st.composite
def scenario_documents(draw: st.DrawFn) -> Any:
    """The valid base scenario with some fields (of the real sections) set to any value."""
    doc: dict[str, Any] = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 4))):
        section = draw(st.sampled_from(sorted(SECTION_KEYS)))
        key = draw(st.sampled_from(SECTION_KEYS[section]))
        value = draw(json_values | NASTY_NUMBERS | NASTY_TEXT | st.lists(NASTY_NUMBERS, max_size=3))
        if not isinstance(doc.get(section), dict):
            doc[section] = {}
        doc[section][key] = value
    if draw(st.booleans()):
        doc[draw(st.sampled_from(["name", "model", "hardware", "extra"]))] = draw(json_values)
    return doc


@FEW
@given(scenario_documents())
def test_scenario_documents(doc: Any) -> None:
    outcome(parse_scenario, doc)
    (result,) = predict_documents([doc])
    json.dumps(plain_json(result))
