"""Command-line and config arguments of the Hugging Face stack, shared by the HF Trainer / TRL
and Axolotl readers.

* :func:`flag_args`: ``--key value`` / ``--key=value`` / bare ``--flag`` / ``--no_flag``
  arguments as ``HfArgumentParser`` (and click, fire) read them.
* :class:`Settings`: arguments by name with their sources, applied in increasing precedence
  (documented defaults, config file, command line), remembering which are still defaults.
* :func:`hf_default` / :func:`cite_source`: a documented default from
  ``planner/launch/data/hf.yaml`` with its source
  (``default of <framework> <version> (<repo>/<path>@<short commit>)``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from planner.errors import SpecError
from planner.launch.data import load_data
from planner.launch.types import Facts, Sourced
from planner.launch.values import as_bool, parse_scalar

__all__ = [
    "Flags",
    "Settings",
    "assume",
    "cite_file",
    "cite_source",
    "flag_args",
    "hf_default",
]

_DATA = "hf.yaml"


def hf_default(dotted: str) -> Sourced:
    """The default at ``dotted`` in ``hf.yaml`` (``training_args.per_device_train_batch_size``)
    with its source, ``default of <framework> <version> (<repo>/<path>@<short commit>)``.
    Raises ``SpecError`` when the data file lacks it (a packaging error)."""
    node: object = load_data(_DATA)
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise SpecError(f"planner/launch/data/{_DATA}", f"no default {dotted!r}")
        node = node[part]
    if not isinstance(node, Mapping) or "value" not in node:
        raise SpecError(f"planner/launch/data/{_DATA}", f"{dotted!r} is not a default")
    return Sourced(node["value"], cite_source(str(node.get("source", ""))))


def cite_source(key: str) -> str:
    """``default of <framework> <version> (<repo>/<path>@<short commit>)`` for a source key of
    ``hf.yaml``."""
    entry = _source_entry(key)
    return f"default of {entry.get('framework')} {entry.get('version')} ({cite_file(key)})"


def cite_file(key: str) -> str:
    """``<repo>/<path>@<short commit>`` of a source key of ``hf.yaml`` (for derived values)."""
    entry = _source_entry(key)
    commit = str(entry.get("commit", ""))[:7]
    return f"{entry.get('repo')}/{entry.get('path')}@{commit}"


def _source_entry(key: str) -> Mapping[str, object]:
    sources = load_data(_DATA).get("sources")
    entry = sources.get(key) if isinstance(sources, Mapping) else None
    if not isinstance(entry, Mapping):
        raise SpecError(f"planner/launch/data/{_DATA}", f"no source {key!r}")
    return entry


@dataclass(frozen=True, slots=True)
class Flags:
    """Parsed ``--key value`` arguments: ``values`` maps each key (dashes as underscores) to its
    last value with the argument text (``--lora_r 32``), bare flags to True and ``--no_key`` /
    ``--no-key`` to ``no_key`` True; ``positionals`` are the other arguments in order."""

    values: Mapping[str, tuple[object, str]] = field(default_factory=dict)
    positionals: tuple[str, ...] = ()

    def get(self, key: str) -> tuple[object, str] | None:
        """``(value, argument text)`` of ``key`` (``--no_key`` gives False), or None."""
        found = self.values.get(key)
        negated = self.values.get(f"no_{key}")
        if (
            negated is not None
            and as_bool(negated[0]) is True
            and (found is None or self._order[f"no_{key}"] > self._order[key])
        ):
            return False, negated[1]
        return found

    @property
    def _order(self) -> dict[str, int]:
        return {key: index for index, key in enumerate(self.values)}


def flag_args(args: Sequence[str], *, bool_keys: frozenset[str] = frozenset()) -> Flags:
    """``args`` read as ``--key value``, ``--key=value`` and bare ``--flag`` (True). A key in
    ``bool_keys`` takes the next argument only when it is a boolean word. Values are parsed as
    :func:`~planner.launch.values.parse_scalar` does. Single-dash arguments and everything
    after ``--`` are positionals."""
    values: dict[str, tuple[object, str]] = {}
    positionals: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            positionals.extend(args[index:])
            break
        if not arg.startswith("--") or len(arg) == 2:
            positionals.append(arg)
            index += 1
            continue
        name, equals, raw = arg[2:].partition("=")
        key = name.replace("-", "_")
        text: str
        value: object
        if equals:
            value, text = parse_scalar(raw), arg
        else:
            following = args[index + 1] if index + 1 < len(args) else None
            takes = following is not None and not _is_option(following)
            if takes and key in bool_keys and following is not None:
                takes = as_bool(following) is not None
            if takes and following is not None:
                value, text = parse_scalar(following), f"{arg} {following}"
                index += 1
            else:
                value, text = True, arg
        if key in bool_keys and isinstance(value, str | int) and as_bool(value) is not None:
            value = as_bool(value)
        values.pop(key, None)
        values[key] = (value, text)
        index += 1
    return Flags(values=values, positionals=tuple(positionals))


def _is_option(arg: str) -> bool:
    return arg.startswith("--") or (arg.startswith("-") and not re.match(r"^-\d", arg))


@dataclass(slots=True)
class Settings:
    """Arguments by name with their sources, applied in increasing precedence; ``assumed``
    names those still at a documented default."""

    values: dict[str, Sourced] = field(default_factory=dict)
    assumed: set[str] = field(default_factory=set)

    def default(self, name: str, found: Sourced) -> None:
        """A documented default (over an earlier one)."""
        self.values[name] = found
        self.assumed.add(name)

    def put(self, name: str, value: object, source: str) -> None:
        """A value the launch gives."""
        self.values[name] = Sourced(value, source)
        self.assumed.discard(name)

    def get(self, name: str) -> object:
        """The value of ``name``, or None."""
        found = self.values.get(name)
        return None if found is None else found.value

    def explicit(self, name: str) -> bool:
        """True when the launch itself gives ``name``."""
        return name in self.values and name not in self.assumed

    def record(self, facts: Facts, fact: str, name: str, value: object = None) -> None:
        """``fact`` = ``value`` (default: the setting's value) with the setting's source, as an
        assumed default when the setting is one."""
        found = self.values.get(name)
        if found is None:
            return
        chosen = found.value if value is None else value
        if name in self.assumed:
            assume(facts, fact, chosen, found.source)
        else:
            facts.set(fact, chosen, found.source)


def assume(facts: Facts, name: str, value: object, source: str) -> None:
    """Record ``name`` as an assumed default, over a weaker default already there (a model's
    context length the model catalog assumed, say)."""
    if name in facts.assumed:
        facts.values.pop(name, None)
    facts.default(name, value, source)
