"""The interpreter of launch scripts: walks the parsed commands (:mod:`shell_syntax`) with the
script's variables, follows wrapper scripts, ``source``d files, ``bash -c`` strings and shell
functions, and records each training program it reaches as an
:class:`~planner.launch.types.Invocation`. Nothing is executed: commands that are not shell
builtins are only looked at (:func:`~planner.launch.shell_launchers.peel`).

Bounds (a hostile script ends early with a note, never an exception):  those of
:mod:`planner.launch.shell_state` (nesting, commands, loop iterations, script size, programs)
and the expansion limits of :mod:`planner.launch.shell_expand`.
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field

from planner.launch.shell_ast import (
    AndOr,
    ArithCmd,
    Assign,
    Case,
    For,
    FuncDef,
    Group,
    If,
    Node,
    Pipeline,
    Seq,
    Simple,
    TestCmd,
    While,
)
from planner.launch.shell_conditions import evaluate_test
from planner.launch.shell_expand import UNKNOWN, Expander, ExpansionLimitError, Value
from planner.launch.shell_launchers import Wrapping
from planner.launch.shell_state import (
    MAX_DEPTH,
    MAX_LOOP_ITERATIONS,
    MAX_SCRIPT_CHARS,
    SCRIPT_SUFFIXES,
    FunctionReturn,
    LoopJump,
    ScriptExit,
    Shared,
    Stop,
)
from planner.launch.types import resolve_path

__all__ = ["Frame", "run_guarded"]


@dataclass(slots=True)
class Frame:
    """One script's (or function's, or subshell's) variables, arguments and directory."""

    shared: Shared
    source: str
    name: str
    vars: dict[str, Value] = field(default_factory=dict)
    exported: set[str] = field(default_factory=set)
    unknown: set[str] = field(default_factory=set)
    args: list[str] = field(default_factory=list)
    functions: dict[str, Node] = field(default_factory=dict)
    cwd: str | None = None
    old_cwd: str | None = None
    dirs: list[str | None] = field(default_factory=list)
    offset: int = 0
    line: int = 0
    wrapping: Wrapping = field(default_factory=Wrapping)
    capture: list[str] | None = None
    capture_unknown: bool = False
    words_unknown: bool = False
    locals: list[dict[str, Value | None]] = field(default_factory=list)
    expander: Expander = field(init=False)

    def __post_init__(self) -> None:
        self.expander = Expander(self)

    # --- Scope -------------------------------------------------------------------------
    def lookup(self, name: str) -> Value | None:
        if name == "PWD":
            return self.cwd
        if name == "OLDPWD":
            return self.old_cwd
        return self.vars.get(name)

    def assign(self, name: str, value: str) -> None:
        self.set_var(name, value, unknown=self.expander.unknown)

    def is_unknown(self, name: str) -> bool:
        return name in self.unknown

    def positional(self) -> list[str]:
        return self.args

    def script_name(self) -> str:
        return self.name

    def note(self, text: str) -> None:
        self.shared.note(f"{self.where()}: {text}")

    def substitute(self, text: str) -> str | None:
        from planner.launch.shell_builtins import substitute  # noqa: PLC0415 (cycle)

        return substitute(self, text)

    # --- the frame: where it is, its variables, its copies and children -----------------
    def where(self, line: int | None = None) -> str:
        return f"{self.source}:{self.offset + (line if line is not None else self.line)}"

    def set_var(self, name: str, value: Value, *, unknown: bool = False) -> None:
        self.vars[name] = value
        if unknown:
            self.unknown.add(name)
        else:
            self.unknown.discard(name)

    def environment(self, extra: Mapping[str, str] = {}) -> dict[str, str]:
        env = {
            name: value
            for name in sorted(self.exported)
            if isinstance(value := self.vars.get(name), str) and name not in self.unknown
        }
        env.update(extra)
        return {name: value for name, value in env.items() if UNKNOWN not in value}

    def copy(self, *, capture: bool = False) -> Frame:
        """A subshell: a copy of everything (``( )``, ``$( )``)."""
        child = Frame(
            self.shared, self.source, self.name, dict(self.vars), set(self.exported),
            set(self.unknown), list(self.args), dict(self.functions), self.cwd, self.old_cwd,
            list(self.dirs), self.offset, self.line, self.wrapping,
        )  # fmt: skip
        if capture:
            child.capture = []
        elif self.capture is not None:
            child.capture = self.capture
        return child

    def child(
        self,
        source: str,
        name: str,
        args: list[str],
        extra: Mapping[str, str],
        *,
        wrapping: Wrapping,
        offset: int = 0,
    ) -> Frame:
        """A new shell (a script, ``bash -c``): the exported variables plus ``extra`` (prefix
        assignments), ``args`` as ``$1 ...`` and ``name`` as ``$0``; lines cited from
        ``source`` after ``offset``."""
        kept = {n: v for n, v in self.vars.items() if n in self.exported}
        unknown = {n for n in self.unknown if n in kept or n not in self.vars}
        child = Frame(self.shared, source, name, kept, set(kept), unknown)
        for key, value in extra.items():
            child.vars[key] = value
            child.exported.add(key)
            if UNKNOWN in value:
                child.unknown.add(key)
            else:
                child.unknown.discard(key)
        child.args, child.cwd, child.offset, child.wrapping = list(args), self.cwd, offset, wrapping
        return child

    def label(self, path: str) -> str:
        """How a file is cited: relative to the job's directory when inside it."""
        work = self.shared.launch.work_dir
        if work and path.startswith(work.rstrip("/") + "/"):
            return path[len(work.rstrip("/")) + 1 :]
        return path

    def is_script(self, path: str) -> bool:
        if not path or path.endswith(".py"):
            return False
        base = posixpath.basename(path)
        if not (base.endswith(SCRIPT_SUFFIXES) or ("/" in path and "." not in base)):
            return False
        return self.shared.exists(resolve_path(path, self.cwd))

    def enter(self, what: str) -> bool:
        if self.shared.depth >= MAX_DEPTH:
            self.note(f"{what} not followed: scripts nested deeper than {MAX_DEPTH}")
            return False
        return True

    # --- running -----------------------------------------------------------------------
    def run_text(self, text: str) -> None:
        """Interpret ``text`` in this frame (a script's body)."""
        if len(text) > MAX_SCRIPT_CHARS:
            self.note(f"script longer than {MAX_SCRIPT_CHARS:,} characters; the rest is ignored")
            text = text[:MAX_SCRIPT_CHARS]
        tree, notes = self.shared.parse(text)
        for note in notes:
            self.shared.note(f"{self.source}: {note}")
        with contextlib.suppress(ScriptExit, FunctionReturn, LoopJump):  # each ends the script
            self.run(tree)

    def run(self, node: Node) -> bool | None:
        """Interpret ``node``; its exit status (None: not known)."""
        if isinstance(node, Simple):
            return self.simple(node)
        if isinstance(node, Seq):
            status: bool | None = True
            for item in node.items:
                status = self.run(item)
            return status
        if isinstance(node, AndOr):
            status = self.run(node.first)
            for op, item in node.rest:
                if (op == "&&" and status is not False) or (op == "||" and status is False):
                    status = self.run(item)
            return status
        if isinstance(node, Pipeline):
            return self.pipeline(node)
        if isinstance(node, If):
            return self.if_clause(node)
        if isinstance(node, For):
            return self.for_clause(node)
        if isinstance(node, While):
            return self.while_clause(node)
        if isinstance(node, Case):
            return self.case_clause(node)
        if isinstance(node, Group):
            return (self.copy() if node.subshell else self).run(node.body)
        if isinstance(node, FuncDef):
            self.functions[node.name] = node.body
            return True
        if isinstance(node, TestCmd):
            self.line = node.line
            return self.double_test(node.words)
        if isinstance(node, ArithCmd):
            self.line = node.line
            self.expander.unknown = False
            value = self.expander.arithmetic(node.expression)
            return None if value is None else value != 0
        return None

    def pipeline(self, node: Pipeline) -> bool | None:
        status = self.run(node.commands[0])
        if len(node.commands) > 1 and self.capture is not None:
            self.capture_unknown = True
        if node.negated:
            return None if status is None else not status
        return status

    def decide(self, cond: Seq, line: int, what: str) -> bool | None:
        status = self.run(cond)
        if status is None:
            self.line = line
            self.note(f"{what} condition not decided by the script; its branch is taken")
        return status

    def if_clause(self, node: If) -> bool | None:
        self.line = node.line
        for cond, body in node.branches:
            status = self.decide(cond, node.line, "'if'")
            if status is not False:
                return self.run(body)
        if node.orelse is not None:
            return self.run(node.orelse)
        return True

    def loop_body(self, body: Seq) -> bool:
        """Run one iteration; False when ``break`` ends the loop."""
        try:
            self.run(body)
        except LoopJump as jump:
            if jump.levels > 1:
                raise LoopJump(jump.kind, jump.levels - 1) from None
            return jump.kind == "continue"
        return True

    def for_clause(self, node: For) -> bool | None:
        self.line = node.line
        self.expander.unknown = False
        items = self.expander.words(node.words) if node.words is not None else list(self.args)
        if len(items) > MAX_LOOP_ITERATIONS:
            self.note(f"'for' over {len(items)} words: only the first {MAX_LOOP_ITERATIONS}")
            items = items[:MAX_LOOP_ITERATIONS]
        for item in items:
            self.set_var(node.var, item)
            if not self.loop_body(node.body):
                break
        return True

    def while_clause(self, node: While) -> bool | None:
        self.line = node.line
        forever = (
            len(node.cond.items) == 1
            and isinstance(node.cond.items[0], Simple)
            and (node.cond.items[0].words in {("true",), (":",)})
        )
        for count in range(MAX_LOOP_ITERATIONS):
            status = self.run(node.cond)
            if node.until and status is not None:
                status = not status
            if status is None:
                self.note("loop condition not decided by the script; the loop ends there")
                return True
            if not status:
                return True
            if not self.loop_body(node.body):
                return True
            if forever:
                self.note("endless loop: its body is read once")
                return True
            if count == MAX_LOOP_ITERATIONS - 1:
                self.note(f"loop stopped after {MAX_LOOP_ITERATIONS} iterations")
        return True

    def case_clause(self, node: Case) -> bool | None:
        from planner.launch.shell_expand import pattern_match  # noqa: PLC0415

        self.line = node.line
        self.expander.unknown = False
        word = self.expander.string(node.word)
        if self.expander.unknown:
            self.note("'case' word not known before the job runs; only a catch-all arm matches")
        for patterns, body in node.arms:
            for pattern in patterns:
                if pattern_match(word, self.expander.pattern(pattern)):
                    return self.run(body)
        return True

    def double_test(self, raw: tuple[str, ...]) -> bool | None:
        self.expander.unknown = False
        words = [self.expander.string(word) for word in raw]
        if self.expander.unknown:
            return None
        unquoted = [not any(q in word for q in "'\"\\") for word in raw]
        return evaluate_test(words, self.test_exists, double=True, patterns=unquoted)

    def test_exists(self, path: str) -> bool:
        return self.shared.exists(resolve_path(path, self.cwd))

    # --- simple commands ---------------------------------------------------------------
    def assign_value(self, assign: Assign) -> tuple[Value, bool]:
        self.expander.unknown = False
        if assign.items is not None:
            value: Value = self.expander.words(assign.items)
        else:
            value = self.expander.string(assign.value or "")
        return value, self.expander.unknown

    def apply_assign(self, assign: Assign) -> None:
        value, unknown = self.assign_value(assign)
        current = self.vars.get(assign.name)
        if assign.index is not None:
            self.expander.unknown = False
            position = self.expander.arithmetic(assign.index)
            items = list(current) if isinstance(current, list) else ([current] if current else [])
            if position is None or not 0 <= position < MAX_LOOP_ITERATIONS:
                return
            items.extend([""] * (position + 1 - len(items)))
            items[position] = value if isinstance(value, str) else " ".join(value)
            value = items
        elif assign.append:
            if isinstance(value, list):
                before = [current] if isinstance(current, str) else list(current or [])
                value = before + value
            else:
                value = (current if isinstance(current, str) else "") + value
        self.set_var(assign.name, value, unknown=unknown)

    def simple(self, node: Simple) -> bool | None:
        from planner.launch.shell_builtins import BUILTINS, DECLARATIONS  # noqa: PLC0415

        self.shared.tick()
        self.line = node.line
        self.expander.unknown = False
        if node.words and node.words[0] in DECLARATIONS:
            words = [node.words[0], *self.declaration_words(node.words[1:])]
        else:
            words = self.expander.words(node.words)
        self.words_unknown = self.expander.unknown
        if not words:
            for assign in node.assigns:
                self.apply_assign(assign)
            return True
        prefix: dict[str, str] = {}
        for assign in node.assigns:
            value, _ = self.assign_value(assign)
            prefix[assign.name] = value if isinstance(value, str) else " ".join(value)
        command = words[0]
        if command in self.functions:
            return self.call(command, words[1:])
        builtin = BUILTINS.get(command)
        if builtin is not None:
            return builtin(self, words, prefix, node)
        if self.capture is not None:
            self.capture_unknown = True
            return None
        from planner.launch.shell_follow import run_command  # noqa: PLC0415 (cycle)

        return run_command(self, words, prefix, node.line)

    def declaration_words(self, raw: tuple[str, ...]) -> list[str]:
        out: list[str] = []
        for word in raw:
            if "=" in word and not word.startswith("-"):
                out.append(word)  # expanded by the builtin, without field splitting
            else:
                out.extend(self.expander.words([word]))
        return out

    def call(self, name: str, args: list[str]) -> bool | None:
        if self.shared.depth >= MAX_DEPTH:
            self.note(f"function {name} not called: calls nested deeper than {MAX_DEPTH}")
            return None
        saved = self.args
        self.args = list(args)
        self.locals.append({})
        self.shared.depth += 1
        try:
            return self.run(self.functions[name])
        except FunctionReturn:
            return True
        finally:
            self.shared.depth -= 1
            for var, old in self.locals.pop().items():
                if old is None:
                    self.vars.pop(var, None)
                else:
                    self.vars[var] = old
            self.args = saved


def run_guarded(frame: Frame, text: str) -> None:
    """Interpret ``text`` in ``frame``; bounds reached end it with a note."""
    try:
        frame.run_text(text)
    except Stop:
        pass
    except ExpansionLimitError as exc:
        frame.shared.allocation.note(f"interpretation stopped: {exc}")
    except RecursionError:
        frame.shared.allocation.note("interpretation stopped: the script nests too deep")
