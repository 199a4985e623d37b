"""``RunKey`` (the calibration's key, a frozen dataclass) and ``RunKeyJson`` (its JSON form, the
base of the calibration file's key rows) declare the same fields: same names, order and types,
and a key reads back from its JSON."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import get_type_hints

from planner.calibration.observed_runs import RunKey, RunKeyJson


def test_the_json_form_declares_the_key_fields() -> None:
    key_types = get_type_hints(RunKey)
    assert [(f.name, key_types[f.name]) for f in fields(RunKey)] == list(
        get_type_hints(RunKeyJson).items()
    )
    assert RunKeyJson.__required_keys__ == frozenset(f.name for f in fields(RunKey))


def test_a_key_reads_back_from_its_json() -> None:
    key = RunKey(
        cluster="c", gpu="h100-sxm", architecture="hopper", recipe="bf16", framework="megatron",
        family="dense",
    )  # fmt: skip
    doc = json.loads(json.dumps(key.to_json()))
    assert list(doc) == [f.name for f in fields(RunKey)]
    assert RunKey(**doc) == key
