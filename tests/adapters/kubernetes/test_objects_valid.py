"""The test objects have the real shapes: CRD schemas for custom objects, the official client's
models for built-in ones."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from adapters.kubernetes.admission import CheckDecision, CheckState, apply_body
from tests.adapters.kubernetes.conftest import find, load_cluster
from tests.adapters.kubernetes.crd_schema import is_custom, validate, validate_object

_BUILTIN = {"Node": client.V1Node, "Pod": client.V1Pod, "Job": client.V1Job}


@pytest.mark.parametrize(
    "obj",
    load_cluster(),
    ids=lambda o: f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}",
)
def test_every_fixture_object_matches_its_schema(obj: dict[str, Any]) -> None:
    if is_custom(obj):
        assert validate_object(obj) == []
    else:
        model = _BUILTIN[obj["kind"]]
        model.model_validate(obj)  # extra="forbid": unknown or misspelled fields fail


def test_validator_catches_wrong_shapes() -> None:
    workload = find(load_cluster(), "Workload", "pytorchjob-gpt-13b-8c1d2")
    workload["status"]["admissionChecks"] = [{"name": "x", "state": "Maybe"}]
    errors = validate_object(workload)
    assert any("missing required 'lastTransitionTime'" in e for e in errors)
    assert any("'Maybe' not in" in e for e in errors)
    assert validate("12", {"type": "integer"}) == ["<root>: expected integer"]


def test_apply_configuration_we_write_is_a_valid_workload_status() -> None:
    workload = find(load_cluster(), "Workload", "pytorchjob-gpt-13b-8c1d2")
    body = apply_body(
        workload,
        "llm-planner",
        CheckDecision(
            state=CheckState.RETRY, message="ETA misses the deadline", requeue_after_s=600
        ),
        now_s=1_763_000_000.0,
    )
    assert body is not None
    merged = {**workload, "status": {**workload["status"], **body["status"]}}
    assert validate_object(merged) == []
