"""The capacity review's JSON is declared once, by the core's TypedDicts
(``planner.capacity``: ``ReviewJson`` and the shapes it holds, what ``Review.to_dict`` returns),
and the API's review models (``planner.service.api.review_models``, which document it in
``/openapi.json`` with descriptions and the defaults that let an older stored review be read)
name the same fields at every depth: a field the review gains, loses or renames fails here
until the API's model says so too."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from planner.capacity.review import ReviewJson
from planner.service.api.review_models import ReviewResult

#: Fields the API's models keep as plain JSON objects (their fields are not named there).
KEPT_AS_OBJECTS = {
    "scenarios[].excluded[]",
    "scenarios[].queues[]",
    "scenarios[].jobs[].wait_s",
    "not_capacity[]",
}


def _field_names(schema: dict[str, Any], defs: dict[str, Any], path: str = "") -> set[str]:
    """Every field path a JSON schema names (``a.b``, ``a[].b`` for the items of a list), down
    to the values it leaves untyped or kept as objects."""
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    if path.lstrip(".") in KEPT_AS_OBJECTS:
        return set()
    branches = [b for b in schema.get("anyOf", [schema]) if b.get("type") != "null"]
    names: set[str] = set()
    for branch in branches:
        if "$ref" in branch:
            names |= _field_names(branch, defs, path)
        elif "items" in branch:
            names |= _field_names(branch["items"], defs, path + "[]")
        for name, field in branch.get("properties", {}).items():
            names |= {f"{path}.{name}".lstrip(".")} | _field_names(field, defs, f"{path}.{name}")
    return names


def _names_of(declared: Any) -> set[str]:
    schema = TypeAdapter(declared).json_schema(mode="serialization")
    return _field_names(schema, schema.get("$defs", {}))


def test_the_review_models_name_the_fields_of_the_review_json() -> None:
    core = _names_of(ReviewJson)
    assert _names_of(ReviewResult) == core
    assert {"scenarios[].jobs[].start_s.p50", "sizing[].answer", "model_note"} <= core


def test_the_fields_kept_as_objects_are_objects_of_the_review_json() -> None:
    core = _names_of(ReviewJson)
    for path in KEPT_AS_OBJECTS:
        parent, _, last = path.rstrip("[]").rpartition(".")
        assert (f"{parent}.{last}" if parent else last) in core, path
