"""An LLM Foundry yaml as ``train_from_yaml`` sees it: the file with its ``key=value`` command-line
overrides merged in (OmegaConf ``merge`` of ``from_cli``) and ``${a.b}`` interpolations resolved
statically (``${variables.x}`` at newer LLM Foundry commits, top-level keys at older ones,
``${.x}`` relative to the key's parent). Each value comes with its source: ``file:line`` of the
value (or of the value an interpolation names) or ``override: <the argument>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from planner.errors import SpecError
from planner.launch.configs import ConfigTree
from planner.launch.values import child_dict

__all__ = ["FoundryConfig"]

_INTERPOLATION = re.compile(r"\$\{([^{}]+)\}")
_MAX_INTERPOLATION_DEPTH = 16


class FoundryConfig:
    """A Foundry yaml with its command-line overrides merged in (OmegaConf ``merge`` of
    ``from_cli``) and ``${a.b}`` interpolations resolved on access. Values an interpolation
    cannot resolve statically (a resolver such as ``${oc.env:X}``, a missing key) read as
    None."""

    def __init__(self, tree: ConfigTree, overrides: Mapping[str, tuple[object, str]]) -> None:
        self.tree = tree
        self.overrides = dict(overrides)
        self.data: dict[str, object] = _plain_copy(tree.data)
        for key, (value, _argument) in self.overrides.items():
            *parents, last = key.split(".")
            child_dict(self.data, parents)[last] = value

    def _raw(self, dotted: str) -> tuple[object, str] | None:
        node: object = self.data
        for part in dotted.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            else:
                return None
        if dotted in self.overrides:
            return node, f"override: {self.overrides[dotted][1]}"
        return node, self.tree.where(dotted)

    def get(self, dotted: str, depth: int = 0) -> tuple[object, str] | None:
        """``(value, source)`` at ``dotted`` with interpolations resolved; None when absent."""
        found = self._raw(dotted)
        if found is None:
            return None
        value, source = found
        if not isinstance(value, str) or "${" not in value:
            return value, source
        if depth > _MAX_INTERPOLATION_DEPTH:
            raise SpecError(self.tree.where(dotted), "interpolations nest too deep (a cycle?)")
        parent = dotted.rpartition(".")[0]
        whole = _INTERPOLATION.fullmatch(value.strip())
        if whole:
            reference = self._target(whole.group(1), parent)
            target = self.get(reference, depth + 1) if reference else None
            if target is None:
                return None, source
            return target[0], f"{target[1]} (${{{whole.group(1).strip()}}})"

        def substitute(match: re.Match[str]) -> str:
            reference = self._target(match.group(1), parent)
            target = self.get(reference, depth + 1) if reference else None
            return match.group(0) if target is None else str(target[0])

        return _INTERPOLATION.sub(substitute, value), source

    @staticmethod
    def _target(reference: str, parent: str) -> str | None:
        """The absolute key an interpolation names; None for a resolver (``oc.env:X``)."""
        name = reference.strip()
        if ":" in name:
            return None
        if name.startswith("."):
            return f"{parent}.{name.lstrip('.')}" if parent else name.lstrip(".")
        return name

    def value(self, dotted: str) -> object:
        found = self.get(dotted)
        return None if found is None else found[0]

    def has(self, dotted: str) -> bool:
        return self._raw(dotted) is not None

    def where(self, dotted: str) -> str:
        return self.tree.where(dotted)


def _plain_copy(node: Mapping[str, object]) -> dict[str, object]:
    copied: dict[str, object] = {}
    for key, value in node.items():
        copied[str(key)] = _plain_copy(value) if isinstance(value, Mapping) else value
    return copied
