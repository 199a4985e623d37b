"""torchtitan's job config as the trainer resolves it (``ConfigManager``,
torchtitan/config/manager.py@238fa99): the command line's ``--section.key value`` overrides
(tyro: ``--a.b value``, ``--a.b=value``, bare boolean flags ``--compile.enable`` /
``--compile.no-enable``, ``-`` and ``_`` spellings alike, lists comma separated) over the TOML
file over the JobConfig dataclass defaults (``planner/launch/data/torchtitan.yaml``, with the
keys older releases spelled differently)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from planner.launch.configs import ConfigTree, parse_scalar
from planner.launch.types import Facts, Invocation
from planner.launch.values import as_int, mapping_of

__all__ = ["CONFIG_FLAGS", "JobSettings", "cli_overrides", "config_path"]

CONFIG_FLAGS = ("job.config_file",)
"""The overrides that name the job config file."""
_LIST_KEYS = frozenset(
    {
        "model.converters",
        "compile.components",
        "quantize.linear.float8.filter_fqns",
        "quantize.linear.mx.filter_fqns",
        "quantize.grouped_mm.float8.fqns",
        "quantize.grouped_mm.mx.fqns",
    }
)


def _normal_key(flag: str) -> str:
    """``--job.config-file`` -> ``job.config_file``."""
    return flag.lstrip("-").replace("-", "_")


def cli_overrides(args: Sequence[str]) -> list[tuple[str, object, str]]:
    """torchtitan's command-line overrides as ``(dotted key, value, the argument)``, in order.

    ``--a.b value`` and ``--a.b=value`` set ``a.b``; a flag followed by another flag (or last)
    is a boolean set true, ``--a.no-b`` / ``--a.no_b`` / ``--no-a.b`` false. List fields take
    comma-separated values. ``--job.config_file`` is included (as ``job.config_file``)."""
    found: list[tuple[str, object, str]] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if not arg.startswith("--") or arg == "--":
            continue
        if "=" in arg:
            flag, _, raw = arg.partition("=")
            key = _normal_key(flag)
            found.append((key, _value(key, raw), arg))
            continue
        key = _normal_key(arg)
        if index < len(args) and not args[index].startswith("--"):
            raw = args[index]
            index += 1
            found.append((key, _value(key, raw), f"{arg} {raw}"))
            continue
        head, _, last = key.rpartition(".")
        if last.startswith("no_"):
            found.append((f"{head}.{last[3:]}" if head else last[3:], False, arg))
        elif key.startswith("no_") and "." in key:
            found.append((key[3:], False, arg))
        else:
            found.append((key, True, arg))
    return found


def _value(key: str, raw: str) -> object:
    if key in _LIST_KEYS:
        text = raw.strip().strip("[]")
        return [item.strip().strip("'\"") for item in text.split(",") if item.strip()]
    return parse_scalar(raw)


class JobSettings:
    """One value per JobConfig key: the command line over the TOML over the defaults."""

    def __init__(
        self,
        data: Mapping[str, object],
        tree: ConfigTree | None,
        overrides: list[tuple[str, object, str]],
    ) -> None:
        job = mapping_of(data.get("job_config"))
        self.defaults = mapping_of(job.get("defaults"))
        self.older = mapping_of(job.get("older_keys"))
        self.tree = tree
        self.overrides = {key: (value, raw) for key, value, raw in overrides}
        commit = str(data.get("commit", ""))[:7]
        self.default_source = (
            f"default of torchtitan {data.get('version', '')} "
            f"({data.get('repo', '')}/{job.get('path', '')}@{commit})"
        )

    def _names(self, key: str) -> list[str]:
        older = self.older.get(key)
        return [key, *(str(name) for name in older)] if isinstance(older, list) else [key]

    def find(self, key: str) -> tuple[object, str, bool] | None:
        """``(value, source, is_default)`` of ``key``, or None when nothing gives it."""
        names = self._names(key)
        for name in names:
            if name in self.overrides:
                value, raw = self.overrides[name]
                return value, f"override: {raw}", False
        if self.tree is not None:
            for name in names:
                if self.tree.has(name):
                    return self.tree.get(name), self.tree.where(name), False
        if key in self.defaults:
            return self.defaults[key], self.default_source, True
        return None

    def value(self, key: str) -> object:
        found = self.find(key)
        return None if found is None else found[0]

    def put(
        self, facts: Facts, field: str, key: str, value: object = None, *, count: bool = False
    ) -> None:
        """Record ``field`` from ``key`` (``value`` replaces the found value when given;
        ``count``: the value must be a positive integer, else a note and nothing recorded)."""
        found = self.find(key)
        if found is None:
            return
        chosen = found[0] if value is None else value
        if count and not (as_int(chosen) or 0) > 0:
            facts.note(f"torchtitan: {key} {chosen!r} is not a positive integer ({found[1]})")
            return
        chosen = as_int(chosen) if count else chosen
        if found[2]:
            facts.default(field, chosen, found[1])
        else:
            facts.set(field, chosen, found[1])


def config_path(invocation: Invocation) -> tuple[str, str] | None:
    """The job config the program reads and where that was said (torchtitan reads the first
    ``--job.config_file``; ``CONFIG_FILE`` is run_train.sh's variable)."""
    for key, value, raw in cli_overrides(invocation.args):
        if key in CONFIG_FLAGS and isinstance(value, str) and value:
            return value, f"override: {raw}"
    env = invocation.env.get("CONFIG_FILE")
    if env:
        return env, "launch: CONFIG_FILE"
    return None
