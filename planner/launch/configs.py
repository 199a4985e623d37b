"""Config files named by launches (YAML, TOML, JSON), read as data with the line of each value,
and the override syntaxes frameworks put on their command lines.

A :class:`ConfigTree` is the parsed file plus ``dotted key -> line`` so each value found there
can be cited as ``file:line``. YAML goes through the scenario loader's safe loader (no tags that
build objects, alias bombs refused before they expand, depth and size limits); TOML through
``tomllib``; JSON through ``json`` with the same depth limit. Nothing is ever executed.
"""

from __future__ import annotations

import json
import posixpath
import re
import tomllib
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import yaml

from planner.errors import SpecError
from planner.launch.types import LaunchFiles
from planner.launch.values import parse_scalar
from planner.scenario.loading import load_yaml

__all__ = [
    "ConfigTree",
    "dotted_overrides",
    "load_config",
    "parse_scalar",
    "read_config",
    "split_options",
]

_MAX_DEPTH = 64


@dataclass(frozen=True, slots=True)
class ConfigTree:
    """A parsed config file: ``data`` (the top-level mapping), ``path`` (as cited) and
    ``lines`` (dotted key -> 1-based line of its value; list items as ``key.0``)."""

    data: Mapping[str, object]
    path: str
    lines: Mapping[str, int] = field(default_factory=dict)

    def get(self, dotted: str, fallback: object = None) -> object:
        """The value at ``dotted`` (``a.b.c``; list items by index), or ``fallback``."""
        node: object = self.data
        for part in dotted.split("."):
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return fallback
        return node

    def has(self, dotted: str) -> bool:
        """True when ``dotted`` is present (even with a null value)."""
        sentinel = object()
        return self.get(dotted, sentinel) is not sentinel

    def where(self, dotted: str) -> str:
        """``path:line`` of ``dotted`` (``path`` alone when the line is not known)."""
        line = self.lines.get(dotted)
        name = posixpath.basename(self.path) if posixpath.isabs(self.path) else self.path
        return f"{name}:{line}" if line else name

    def items(self, prefix: str = "") -> Iterator[tuple[str, object]]:
        """Every leaf as ``(dotted key, value)``, depth first."""
        yield from _leaves(self.get(prefix) if prefix else self.data, prefix)


