"""Config trees frameworks print as YAML at start, read back into facts by the rules of the
reader of that framework.

* **NeMo 1.0** (``examples/nlp/language_modeling/megatron_gpt_pretraining.py``,
  NVIDIA/NeMo@9d86acd): ``************** Experiment configuration ***********``, then the
  composed Hydra config (``OmegaConf.to_yaml``: interpolations unresolved) as one record whose
  lines NeMo's formatter indents by four spaces (``nemo/utils/formatters/base.py``). Read by
  :func:`~planner.launch.readers.nemo1.apply_config`, interpolations resolved.
* **Megatron-Bridge** (``training/setup.py`` ``maybe_log_and_save_config``,
  NVIDIA-NeMo/Megatron-Bridge@7e8111c): ``------- Task Configuration -------``, the
  ``ConfigContainer`` as ``yaml.safe_dump`` (sorted keys), a line of dashes. Read by
  :func:`~planner.launch.readers.megatron_bridge.config_facts`.
* **torchtune** (``torchtune/config/_utils.py`` ``log_config``, pytorch/torchtune@bd2a0fc):
  ``Running <RecipeClass> with resolved config:``, a blank line, the config with the command
  line's overrides merged and interpolations resolved (sorted keys). Read by
  :func:`~planner.launch.readers.torchtune.config_facts`.

The YAML block is the run of lines after the marker that look like YAML (``key:`` lines, list
items, and lines indented under them), dedented by its first line's indentation; it is parsed by
the same safe loader as the job's config files (:func:`~planner.launch.configs.load_config`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from planner.errors import SpecError
from planner.launch.configs import ConfigTree, load_config
from planner.launch.readers.megatron_bridge import config_facts as bridge_config_facts
from planner.launch.readers.nemo1 import apply_config
from planner.launch.readers.nemo_hydra import HydraConfig
from planner.launch.readers.torchtune import config_facts as torchtune_config_facts
from planner.launch.types import Facts
from planner.launch.witness_log import LogView, Marker, take_facts

__all__ = ["read_config_trees"]

_NEMO1 = Marker(
    "Experiment configuration", re.compile(r"\*{5,} Experiment configuration \*{5,}\s*$")
)
_BRIDGE = Marker("Task Configuration", re.compile(r"^-{3,} Task Configuration -{3,}\s*$"))
_TORCHTUNE = Marker(
    "with resolved config:", re.compile(r"\bRunning (\w+) with resolved config:\s*$")
)
_YAML_LINE = re.compile(r"""^(\s*)(?:-(?:\s|$)|(?:[\w.\-/]+|"[^"]*"|'[^']*'):(?:\s|$))""")
_LOOKAHEAD = 4
"""Lines between a marker and its YAML (a logger's record header, a blank line)."""
_MAX_BLOCK_LINES = 8000
_MAX_BLOCK_CHARS = 256 * 1024


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _yaml_block(log: LogView, marker: int) -> tuple[int, str] | None:
    """``(first line index, dedented text)`` of the YAML after line ``marker``; None when no
    YAML line follows within a few lines."""
    start = next(
        (
            index
            for index in range(marker + 1, min(len(log.lines), marker + 1 + _LOOKAHEAD))
            if _YAML_LINE.match(log.lines[index])
        ),
        None,
    )
    if start is None:
        return None
    base = _indent(log.lines[start])
    lines: list[str] = []
    size = 0
    for line in log.lines[start : start + _MAX_BLOCK_LINES]:
        if line.strip():
            depth = _indent(line)
            if depth < base or (depth == base and not _YAML_LINE.match(line)):
                break
        size += len(line) + 1
        if size > _MAX_BLOCK_CHARS:
            break
        lines.append(line[base:] if _indent(line) >= base else line.lstrip(" "))
    return start, "\n".join(lines)


def _tree(log: LogView, marker: int, facts: Facts) -> ConfigTree | None:
    """The YAML after line ``marker`` as a tree whose keys cite their log lines; None (noted
    when it does not parse) when there is none."""
    block = _yaml_block(log, marker)
    if block is None:
        return None
    start, text = block
    try:
        tree = load_config(text, "log", "yaml")
    except SpecError as exc:
        facts.note(
            f"{log.cite(marker)}: the configuration printed there is not read ({exc.message})"
        )
        return None
    return ConfigTree(tree.data, "log", {key: start + line for key, line in tree.lines.items()})


_Apply = Callable[[Facts, ConfigTree, re.Match[str], str], None]


def _read(log: LogView, facts: Facts, marker: Marker, apply: _Apply) -> None:
    found = log.first(marker)
    if found is None:
        return
    tree = _tree(log, found[0], facts)
    if tree is None:
        return
    read = Facts()
    apply(read, tree, found[1], log.cite(found[0]))
    take_facts(facts, read)


def _nemo1(facts: Facts, tree: ConfigTree, _match: re.Match[str], _where: str) -> None:
    apply_config(HydraConfig.from_tree(tree), facts)


def _bridge(facts: Facts, tree: ConfigTree, _match: re.Match[str], _where: str) -> None:
    bridge_config_facts(HydraConfig.from_tree(tree), facts)


def _torchtune(facts: Facts, tree: ConfigTree, match: re.Match[str], where: str) -> None:
    recipe = match.group(1)
    torchtune_config_facts(facts, tree, recipe.lower(), f"{where} ({recipe})")


def read_config_trees(log: LogView, facts: Facts) -> None:
    """The first NeMo 1.0, Megatron-Bridge and torchtune config tree of the log into
    ``facts`` (module docstring)."""
    _read(log, facts, _NEMO1, _nemo1)
    _read(log, facts, _BRIDGE, _bridge)
    _read(log, facts, _TORCHTUNE, _torchtune)
