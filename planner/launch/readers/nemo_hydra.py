"""A Hydra / OmegaConf config as NeMo 1.0 and Megatron-Bridge build it, read as data: layers
merged in order (recipe values, YAML files, command-line overrides), each leaf with its source,
and ``${...}`` interpolations resolved on lookup without running anything.

Override syntax (Hydra's, also Megatron-Bridge's ``parse_hydra_overrides``): ``a.b=v`` sets,
``+a.b=v`` adds, ``++a.b=v`` adds or sets, ``~a.b`` (or ``~a.b=v``) deletes. Values are read
as Hydra reads them: ``null``, ``true``/``false`` (any case), numbers, ``[a,b]`` lists, quoted
strings. Interpolations: ``${a.b}`` (absolute), ``${.x}`` / ``${..x}`` (relative to the node
holding the key), and text around them; a custom resolver (``${oc.env:HOME}``,
``${multiply:...}``) cannot be known from the files and leaves the value unresolved.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from planner.launch.configs import ConfigTree
from planner.launch.values import child_dict, parse_scalar

__all__ = ["HydraConfig", "Resolved", "split_override"]

_REFERENCE = re.compile(r"\$\{([^${}]*)\}")
_MAX_HOPS = 16
_KEY = re.compile(r"^[A-Za-z_][\w\-]*(\.[\w\-]+)*$")


@dataclass(frozen=True, slots=True)
class Resolved:
    """A looked-up value: ``value`` with interpolations resolved and ``source`` (where the key
    was set, and where an interpolation's target was set)."""

    value: object
    source: str


def split_override(arg: str) -> tuple[str, str, object] | None:
    """``(action, dotted key, value)`` of one Hydra override argument, action one of ``set``,
    ``add``, ``force`` and ``delete``; None when ``arg`` is not an override (an option, or no
    ``=`` and no ``~``)."""
    if arg.startswith("-"):
        return None
    if arg.startswith("~"):
        key = arg[1:].partition("=")[0]
        return ("delete", key, None) if _KEY.match(key) else None
    if "=" not in arg:
        return None
    key, _, raw = arg.partition("=")
    action = "set"
    if key.startswith("++"):
        action, key = "force", key[2:]
    elif key.startswith("+"):
        action, key = "add", key[1:]
    if not _KEY.match(key):
        return None
    return action, key, parse_scalar(raw) if raw else ""


@dataclass(slots=True)
class HydraConfig:
    """The merged config: ``data`` (nested mappings of plain values) and ``sources`` (dotted
    leaf -> where its value came from). ``unknown`` collects dotted keys whose value could not
    be resolved (custom resolvers, missing or cyclic references)."""

    data: dict[str, object] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    unknown: set[str] = field(default_factory=set)

    @classmethod
    def from_tree(cls, tree: ConfigTree) -> HydraConfig:
        """A config holding the file ``tree``, each leaf cited ``file:line``."""
        config = cls()
        config.merge_tree(tree)
        return config

    def merge_tree(self, tree: ConfigTree, prefix: str = "") -> None:
        """Merge ``tree`` over this config (OmegaConf.merge: mappings merge key by key, any
        other value replaces), under the dotted ``prefix`` when given."""
        for dotted, value in _leaves(tree.data):
            if isinstance(value, Mapping) and not value:
                continue
            self.set(f"{prefix}.{dotted}" if prefix else dotted, value, tree.where(dotted))

    def merge_values(self, values: Mapping[str, object], source: str) -> None:
        """Set each dotted key of ``values`` from ``source`` (a catalog's published values)."""
        for dotted, value in values.items():
            self.set(dotted, value, source)

    def set(self, dotted: str, value: object, source: str) -> None:
        """``dotted = value`` from ``source``; a mapping value replaces the whole subtree."""
        parts = dotted.split(".")
        node = child_dict(self.data, parts[:-1])
        self._forget(dotted)
        if isinstance(value, Mapping):
            node[parts[-1]] = {}
            for sub, leaf in _leaves(value):
                self.set(f"{dotted}.{sub}", leaf, source)
            return
        node[parts[-1]] = list(value) if isinstance(value, list | tuple) else value
        self.sources[dotted] = source

    def delete(self, dotted: str) -> None:
        """Remove ``dotted`` (and everything under it)."""
        parts = dotted.split(".")
        node: object = self.data
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(parts[-1], None)
        self._forget(dotted)

    def apply_override(self, arg: str) -> bool:
        """Apply one Hydra override (module docstring), cited ``override: <arg>``; False when
        ``arg`` is not an override."""
        parsed = split_override(arg)
        if parsed is None:
            return False
        action, key, value = parsed
        if action == "delete":
            self.delete(key)
        else:
            self.set(key, value, f"override: {arg}")
        return True

    def has(self, dotted: str) -> bool:
        """True when ``dotted`` holds a value (possibly null)."""
        found, _ = self._raw(dotted)
        return found

    def lookup(self, dotted: str) -> Resolved | None:
        """The value at ``dotted`` with interpolations resolved, and its source; None when the
        key is absent or its interpolation cannot be resolved (then the key is added to
        ``unknown``)."""
        found, value = self._raw(dotted)
        if not found:
            return None
        source = self._source(dotted)
        resolved = self._resolve(dotted, value, 0)
        if resolved is None:
            self.unknown.add(dotted)
            return None
        if resolved.source:
            source = f"{source} ({resolved.source})"
        return Resolved(resolved.value, source)

    def value(self, dotted: str) -> object:
        """The resolved value at ``dotted``, or None."""
        found = self.lookup(dotted)
        return None if found is None else found.value

    def items(self) -> Iterator[tuple[str, object]]:
        """Every leaf as ``(dotted key, raw value)``."""
        yield from _leaves(self.data)

    def _raw(self, dotted: str) -> tuple[bool, object]:
        node: object = self.data
        for part in dotted.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            else:
                return False, None
        return True, node

    def _source(self, dotted: str) -> str:
        if dotted in self.sources:
            return self.sources[dotted]
        parts = dotted.split(".")
        while parts:
            parts.pop()
            key = ".".join(parts)
            if key in self.sources:
                return self.sources[key]
        return "config"

    def _forget(self, dotted: str) -> None:
        prefix = dotted + "."
        for key in [k for k in self.sources if k == dotted or k.startswith(prefix)]:
            del self.sources[key]

    def _resolve(self, dotted: str, value: object, hops: int) -> Resolved | None:
        """``value`` (found at ``dotted``) with its interpolations replaced; ``source`` names
        the references followed (empty when there were none)."""
        if not isinstance(value, str) or "${" not in value:
            return Resolved(value, "")
        if hops > _MAX_HOPS:
            return None
        whole = _REFERENCE.fullmatch(value.strip())
        references = _REFERENCE.findall(value)
        if not references or len(references) != value.count("${"):
            return None
        pieces: dict[str, Resolved] = {}
        for reference in references:
            target = _target(dotted, reference)
            if target is None:
                return None
            found, raw = self._raw(target)
            if not found:
                return None
            inner = self._resolve(target, raw, hops + 1)
            if inner is None:
                return None
            cited = f"${{{reference}}} = {self._source(target)}"
            pieces[reference] = Resolved(inner.value, cited)
        if whole:
            piece = pieces[whole.group(1)]
            return Resolved(piece.value, piece.source)
        text = _REFERENCE.sub(lambda m: str(pieces[m.group(1)].value), value)
        return Resolved(text, "; ".join(p.source for p in pieces.values()))


def _target(dotted: str, reference: str) -> str | None:
    """The absolute dotted key ``reference`` points to from the key ``dotted``; None for a
    custom resolver (``name:args``) or a reference above the root."""
    reference = reference.strip()
    if ":" in reference or not reference:
        return None
    if not reference.startswith("."):
        return reference
    dots = len(reference) - len(reference.lstrip("."))
    parents = dotted.split(".")[:-1]
    if dots - 1 > len(parents):
        return None
    base = parents[: len(parents) - (dots - 1)]
    rest = reference[dots:]
    return ".".join([*base, rest]) if rest else ".".join(base) or None


def _leaves(node: object, prefix: str = "") -> Iterator[tuple[str, object]]:
    if isinstance(node, Mapping) and (node or not prefix):
        for key, value in node.items():
            yield from _leaves(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, node
