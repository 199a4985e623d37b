"""The field tables of ``docs/scenario-format.md``, generated from the scenario format's schema
(``planner.scenario.schema``): one table per section, every field with its type, meaning, unit
and default.

    python -m planner.scenario.schema_doc --markdown          # rewrite the doc's field tables
    python -m planner.scenario.schema_doc --markdown --check  # exit 1 when the doc is stale
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from planner.scenario.schema import NUMBER_TEXT_PATTERN, SECTIONS

__all__ = ["BEGIN", "COMMAND", "DOC_PATH", "END", "main", "markdown_tables", "render_doc"]

DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "scenario-format.md"
"""The public contract whose field tables come from the schema's models."""
BEGIN = "<!-- BEGIN field tables: python -m planner.scenario.schema_doc --markdown -->"
END = "<!-- END field tables -->"
COMMAND = "python -m planner.scenario.schema_doc --markdown"


def _object(value: object) -> Mapping[str, object]:
    """A JSON-schema node (an object; pydantic writes every node as one)."""
    if not isinstance(value, Mapping):
        raise ValueError(f"a JSON-schema node must be an object, got {value!r}")
    return value


def _nodes(value: object) -> list[Mapping[str, object]]:
    """A JSON-schema list of nodes (``anyOf``)."""
    if not isinstance(value, list):
        raise ValueError(f"a JSON-schema node list must be a list, got {value!r}")
    return [_object(v) for v in value]


def _type_text(prop: Mapping[str, object], defs: Mapping[str, object]) -> str:
    """A JSON-schema property as the doc's type column (numeric text is the format's rule for
    every number, stated once in the doc's prose, so it is not repeated per field)."""
    if "$ref" in prop:
        return _type_text(_object(defs[str(prop["$ref"]).rsplit("/", 1)[-1]]), defs)
    if "anyOf" in prop:
        parts = [
            p
            for p in _nodes(prop["anyOf"])
            if p.get("type") != "null" and p.get("pattern") != NUMBER_TEXT_PATTERN
        ]
        texts = list(dict.fromkeys(_type_text(p, defs) for p in parts))
        lists = [t for t in texts if f"list of ({t})" in texts]
        return " or ".join(
            f"{t} (or a list of them)" if t in lists else t
            for t in texts
            if not any(t == f"list of ({one})" for one in lists)
        )
    enum = prop.get("enum")
    if isinstance(enum, list):
        return "one of " + ", ".join(f"`{v}`" for v in enum)
    kind = prop.get("type")
    if kind == "array":
        return f"list of ({_type_text(_object(prop['items']), defs)})"
    return {"integer": "integer", "number": "number", "boolean": "true/false"}.get(
        str(kind), "text"
    )


def markdown_tables() -> str:
    """The field tables of ``docs/scenario-format.md``: one per section, every field with its
    type, meaning, unit and default, from the models' JSON schema."""
    lines: list[str] = []
    for key, model in SECTIONS.items():
        schema = model.model_json_schema()
        defs = _object(schema.get("$defs", {}))
        doc = " ".join(str(model.__doc__).split()).replace("``", "`")
        lines += [f"### `{key}`", "", doc, ""]
        lines += ["| field | type | meaning |", "| --- | --- | --- |"]
        for name, prop in _object(schema["properties"]).items():
            node = _object(prop)
            meaning = str(node.get("description", "")).replace("|", "\\|")
            lines.append(f"| `{name}` | {_type_text(node, defs)} | {meaning} |")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def render_doc(text: str) -> str:
    """``text`` (the doc) with the tables between its ``BEGIN``/``END`` markers replaced."""
    pattern = re.compile(re.escape(BEGIN) + r"\n.*?" + re.escape(END), re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"{DOC_PATH.name} lacks the markers {BEGIN!r} ... {END!r}")
    return pattern.sub(lambda _: f"{BEGIN}\n\n{markdown_tables()}\n{END}", text, count=1)


def main(argv: list[str] | None = None) -> int:
    """``--markdown``: rewrite the doc's field tables; with ``--check``: exit 1 when they are
    stale, naming the command that updates them."""
    parser = argparse.ArgumentParser(prog="python -m planner.scenario.schema_doc")
    parser.add_argument("--markdown", action="store_true", help="the doc's field tables")
    parser.add_argument("--check", action="store_true", help="exit 1 when the doc is stale")
    args = parser.parse_args(argv)
    if not args.markdown:
        parser.error("say what to generate: --markdown")
    text = DOC_PATH.read_text(encoding="utf-8")
    try:
        fresh = render_doc(text)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if fresh != text:
            print(f"{DOC_PATH} is stale: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    if fresh != text:
        DOC_PATH.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
