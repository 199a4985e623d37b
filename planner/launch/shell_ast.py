"""The tree of a parsed launch script (:func:`planner.launch.shell_syntax.parse_script`).

Words stay raw (quotes and ``$`` expansions as written); ``line`` is the 1-based line of a
command's first token in its script.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.launch.shell_lexer import HereDoc

__all__ = [
    "AndOr",
    "ArithCmd",
    "Assign",
    "Case",
    "For",
    "FuncDef",
    "Group",
    "If",
    "Node",
    "Pipeline",
    "Redir",
    "Seq",
    "Simple",
    "TestCmd",
    "While",
]


@dataclass(frozen=True, slots=True)
class Redir:
    """``op`` (``>``, ``>>``, ``<``, ``<<``, ``<<<``, ``2>``, ...) and its raw ``target``."""

    op: str
    target: str
    heredoc: HereDoc | None = None


@dataclass(frozen=True, slots=True)
class Assign:
    """``name[index]+=value`` or ``name=(items)``; ``value`` and ``items`` raw."""

    name: str
    value: str | None = None
    items: tuple[str, ...] | None = None
    index: str | None = None
    append: bool = False


@dataclass(frozen=True, slots=True)
class Simple:
    """One simple command: prefix assignments, words, redirections; ``line`` of its first
    token."""

    assigns: tuple[Assign, ...]
    words: tuple[str, ...]
    redirs: tuple[Redir, ...]
    line: int


@dataclass(frozen=True, slots=True)
class Seq:
    """Commands run one after the other."""

    items: tuple[Node, ...] = ()


@dataclass(frozen=True, slots=True)
class Pipeline:
    """``a | b | c`` (``negated``: ``! a``)."""

    commands: tuple[Node, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class AndOr:
    """``first && b || c``: ``rest`` is ``(operator, command)`` pairs."""

    first: Node
    rest: tuple[tuple[str, Node], ...]


@dataclass(frozen=True, slots=True)
class If:
    """``if c; then b; elif c2; then b2; else e; fi``."""

    branches: tuple[tuple[Seq, Seq], ...]
    orelse: Seq | None
    line: int


@dataclass(frozen=True, slots=True)
class For:
    """``for var in words; do body; done`` (``words`` None: ``in "$@"``)."""

    var: str
    words: tuple[str, ...] | None
    body: Seq
    line: int


@dataclass(frozen=True, slots=True)
class While:
    """``while cond; do body; done`` (``until``: the condition negated)."""

    cond: Seq
    body: Seq
    until: bool
    line: int


@dataclass(frozen=True, slots=True)
class Case:
    """``case word in p1|p2) body;; esac``."""

    word: str
    arms: tuple[tuple[tuple[str, ...], Seq], ...]
    line: int


@dataclass(frozen=True, slots=True)
class Group:
    """``{ body; }`` or, with ``subshell``, ``( body )``."""

    body: Seq
    subshell: bool
    redirs: tuple[Redir, ...] = ()


@dataclass(frozen=True, slots=True)
class FuncDef:
    """``name() { body; }`` or ``function name { body; }``."""

    name: str
    body: Node


@dataclass(frozen=True, slots=True)
class TestCmd:
    """``[[ words ]]`` (operators kept as words)."""

    words: tuple[str, ...]
    line: int


@dataclass(frozen=True, slots=True)
class ArithCmd:
    """``(( expression ))``."""

    expression: str
    line: int


Node = (
    Simple | Seq | Pipeline | AndOr | If | For | While | Case | Group | FuncDef | TestCmd | ArithCmd
)
