"""A NeMo Automodel launch's command line and resolved YAML config, for
:mod:`planner.launch.readers.automodel`.

The command line follows NVIDIA-NeMo/Automodel@36044ad3: the ``automodel`` / ``am`` console
script (``nemo_automodel/cli/app.py``, also run as ``-m nemo_automodel.cli.app``) takes the
config path as its one positional argument and ``--nproc-per-node`` / ``--nproc_per_node`` with
``argparse.parse_known_args``; the torchrun options it hands on are read by torchrun's own
parser, of which the reader takes ``--nnodes``. Releases before Automodel@35b5ed9c9
(2026-04-01) took ``automodel <command> <domain> -c <config.yaml>`` (``finetune`` /
``pretrain`` / ``benchmark`` / ``kd``, ``llm`` / ``vlm``); that form is read too, its command
kept in ``AutomodelRun.command``. A recipe module run directly
(``nemo_automodel.recipes.llm.train_ft``) takes ``--config`` / ``-c``. Every other argument goes
to ``parse_cli_argv`` (``nemo_automodel/components/config/_arg_parser.py``): ``--a.b=value``,
``--a.b value`` (the next argument when it does not start with ``--``) and a bare ``--a.b``
(true) override the YAML at the dotted path; other arguments are skipped. Values are
translated as ``translate_value`` (``components/config/loader.py:121``) does: ``none`` /
``true`` / ``false`` (either case of the first letter), then a Python literal, else the text.
"""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from planner.launch.configs import ConfigTree, read_config
from planner.launch.types import Invocation, LaunchFiles, resolve_path
from planner.launch.values import mapping_of

__all__ = [
    "CLI_PROGRAMS",
    "AutoSettings",
    "AutomodelRun",
    "is_cli",
    "load_settings",
    "parse_run",
    "recipe_module",
    "translate_value",
]

CLI_PROGRAMS = frozenset({"automodel", "am"})
"""The console scripts of ``pyproject.toml`` ``[project.scripts]`` (Automodel@36044ad3)."""
_CLI_MODULE = "nemo_automodel.cli.app"
_NPROC = ("--nproc-per-node", "--nproc_per_node")
_LEGACY_COMMANDS = frozenset({"finetune", "pretrain", "kd", "benchmark"})
_LEGACY_DOMAINS = frozenset({"llm", "vlm"})
_SPECIAL: dict[str, object] = {
    "none": None,
    "None": None,
    "true": True,
    "True": True,
    "false": False,
    "False": False,
}


def translate_value(text: str) -> object:
    """An override's text as Automodel's ``translate_value`` reads it (module docstring)."""
    if text in _SPECIAL:
        return _SPECIAL[text]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


@dataclass(frozen=True, slots=True)
class AutomodelRun:
    """What the command line says: ``config`` (the path as written, or None), ``cli`` (the
    console script or ``nemo_automodel.cli.app``, which starts torchrun itself), ``module`` (the
    recipe module run directly, or ""), ``nproc_per_node`` / ``nnodes`` (the CLI's options, as
    written), ``overrides`` (dotted key, value, the argument as written) and ``command`` /
    ``domain`` (the earlier CLI's ``automodel finetune llm -c ...``; "" otherwise)."""

    config: str | None
    cli: bool
    module: str = ""
    nproc_per_node: str = ""
    nnodes: str = ""
    overrides: tuple[tuple[str, object, str], ...] = ()
    command: str = ""
    domain: str = ""


def recipe_module(program: str) -> str:
    """The dotted module a program names (``nemo_automodel.recipes.llm.train_ft`` for that module
    or a path ending in ``nemo_automodel/recipes/llm/train_ft.py``), else ""."""
    if program.endswith(".py"):
        marker = program.rfind("nemo_automodel/")
        if marker < 0:
            return ""
        return program[marker:-3].replace("/", ".")
    return program if program.startswith("nemo_automodel.") else ""


def is_cli(program: str) -> bool:
    """The ``automodel`` / ``am`` console script or the ``nemo_automodel.cli.app`` module."""
    return posixpath.basename(program) in CLI_PROGRAMS or recipe_module(program) == _CLI_MODULE