def _leaves(node: object, prefix: str) -> Iterator[tuple[str, object]]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from _leaves(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, node


def _yaml_lines(text: str, source: str) -> dict[str, int]:
    """Dotted key -> line of each value in the first YAML document (composed, not constructed:
    aliases are not expanded, so this costs the size of the text)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    lines: dict[str, int] = {}

    def walk(node: yaml.Node, prefix: str, depth: int) -> None:
        if depth > _MAX_DEPTH:
            return
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key = str(key_node.value)
                name = f"{prefix}.{key}" if prefix else key
                lines[name] = key_node.start_mark.line + 1
                walk(value_node, name, depth + 1)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                name = f"{prefix}.{index}" if prefix else str(index)
                lines[name] = item.start_mark.line + 1
                walk(item, name, depth + 1)

    if root is not None:
        walk(root, "", 0)
    del source
    return lines


_TOML_TABLE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY = re.compile(r"^\s*([A-Za-z0-9_\-\.\"']+)\s*=")


def _toml_lines(text: str) -> dict[str, int]:
    """Dotted key -> line for ``key = value`` lines under ``[table]`` headers (the forms config
    files use; inline tables keep their table's line)."""
    lines: dict[str, int] = {}
    table = ""
    for number, line in enumerate(text.splitlines(), start=1):
        header = _TOML_TABLE.match(line)
        if header:
            table = header.group(1).replace('"', "").replace("'", "").replace(" ", "")
            lines.setdefault(table, number)
            continue
        key = _TOML_KEY.match(line)
        if key:
            name = key.group(1).replace('"', "").replace("'", "")
            lines[f"{table}.{name}" if table else name] = number
    return lines


_JSON_KEY = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:')


def _json_lines(text: str, data: object) -> dict[str, int]:
    """Dotted key -> line for JSON objects, found by scanning keys in document order."""
    lines: dict[str, int] = {}
    stack: list[str] = []
    depth_keys: list[str | None] = []
    line = 1
    index = 0
    in_string = False
    while index < len(text):
        char = text[index]
        if char == "\n":
            line += 1
        elif char == '"' and not in_string:
            match = _JSON_KEY.match(text, index)
            if match:
                key = match.group(1)
                if depth_keys:
                    depth_keys[-1] = key
                name = ".".join([*stack, key])
                lines[name] = line
                index = match.end()
                continue
            in_string = True
        elif char == '"' and in_string and text[index - 1] != "\\":
            in_string = False
        elif not in_string and char == "{":
            if depth_keys and depth_keys[-1] is not None:
                stack.append(str(depth_keys[-1]))
            elif depth_keys:
                stack.append("")
            depth_keys.append(None)
        elif not in_string and char == "}":
            if depth_keys:
                depth_keys.pop()
            if stack and len(stack) >= len(depth_keys):
                stack.pop()
        index += 1
    del data
    return {key.replace("..", "."): number for key, number in lines.items()}


def _depth(node: object, limit: int) -> bool:
    stack = [(node, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, Mapping):
            stack.extend((value, depth + 1) for value in item.values())
        elif isinstance(item, list):
            stack.extend((value, depth + 1) for value in item)
    return False


def load_config(text: str, path: str, fmt: str | None = None) -> ConfigTree:
    """Parse ``text`` (the file at ``path``) as YAML, TOML or JSON (``fmt``, else by the
    extension: ``.toml``, ``.json``, anything else YAML). The top level must be a mapping (an
    empty file is an empty mapping).

    Raises ``SpecError(path, ...)`` for a syntax error, a limit (alias bomb, depth) or a top
    level that is not a mapping.
    """
    kind = fmt or _format(path)
    data: object
    if kind == "toml":
        try:
            data = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError) as exc:
            raise SpecError(path, f"invalid TOML: {exc}") from None
        lines = _toml_lines(text)
    elif kind == "json":
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise SpecError(path, f"invalid JSON: {exc}") from None
        lines = _json_lines(text, data) if isinstance(data, Mapping) else {}
    else:
        documents = load_yaml(text, path)
        data = documents[0] if documents else {}
        lines = _yaml_lines(text, path) if isinstance(data, Mapping) else {}
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise SpecError(path, "the config file must hold a mapping of keys to values")
    if _depth(data, _MAX_DEPTH):
        raise SpecError(path, f"nested deeper than {_MAX_DEPTH} levels")
    return ConfigTree(data=data, path=path, lines=lines)


def _format(path: str) -> str:
    ext = posixpath.splitext(path)[1].lower()
    return {".toml": "toml", ".json": "json"}.get(ext, "yaml")


def read_config(files: LaunchFiles, path: str, fmt: str | None = None) -> ConfigTree:
    """Read and parse the config at absolute ``path`` through ``files``; ``SourceError`` or
    ``SpecError`` (both ``PlannerError``) when it cannot be read or parsed."""
    return load_config(files.read_text(path), path, fmt)


def dotted_overrides(args: Sequence[str]) -> list[tuple[str, object, str]]:
    """``key=value`` and ``a.b.c=value`` arguments (Hydra / NeMo / torchtune / LLaMA-Factory
    style; Hydra's ``+`` and ``++`` prefixes dropped) as ``(dotted key, value, the argument)``,
    in order. Arguments without ``=`` or starting with ``-`` are skipped."""
    found: list[tuple[str, object, str]] = []
    for arg in args:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, _, raw = arg.partition("=")
        key = key.lstrip("+~")
        if not key or not re.match(r"^[A-Za-z_][\w\-]*(\.[\w\-]+)*$", key):
            continue
        found.append((key, parse_scalar(raw), arg))
    return found


def split_options(
    args: Sequence[str], valued: Collection[str]
) -> tuple[list[tuple[str, str]], list[str]]:
    """``args`` as argparse reads the options in ``valued`` (each takes one value:
    ``--name value`` or ``--name=value``; a last ``--name`` without one gets ``""``):
    ``(name, value)`` of each, and the arguments that do not start with ``-`` (overrides,
    positionals), both in order. Other options (switches) are skipped."""
    options: list[tuple[str, str]] = []
    rest: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        name, eq, value = arg.partition("=")
        if name in valued:
            if not eq and index < len(args):
                value = args[index]
                index += 1
            options.append((name, value))
        elif not arg.startswith("-"):
            rest.append(arg)
    return options, rest
