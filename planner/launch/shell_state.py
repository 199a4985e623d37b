"""Bounds of launch-script interpretation, its control-flow signals, and the state one
launch's interpretation shares across scripts (:class:`Shared`): allocation, programs found,
files written, command budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.errors import PlannerError
from planner.launch.shell_ast import Seq
from planner.launch.shell_expand import known
from planner.launch.shell_slurm import SlurmRequest
from planner.launch.shell_syntax import parse_script
from planner.launch.types import Facts, Invocation, Launch, LaunchFiles

__all__ = [
    "MAX_COMMANDS",
    "MAX_DEPTH",
    "MAX_INVOCATIONS",
    "MAX_LOOP_ITERATIONS",
    "MAX_NOTES",
    "MAX_SCRIPT_CHARS",
    "SCRIPT_SUFFIXES",
    "FunctionReturn",
    "LoopJump",
    "ScriptExit",
    "Shared",
    "Stop",
]

MAX_DEPTH = 8
"""Deepest nesting of scripts, ``bash -c`` strings, functions and ``$( )`` substitutions."""
MAX_COMMANDS = 10_000
"""Most simple commands interpreted for one launch."""
MAX_LOOP_ITERATIONS = 256
"""Most iterations of one loop."""
MAX_SCRIPT_CHARS = 1 << 20
"""Longest script text interpreted (the rest is dropped with a note)."""
MAX_NOTES = 40
"""Most notes the interpreter adds to a description."""
MAX_INVOCATIONS = 64
"""Most programs recorded for one launch."""
SCRIPT_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch", ".zsh", ".ksh")


class Stop(Exception):  # noqa: N818 (a signal, not an error)
    """A bound of the launch is reached: interpretation ends (internal)."""


class ScriptExit(Exception):  # noqa: N818 (a signal, not an error)
    """``exit``: the current script ends."""


class FunctionReturn(Exception):  # noqa: N818 (a signal, not an error)
    """``return``: the current function ends."""


class LoopJump(Exception):  # noqa: N818 (a signal, not an error)
    """``break`` / ``continue`` with its loop count."""

    def __init__(self, kind: str, levels: int) -> None:
        super().__init__(kind)
        self.kind = kind
        self.levels = levels


@dataclass(slots=True)
class Shared:
    """State of one launch's interpretation, shared by all its frames."""

    launch: Launch
    files: LaunchFiles
    allocation: Facts
    request: SlurmRequest
    slurm: bool
    per_node_nodes: int | None = None
    """Nodes the command runs on, once each (a Kubernetes pod's container), else None."""
    written: dict[str, str] = field(default_factory=dict)
    invocations: list[Invocation] = field(default_factory=list)
    commands: int = 0
    depth: int = 0
    written_chars: int = 0
    parsed: dict[str, tuple[Seq, tuple[str, ...]]] = field(default_factory=dict)

    def parse(self, text: str) -> tuple[Seq, tuple[str, ...]]:
        """The parsed ``text`` with the parser's notes (parsed once per launch)."""
        found = self.parsed.get(text)
        if found is None:
            notes: list[str] = []
            found = (parse_script(text, notes), tuple(notes))
            if len(self.parsed) < 32:
                self.parsed[text] = found
        return found

    def note(self, text: str) -> None:
        """Add a note for the description (at most :data:`MAX_NOTES`)."""
        notes = self.allocation.notes
        if len(notes) < MAX_NOTES:
            self.allocation.note(text)
        elif len(notes) == MAX_NOTES:
            notes.append("further notes on the launch script left out")

    def tick(self) -> None:
        self.commands += 1
        if self.commands > MAX_COMMANDS:
            self.allocation.note(f"interpretation stopped after {MAX_COMMANDS:,} commands")
            raise Stop

    def exists(self, path: str) -> bool:
        try:
            return path in self.written or self.files.exists(path)
        except PlannerError:
            return False

    def read(self, path: str) -> str | None:
        if path in self.written:
            return self.written[path]
        try:
            return self.files.read_text(path)
        except PlannerError:
            return None

    def write(self, path: str, text: str, *, append: bool = False) -> None:
        if path in {"/dev/null", "/dev/stderr", "/dev/stdout", "/dev/tty"}:
            return
        old = self.written.get(path, "") if append else ""
        if self.written_chars + len(text) > 4 << 20 or len(self.written) >= 64:
            self.note(f"{path}: not kept (files the script writes are limited to 4 MiB, 64 files)")
            return
        self.written_chars += len(text)
        self.written[path] = old + known(text)

    def world(self, value: int, where: str) -> None:
        known = self.allocation.int("launch.world_size")
        if known is None:
            self.allocation.set("launch.world_size", value, where)
        elif known != value:
            self.note(f"{where}: the launcher starts {value} processes (the first starts {known})")