def parse_run(invocation: Invocation) -> AutomodelRun:
    """The command line of ``invocation`` (module docstring)."""
    args = list(invocation.args)
    cli = is_cli(invocation.program)
    command = domain = ""
    if cli and len(args) > 1 and args[0] in _LEGACY_COMMANDS and args[1] in _LEGACY_DOMAINS:
        command, domain, args = args[0], args[1], args[2:]
    config: str | None = None
    nproc = nnodes = ""
    rest: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        name, eq, value = arg.partition("=")
        takes_value = cli and name in (*_NPROC, "--nnodes")
        # parse_cli_argv takes only a separate path; the earlier CLI's argparse also --config=
        takes_config = (not cli and arg in {"--config", "-c"}) or (
            bool(command) and name in {"--config", "-c"}
        )
        if takes_value or takes_config:
            if not eq and index + 1 < len(args):
                index += 1
                value = args[index]
            if name in _NPROC:
                nproc = value
            elif name == "--nnodes":
                nnodes = value
            else:
                config = value
        elif cli and not command and config is None and not arg.startswith("-"):
            config = arg
        else:
            rest.append(arg)
        index += 1
    return AutomodelRun(
        config=config,
        cli=cli,
        module="" if cli else recipe_module(invocation.program),
        nproc_per_node=nproc,
        nnodes=nnodes,
        overrides=tuple(_overrides(rest)),
        command=command,
        domain=domain,
    )


def _overrides(args: Sequence[str]) -> list[tuple[str, object, str]]:
    """``parse_cli_argv``'s dotted overrides (module docstring), in order."""
    found: list[tuple[str, object, str]] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if not arg.startswith("--"):
            continue
        key, eq, text = arg.lstrip("-").partition("=")
        written = arg
        if not eq:
            if index < len(args) and not args[index].startswith("--"):
                text = args[index]
                written = f"{arg} {text}"
                index += 1
            else:
                text = "True"
        if key:
            found.append((key, translate_value(text), written))
    return found


@dataclass(slots=True)
class AutoSettings:
    """The YAML config with the command line's overrides on top: ``find(dotted)`` gives
    ``(value, source)`` of the last word on a key (an override of the key or of a section above
    it, else the YAML), or None when neither gives it."""

    tree: ConfigTree | None
    overrides: tuple[tuple[str, object, str], ...] = ()
    _by_key: dict[str, tuple[object, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key, value, written in self.overrides:
            for other in [k for k in self._by_key if k.startswith(f"{key}.")]:
                del self._by_key[other]
            self._by_key[key] = (value, f"override: {written}")

    def find(self, dotted: str) -> tuple[object, str] | None:
        """The value at ``dotted`` and where it was given (class docstring)."""
        if dotted in self._by_key:
            return self._by_key[dotted]
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            above = ".".join(parts[:cut])
            if above in self._by_key:
                node: object = self._by_key[above][0]
                for part in parts[cut:]:
                    node = mapping_of(node).get(part) if isinstance(node, Mapping) else None
                    if node is None:
                        return None
                return node, self._by_key[above][1]
        if self.tree is not None and self.tree.has(dotted):
            return self.tree.get(dotted), self.tree.where(dotted)
        return None

    def value(self, dotted: str, fallback: object = None) -> object:
        """The value at ``dotted``, or ``fallback`` when nothing gives it (or it is null)."""
        found = self.find(dotted)
        return fallback if found is None or found[0] is None else found[0]

    def section_keys(self, section: str) -> list[str]:
        """The keys of the mapping at ``section`` (top level: ""), YAML and overrides."""
        node = self.tree.get(section) if self.tree is not None and section else None
        if self.tree is not None and not section:
            node = self.tree.data
        keys = [str(k) for k in mapping_of(node)]
        prefix = f"{section}." if section else ""
        for key in self._by_key:
            if key.startswith(prefix):
                head = key[len(prefix) :].split(".")[0]
                if head not in keys:
                    keys.append(head)
        return keys


def load_settings(
    run: AutomodelRun, invocation: Invocation, files: LaunchFiles
) -> tuple[AutoSettings, str | None]:
    """The settings of ``run`` and the config's resolved path (None when the command names no
    config); ``SourceError`` / ``SpecError`` when the config cannot be read or parsed."""
    if run.config is None:
        return AutoSettings(None, run.overrides), None
    path = resolve_path(run.config, invocation.cwd)
    tree = read_config(files, path, "yaml")
    return AutoSettings(tree, run.overrides), path
