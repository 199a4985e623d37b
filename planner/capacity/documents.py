"""Reading fleet, plan, what-if and snapshot documents with the line of every field.

The capacity inputs are documents (YAML or JSON: JSON is read by the same YAML 1.2-style loader)
whose errors must point at a line: ``fleet.yaml:12: pools[1].num_gpus: must be a positive
integer, got -8; give the GPUs of the pool``. ``load_document`` returns the data and a
``Located`` view that knows the line of every mapping key and sequence item. No file is opened
here: callers pass the text (the CLI reads the files).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import yaml

from planner.errors import SpecError

__all__ = [
    "DocumentError",
    "ErrorList",
    "Located",
    "MultiDocumentError",
    "check_keys",
    "load_document",
    "located",
]

T = TypeVar("T")
P = ParamSpec("P")


class DocumentError(SpecError):
    """A bad field in a capacity input document, with where it is.

    ``str(err)`` reads ``"<source>:<line>: <field>: <what is wrong and how to fix it>"``;
    ``source`` is the file name given to the reader, ``line`` is 1-based (0 when unknown) and
    ``field`` the dotted path of the field (``pools[1].num_gpus``).
    """

    def __init__(self, source: str, line: int, field: str, message: str) -> None:
        self.source = source
        self.line = line
        where = f"{source}:{line}" if line else source
        super().__init__(field, message)
        self.args = (f"{where}: {field}: {message}" if field else f"{where}: {message}",)

    def __str__(self) -> str:
        return str(self.args[0])

    @property
    def errors(self) -> tuple[DocumentError, ...]:
        """The single errors this one stands for (itself)."""
        return (self,)


class MultiDocumentError(DocumentError):
    """Every bad field of a document at once: ``str(err)`` is one ``DocumentError`` line per
    field, in document order; ``errors`` are those errors; ``field``, ``line`` and ``message``
    are the first one's."""

    def __init__(self, errors: Sequence[DocumentError]) -> None:
        singles = tuple(e for err in errors for e in err.errors)
        first = singles[0]
        super().__init__(first.source, first.line, first.field, first.message)
        self._errors = singles
        self.args = ("\n".join(str(e) for e in singles),)

    @property
    def errors(self) -> tuple[DocumentError, ...]:
        """The single errors, in document order."""
        return self._errors


class ErrorList:
    """Collects the located errors of a document so that all of them are reported together:
    ``take(fn, default)`` runs one field's reader and keeps its error (returning ``default``);
    ``check()`` raises them (one ``DocumentError``, or ``MultiDocumentError`` for several)."""

    def __init__(self) -> None:
        self.found: list[DocumentError] = []

    def take(self, read: Callable[[], T], default: T) -> T:
        """``read()``, or ``default`` after keeping the ``DocumentError`` it raised."""
        try:
            return read()
        except DocumentError as exc:
            self.found.extend(exc.errors)
            return default

    def call(self, default: T, read: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``read(*args, **kwargs)``, or ``default`` after keeping its ``DocumentError``."""
        try:
            return read(*args, **kwargs)
        except DocumentError as exc:
            self.found.extend(exc.errors)
            return default

    def items(self, node: Located | None) -> list[Located]:
        """The items of the list ``node`` (none when absent, or after keeping the error when
        it is no list)."""
        if node is None:
            return []
        return self.call([], lambda: list(node.items()))

    def check(self) -> None:
        """Raise the errors kept so far, sorted by document and line (nothing when none)."""
        if not self.found:
            return
        unique = list({str(e): e for e in self.found}.values())
        # a misspelled key (``num_gpu``: did you mean 'num_gpus'?) also leaves the key it meant
        # missing; the one error says both, so the "is required" of that key is dropped
        meant = {
            _sibling(e.field, match[1])
            for e in unique
            if (match := re.search(r"unknown field; did you mean '([^']+)'", e.message))
        }
        unique = [e for e in unique if not (e.field in meant and "is required" in e.message)]
        unique.sort(key=lambda e: (e.source, e.line))
        raise unique[0] if len(unique) == 1 else MultiDocumentError(unique)


if TYPE_CHECKING:  # checked as PyYAML's safe loader, which libyaml's mirrors
    _Base = yaml.SafeLoader
else:
    _Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built


class _Loader(_Base):
    """Safe loader: ``1.5e13`` is a float (YAML 1.2 / JSON), duplicate keys are errors."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


@dataclass(frozen=True, slots=True)
class Located:
    """A value of a document with its dotted path and line, for located errors.

    ``value`` is the plain Python value (dict, list, str, number, date, ...); ``children`` maps
    a mapping key or a sequence index to the child's ``Located``.
    """

    source: str
    path: str
    line: int
    value: Any
    children: Mapping[str | int, Located] = field(default_factory=dict)

    def error(self, message: str, key: str | int | None = None) -> DocumentError:
        """A ``DocumentError`` at this value (or at its child ``key``, when present)."""
        target = self.children.get(key) if key is not None else None
        if target is not None:
            return DocumentError(self.source, target.line, target.path, message)
        path = self.path if key is None else self.child_path(key)
        return DocumentError(self.source, self.line, path, message)

    def child_path(self, key: str | int) -> str:
        """Dotted path of child ``key`` (``a.b`` for keys, ``a[3]`` for indices)."""
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str) -> Located | None:
        """The child at ``key`` of a mapping, None when absent or null."""
        child = self.children.get(key)
        return None if child is None or child.value is None else child

    def mapping(self) -> Located:
        """Self, after checking it is a mapping."""
        if not isinstance(self.value, Mapping):
            raise self.error(f"must be a mapping of fields, got {_kind(self.value)}")
        return self

    def items(self) -> Iterator[Located]:
        """The children of a sequence, in order (raises unless this is a list)."""
        if not isinstance(self.value, list):
            raise self.error(f"must be a list, got {_kind(self.value)}")
        for index in range(len(self.value)):
            yield self.children[index]


