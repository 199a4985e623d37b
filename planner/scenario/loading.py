"""Bounded loading of YAML and JSON text that anyone may send: documents, requests, meta files.

A document is data from a user, so loading it must cost time and memory in proportion to its
text. ``load_yaml`` and ``load_json`` refuse, with a ``SpecError`` naming the source and the
limit, text longer than :data:`MAX_YAML_CHARS` / :data:`MAX_JSON_CHARS`, nesting deeper than
:data:`MAX_DEPTH` levels, and (YAML) documents whose aliases would expand to more than
:data:`MAX_NODES` nodes (an alias bomb, "billion laughs": nine anchors of nine aliases each
expand to 387 million nodes) or refer to themselves. They never raise anything else for
malformed text (PyYAML's and ``json``'s own exceptions, integers of more than 4,300 digits,
impossible dates, unhashable keys all become ``SpecError``).

YAML is read with the safe constructor (plain data only), reading ``1.5e13`` as a float like
YAML 1.2 and JSON do (PyYAML's YAML 1.1 resolver would return a string), and rejecting
duplicate keys instead of silently keeping the last one. libyaml's parser produces the events
when it is installed (five times faster; it caps flow nesting at 1,000 itself), PyYAML's own
otherwise; the limits are checked while composing either way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.error import Mark
from yaml.events import Event
from yaml.nodes import MappingNode, Node, SequenceNode
from yaml.resolver import Resolver

from planner.errors import SpecError

__all__ = [
    "MAX_DEPTH",
    "MAX_JSON_CHARS",
    "MAX_NODES",
    "MAX_YAML_CHARS",
    "load_json",
    "load_json_lines",
    "load_yaml",
]

MAX_YAML_CHARS = 4 * 2**20
"""Longest YAML text read, characters (4 MiB: a few seconds of parsing)."""
MAX_JSON_CHARS = 64 * 2**20
"""Longest JSON or JSON Lines text read, characters (64 MiB: about half a second of parsing)."""
MAX_DEPTH = 64
"""Deepest nesting of lists and mappings (a scenario nests four levels)."""
MAX_NODES = 1_000_000
"""Most values one YAML document may hold once its aliases are expanded."""

if TYPE_CHECKING:  # checked against libyaml's parser; PyYAML's own has the same interface
    from yaml._yaml import CParser as _Events
    from yaml._yaml import Mark as CMark
else:
    try:  # libyaml's parser, when PyYAML was built with it
        from yaml._yaml import CParser as _Events
    except ImportError:  # pragma: no cover - PyYAML without libyaml
        from yaml.parser import Parser
        from yaml.reader import Reader
        from yaml.scanner import Scanner

        class _Events(Reader, Scanner, Parser):
            def __init__(self, stream: str) -> None:
                Reader.__init__(self, stream)
                Scanner.__init__(self)
                Parser.__init__(self)


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(root: Node) -> None:
    """Raise ``ComposerError`` when ``root`` expanded (each alias replaced by its anchor's
    value) holds more than ``MAX_NODES`` values, nests deeper than ``MAX_DEPTH`` or contains
    itself. Iterative, each distinct node visited once."""
    done: dict[int, tuple[int, int]] = {}  # id -> (expanded values, expanded depth)
    active: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, finish = stack.pop()
        key = id(node)
        if finish:
            kids = [done[id(kid)] for kid in _children(node)]
            size = 1 + sum(s for s, _ in kids)
            depth = 1 + max((d for _, d in kids), default=0)
            active.discard(key)
            done[key] = (size, depth)
            if size > MAX_NODES:
                raise ComposerError(
                    None,
                    None,
                    f"its aliases expand to more than {MAX_NODES:,} values (an alias bomb?)",
                    node.start_mark,
                )
            if depth > MAX_DEPTH:
                raise ComposerError(
                    None, None, f"aliases nest it deeper than {MAX_DEPTH} levels", node.start_mark
                )
            continue
        if key in done:
            continue
        if key in active:
            raise ComposerError(None, None, "an alias refers to its own anchor", node.start_mark)
        active.add(key)
        stack.append((node, True))
        stack.extend((kid, False) for kid in _children(node) if id(kid) not in done)


def _plain_mark(mark: Mark | CMark | None) -> Mark | None:
    """A position in the text as PyYAML's errors take it (libyaml's events carry their own
    ``Mark`` type; only the line and column are read)."""
    if mark is None:
        return None
    return Mark(mark.name, mark.index, mark.line, mark.column, None, 0)


class _BoundedComposer(Composer):
    """PyYAML's composer with a depth limit and a check of each document's expanded size."""

    _depth = 0

    if TYPE_CHECKING:  # from the parser it is mixed with (``_Loader``); not in Composer's stubs

        def peek_event(self) -> Event | None: ...

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self._depth >= MAX_DEPTH:
            event = self.peek_event()
            mark = None if event is None else _plain_mark(event.start_mark)
            raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Node | None:
        node = super().compose_document()
        if node is not None:
            _check_expansion(node)
        return node


class _Loader(_Events, _BoundedComposer, SafeConstructor, Resolver):
    """Events from libyaml (or PyYAML), composed with limits, constructed safely."""

    def __init__(self, stream: str) -> None:
        _Events.__init__(self, stream)
        _BoundedComposer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)

    # libyaml's CParser composes in C; compose with the bounded Python composer instead.
    check_node = Composer.check_node
    get_node = Composer.get_node
    get_single_node = Composer.get_single_node

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        """A mapping whose keys are plain values, each once (PyYAML would keep the last of
        duplicate keys). Keys and values are built at once (``deep``): the limits above bound
        their depth."""
        self.flatten_mapping(node)
        seen: dict[Hashable, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                raise ConstructorError(
                    None,
                    None,
                    "a mapping key must be a plain value, not a list or mapping",
                    key_node.start_mark,
                ) from None
            if key in seen:
                raise ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen[key] = self.construct_object(value_node, deep=True)
        return seen


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _too_long(source: str, text: str, limit: int, what: str) -> None:
    if len(text) > limit:
        raise SpecError(
            source,
            f"{len(text):,} characters of {what}, more than the {limit:,}-character limit; "
            "split it into smaller files",
        )


def load_yaml(text: str, source: str) -> list[object]:
    """The documents of a YAML text (``---`` separated), in order; empty documents are None.

    Raises ``SpecError(source, ...)`` naming the line and column of a syntax error, a
    duplicate key or a limit (module docstring), and for text over ``MAX_YAML_CHARS``.
    """
    _too_long(source, text, MAX_YAML_CHARS, "YAML")
    try:
        loader = _Loader(text)
        try:
            docs: list[object] = []
            while loader.check_node():  # another document (``check_data``, typed)
                docs.append(loader.get_data())
            return docs
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise SpecError(source, f"invalid YAML at {where}{exc.problem or exc}") from None
    except (
        yaml.YAMLError,
        ValueError,
        TypeError,
        OverflowError,
        RecursionError,
        AttributeError,
        KeyError,
        IndexError,
    ) as exc:
        # PyYAML's constructors let int()/date() errors through: 5,000-digit integers,
        # 2024-13-45, an explicit !!timestamp tag on text that is no date (AttributeError).
        raise SpecError(source, f"invalid YAML: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    text = str(exc).split("\n", 1)[0]
    return text[:200] if text else type(exc).__name__


def _depth_exceeds(doc: object, limit: int) -> bool:
    """True when ``doc`` nests lists/dicts deeper than ``limit`` (iterative)."""
    stack: list[tuple[object, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > limit:
                return True
            items = value.values() if isinstance(value, dict) else value
            stack.extend((item, depth + 1) for item in items)
    return False


def load_json(text: str, source: str, *, first_line: int = 1) -> object:
    """One JSON value. Raises ``SpecError(source, ...)`` naming the line and column of a syntax
    error (lines counted from ``first_line``: a JSON Lines reader passes the line's number),
    for nesting deeper than ``MAX_DEPTH``, an integer of more than 4,300 digits, and text over
    ``MAX_JSON_CHARS``."""
    _too_long(source, text, MAX_JSON_CHARS, "JSON")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        line = exc.lineno + first_line - 1
        raise SpecError(
            source, f"invalid JSON at line {line}, column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise SpecError(source, f"invalid JSON: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise SpecError(source, f"invalid JSON: {_reason(exc)}") from None
    if _depth_exceeds(doc, MAX_DEPTH):
        raise SpecError(source, f"invalid JSON: nested deeper than {MAX_DEPTH} levels")
    return doc


def load_json_lines(text: str, source: str) -> list[object]:
    """The values of a JSON Lines text, one per non-blank line, in order. A line that is not
    valid JSON (or breaks a limit) becomes a ``SpecError`` *instance* in the list, field
    ``"<source>:<line>"``, so that the other lines still count; text over ``MAX_JSON_CHARS``
    raises ``SpecError(source, ...)``."""
    _too_long(source, text, MAX_JSON_CHARS, "JSON Lines")
    values: list[object] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            values.append(load_json(line, f"{source}:{lineno}", first_line=lineno))
        except SpecError as exc:
            values.append(exc)
    return values
