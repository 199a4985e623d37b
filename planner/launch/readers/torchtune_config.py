"""A torchtune launch's command and config as ``tune run`` reads them (pytorch/torchtune@bd2a0fc):
torchrun's options before the recipe (torchtune/_cli/run.py), ``--config`` (a built-in name
such as ``llama3_1/8B_full``, read from the job's tree when it holds
``recipes/configs/<name>.yaml``, else from the catalog ``planner/launch/data/torchtune.yaml``, or
a YAML path), and ``key=value`` / ``~key`` overrides over the YAML
(torchtune/config/_utils.py ``_merge_yaml_and_cli_args``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from planner.errors import SourceError
from planner.launch.configs import ConfigTree, dotted_overrides, read_config
from planner.launch.reader import ReadContext
from planner.launch.types import Facts, Invocation, resolve_path
from planner.launch.values import mapping_of

__all__ = ["TuneConfig", "TuneRun", "load_tune_config", "parse_tune_run"]

_TORCHRUN_FLAGS = frozenset(
    {"standalone", "no_python", "run_path", "module", "m", "virtual_local_rank"}
)
"""torchrun options that take no value (torch/distributed/run.py ``get_args_parser``)."""


@dataclass(frozen=True, slots=True)
class TuneRun:
    """A parsed ``tune run``: ``options`` (torchrun's, names without dashes, ``-`` as ``_``),
    ``recipe`` (name or path), ``config`` (``--config`` value), ``overrides`` (the recipe's
    other arguments, in order)."""

    recipe: str
    config: str | None
    options: Mapping[str, str] = field(default_factory=dict)
    overrides: tuple[str, ...] = ()


def parse_tune_run(args: Sequence[str]) -> TuneRun | None:
    """``args`` of ``tune`` (starting with ``run``) or of a recipe script -> :class:`TuneRun`;
    None when no recipe is named."""
    words = list(args[1:] if args and args[0] == "run" else args)
    options: dict[str, str] = {}
    index = 0
    recipe = ""
    if args and args[0] == "run":
        while index < len(words):
            word = words[index]
            index += 1
            if not word.startswith("-"):
                recipe = word
                break
            name, eq, value = word.lstrip("-").partition("=")
            name = name.replace("-", "_")
            if eq:
                options[name] = value
            elif name in _TORCHRUN_FLAGS:
                options[name] = ""
            elif index < len(words):
                options[name] = words[index]
                index += 1
        if not recipe:
            return None
    config: str | None = None
    rest: list[str] = []
    while index < len(words):
        word = words[index]
        index += 1
        if word == "--config" and index < len(words):
            config = words[index]
            index += 1
        elif word.startswith("--config="):
            config = word.partition("=")[2]
        else:
            rest.append(word)
    return TuneRun(recipe=recipe, config=config, options=options, overrides=tuple(rest))


class TuneConfig:
    """A torchtune config (YAML file or catalog entry) with the command line's overrides."""

    def __init__(
        self,
        tree: ConfigTree | None,
        flat: Mapping[str, object],
        flat_source: str,
        overrides: Sequence[str],
    ) -> None:
        self.tree = tree
        self.flat = flat
        self.flat_source = flat_source
        self.removed = [arg[1:].partition("=")[0] for arg in overrides if arg.startswith("~")]
        self.set: dict[str, tuple[object, str]] = {}
        for key, value, raw in dotted_overrides([a for a in overrides if a[:1] != "~"]):
            target = f"{key}._component_" if self._has(f"{key}._component_") else key
            self.set[target] = (value, f"override: {raw}")

    def _has(self, key: str) -> bool:
        return (self.tree.has(key) if self.tree is not None else False) or key in self.flat

    def find(self, key: str) -> tuple[object, str] | None:
        """``(value, source)`` of dotted ``key``, or None when the config does not set it."""
        if key in self.set:
            return self.set[key]
        if any(key == gone or key.startswith(f"{gone}.") for gone in self.removed):
            return None
        if self.tree is not None and self.tree.has(key):
            return self.tree.get(key), self.tree.where(key)
        if key in self.flat:
            return self.flat[key], self.flat_source
        return None

    def value(self, key: str, fallback: object = None) -> object:
        found = self.find(key)
        return fallback if found is None else found[0]


def load_tune_config(
    run: TuneRun,
    invocation: Invocation,
    context: ReadContext,
    data: Mapping[str, object],
    facts: Facts,
) -> TuneConfig:
    """The config ``--config`` names: a built-in name (the job tree's
    recipes/configs/<name>.yaml, else the catalog) or a YAML path."""
    name = run.config or ""
    builtin = mapping_of(mapping_of(data.get("configs")).get(name))
    in_tree = resolve_path(f"recipes/configs/{name}.yaml", invocation.cwd)
    as_path = resolve_path(name, invocation.cwd)
    tree: ConfigTree | None = None
    flat: Mapping[str, object] = {}
    source = ""
    if builtin or not name.endswith((".yaml", ".yml")):
        facts.set("launch.recipe", name, f"launch: --config {name}")
    if context.files.exists(as_path) and name.endswith((".yaml", ".yml")):
        tree = read_config(context.files, as_path)
    elif context.files.exists(in_tree):
        tree = read_config(context.files, in_tree)
    elif builtin:
        flat = builtin
        source = (
            f"catalog:{name} (torchtune {data.get('version', '')} built-in config, "
            f"{data.get('repo', '')}/recipes/configs/{name}.yaml@{str(data.get('commit', ''))[:7]})"
        )
    elif name.endswith((".yaml", ".yml")):
        raise SourceError(
            as_path,
            "no such file; it is the torchtune config named by --config (a path relative to "
            "the job's directory, or a built-in name such as llama3_1/8B_full)",
        )
    else:
        facts.note(f"torchtune: built-in config {name} is not in the catalog")
    return TuneConfig(tree, flat, source, run.overrides)