def _sibling(path: str, key: str) -> str:
    """The dotted path of ``key`` beside the field at ``path`` (``a[0].b``, ``c`` -> ``a[0].c``)."""
    head, dot, _ = path.rpartition(".")
    return f"{head}{dot}{key}"


def _kind(value: object) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{value!r} ({type(value).__name__})"


def check_keys(node: Located, allowed: Sequence[str]) -> None:
    """Raise a located error for every key of ``node`` not in ``allowed`` (each with a
    did-you-mean hint; several as ``MultiDocumentError``)."""
    errors = ErrorList()
    for key in node.mapping().value:
        if not isinstance(key, str) or key not in allowed:
            close = difflib.get_close_matches(str(key), list(allowed), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(allowed)}"
            errors.found.append(node.error(f"unknown field; {hint}", str(key)))
    errors.check()


def _build(node: yaml.Node, loader: _Loader, source: str, path: str) -> Located:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)
        children: dict[str | int, Located] = {}
        value: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            name = str(key)
            child_path = f"{path}.{name}" if path else name
            if key in value:
                raise DocumentError(
                    source, key_node.start_mark.line + 1, child_path, "duplicate key; keep one"
                )
            child = _build(value_node, loader, source, child_path)
            children[name] = Located(
                source, child_path, key_node.start_mark.line + 1, child.value, child.children
            )
            value[key] = child.value
        return Located(source, path, line, value, children)
    if isinstance(node, yaml.SequenceNode):
        items = [_build(item, loader, source, f"{path}[{i}]") for i, item in enumerate(node.value)]
        return Located(source, path, line, [i.value for i in items], dict(enumerate(items)))
    return Located(source, path, line, loader.construct_object(node, deep=True))


def load_document(text: str, source: str) -> Located:
    """Parse one YAML or JSON document into a ``Located`` tree (root path ``""``).

    Raises ``DocumentError`` with the line and column for a syntax error, a duplicate key, or
    an empty document.
    """
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise DocumentError(
                source, 1, "", "the document is empty; see docs/capacity-formats.md"
            )
        return _build(node, loader, source, "")
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 0
        problem = getattr(exc, "problem", None) or str(exc)
        raise DocumentError(
            source, line, "", f"not valid YAML/JSON ({problem}); fix the syntax"
        ) from None
    finally:
        loader.dispose()


def located(value: Any, source: str, path: str = "") -> Located:
    """A ``Located`` tree over a value already parsed (a JSON request body): the same
    checks and errors as a file, without lines (``"<source>: <field>: <what is wrong>"``).
    Mapping keys become text, as a JSON object's are."""
    if isinstance(value, Mapping):
        children: dict[str | int, Located] = {}
        for key, item in value.items():
            name = str(key)
            children[name] = located(item, source, f"{path}.{name}" if path else name)
        return Located(source, path, 0, {str(k): c.value for k, c in children.items()}, children)
    if isinstance(value, list | tuple):
        items = [located(item, source, f"{path}[{i}]") for i, item in enumerate(value)]
        return Located(source, path, 0, [i.value for i in items], dict(enumerate(items)))
    return Located(source, path, 0, value)
