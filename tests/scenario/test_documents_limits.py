"""Bounded document loading: alias bombs, deep nesting, huge numbers and huge
texts are refused fast with a ``SpecError`` naming the source and the limit, never expanded,
never a ``RecursionError``/``ValueError``/``TypeError`` traceback."""

from __future__ import annotations

import json
import time
from typing import Literal

import pytest

from planner.errors import SpecError
from planner.scenario import read_documents
from planner.scenario.numbers import integer_or_value, number_or_value
from tests.scenario.conftest import BASE

# The limits of planner.scenario.loading and planner.scenario.numbers (written out, so that
# each probe also runs, and fails, against code without them).
MAX_DEPTH = 64
MAX_YAML_CHARS = 4 * 2**20
MAX_INTEGER = 2**53


def alias_bomb(
    levels: int = 9, width: int = 9, inside: str = "hardware.num_gpus", before: str = ""
) -> str:
    """A "billion laughs" YAML: ``width ** levels`` values once expanded, all inside one field
    (so that an error message printing the field's value would expand it); ``before`` is a
    line of the same section that comes first (e.g. ``gpu: h100-sxm``)."""
    section, field = inside.split(".")
    lines = [f"{section}:", *([f"  {before}"] if before else []), f"  {field}:"]
    lines.append("    - &l0 [" + ", ".join(["8"] * width) + "]")
    for level in range(1, levels):
        items = ", ".join([f"*l{level - 1}"] * width)
        lines.append(f"    - &l{level} [{items}]")
    return "\n".join(lines) + "\n"


def refused_fast(text: str, fmt: Literal["yaml", "json", "jsonl"], match: str) -> SpecError:
    start = time.process_time()  # CPU time: the work, not the machine's load
    with pytest.raises(SpecError, match=match) as info:
        read_documents(text, fmt, "doc")
    assert time.process_time() - start < 1.0
    assert info.value.field == "doc"
    return info.value


def test_an_alias_bomb_is_refused_before_it_is_expanded() -> None:
    error = refused_fast(alias_bomb(), "yaml", "expand to more than 1,000,000 values")
    assert "alias bomb" in error.message
    assert "line" in error.message


def test_a_few_aliases_and_merge_keys_still_work() -> None:
    docs = read_documents(
        "base: &b {gpu: h100-sxm, num_gpus: 8}\nhardware:\n  <<: *b\nother: *b\n", "yaml", "doc"
    )
    hardware = {"gpu": "h100-sxm", "num_gpus": 8}
    assert docs == [{"base": hardware, "hardware": hardware, "other": hardware}]
    assert len(read_documents(alias_bomb(levels=4, width=9), "yaml", "doc")) == 1  # 6,561 values


def test_a_self_referencing_alias_is_refused() -> None:
    refused_fast("a: &a [1, *a]\n", "yaml", "refers to its own anchor")


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 500 + "]" * 500,
        "a:" + "".join("\n" + "  " * i + "b:" for i in range(1, 200)) + " 1\n",
        "- " * 300 + "1\n",
    ],
    ids=["flow", "block-mapping", "block-sequence"],
)
def test_deep_yaml_is_refused(text: str) -> None:
    refused_fast(text, "yaml", f"nested deeper than {MAX_DEPTH} levels")


def test_yaml_nesting_up_to_the_limit_is_read() -> None:
    from planner.scenario.loading import load_yaml

    depth = MAX_DEPTH - 1
    (doc,) = load_yaml("a: " + "[" * depth + "]" * depth, "doc")
    assert isinstance(doc, dict)


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 900, 100_000])
def test_deep_json_is_refused(depth: int) -> None:
    refused_fast("[" * depth + "]" * depth, "json", "nested deeper than 64 levels")


def test_a_deep_jsonl_line_is_that_lines_error() -> None:
    lines = [json.dumps(BASE), "[" * 5000 + "]" * 5000, json.dumps(BASE)]
    docs = read_documents("\n".join(lines), "jsonl", "sweep.jsonl")
    assert docs[0] == BASE
    assert docs[2] == BASE
    assert isinstance(docs[1], SpecError)
    assert docs[1].field == "sweep.jsonl:2"
    assert "nested deeper" in docs[1].message


@pytest.mark.parametrize(
    ("text", "fmt", "match"),
    [
        ('{"hardware": {"num_gpus": ' + "9" * 5000 + "}}", "json", "4300 digits"),
        ("hardware: {num_gpus: " + "9" * 5000 + "}\n", "yaml", "4300 digits"),
        ("training: {start: 2024-13-45}\n", "yaml", "invalid YAML"),
        ("? [1, 2]\n: x\n", "yaml", "mapping key must be a plain value"),
        ("a: !!int nope\n", "yaml", "invalid YAML"),
        ("a: !!python/object:os.system x\n", "yaml", "invalid YAML"),
        ("a: !!timestamp 2024-02-30\n", "yaml", "invalid YAML"),  # found by tests/fuzz
    ],
    ids=[
        "json-digits",
        "yaml-digits",
        "yaml-date",
        "yaml-list-key",
        "yaml-bad-int",
        "yaml-tag",
        "yaml-timestamp-tag",
    ],
)
def test_malformed_values_are_spec_errors(
    text: str, fmt: Literal["yaml", "json", "jsonl"], match: str
) -> None:
    refused_fast(text, fmt, match)


def test_too_long_yaml_is_refused_unread() -> None:
    text = "#" * (MAX_YAML_CHARS + 1)
    refused_fast(text, "yaml", "more than the 4,194,304-character limit")


@pytest.mark.parametrize(
    "value",
    [10**23, -(10**23), 10**400, "1" * 40, 1e300, "1e300"],
    ids=["1e23", "-1e23", "1e400", "40-digit-text", "1e300", "1e300-text"],
)
def test_integers_beyond_two_to_the_53_are_not_integers(value: object) -> None:
    """They reach the field checks as floats ("must be an integer") instead of overflowing the
    search's int64 arrays; numbers within the bound keep their exact type and value."""
    got = integer_or_value(value)
    assert isinstance(got, float)
    assert isinstance(number_or_value(value), float | int)
    assert integer_or_value(MAX_INTEGER) == MAX_INTEGER
    assert integer_or_value(float(2**52)) == 2**52


def test_a_very_long_literal_is_left_for_the_fields_check() -> None:
    text = "9" * 5000
    assert number_or_value(text) is text
    assert integer_or_value(text) is text


def test_the_written_out_limits_are_the_modules() -> None:
    from planner.scenario import loading, numbers

    assert (loading.MAX_DEPTH, loading.MAX_YAML_CHARS) == (MAX_DEPTH, MAX_YAML_CHARS)
    assert numbers.MAX_INTEGER == MAX_INTEGER
