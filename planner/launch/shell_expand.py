"""Expansion of the raw words of a parsed launch script, as bash expands them, bounded.

Handled: quoting (``'…'``, ``"…"``, ``$'…'``, backslashes), ``$X`` / ``${X}`` and the operators
``:-  -  :=  =  :+  +  :?  #  ##  %  %%  /  //  :off:len  ^^  ,,`` , ``${#X}``, ``${!X}``,
arrays (``${A[@]}``, ``"${A[@]}"``, ``${A[i]}``, ``${#A[@]}``), positional parameters (``$1``,
``${10}``, ``$@``, ``"$@"``, ``$*``, ``$#``), ``$((…))`` (see :mod:`planner.launch.shell_arith`),
``$(…)`` / backticks (through :meth:`Scope.substitute`, which evaluates only trivial forms),
brace lists ``{a,b}`` / ``{1..4}`` (at most :data:`MAX_BRACE_WORDS` words) and field splitting
on ``IFS``. Nothing is globbed. A value that comes from something unknown (a command the
interpreter does not run, a variable set from one) marks the expansion ``unknown``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Protocol

from planner.launch.shell_arith import ArithError, evaluate_arithmetic
from planner.launch.shell_words import MAX_BRACE_WORDS, Segment, brace_words, segments, segments_dq

__all__ = [
    "MAX_BRACE_WORDS",
    "MAX_EXPANSION_CHARS",
    "MAX_WORD_CHARS",
    "UNKNOWN",
    "Expander",
    "Scope",
    "ifs_separator",
    "known",
    "pattern_match",
]

MAX_WORD_CHARS = 64 * 1024
"""Longest single expanded word; longer ones are cut with a note."""
MAX_EXPANSION_CHARS = 8 * 1024 * 1024
"""Most characters all expansions of one description may produce."""
_MAX_PATTERN = 512
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLAIN_WORD = re.compile(r"[^$'\"\\`{}*?\[~]*")

Value = str | list[str]

UNKNOWN = "\ue000"
"""Stands for a value that exists when the job runs but is not known here (the output of a
command not run, a job variable such as ``SLURM_JOB_ID``): it keeps the word it is in (so
``--jobid $SLURM_JOB_ID bash -c ...`` keeps its shape) and is removed from what the plan
reports (:func:`known`)."""


def known(text: str) -> str:
    """``text`` without the :data:`UNKNOWN` marks."""
    return text.replace(UNKNOWN, "")


class Scope(Protocol):
    """What expansion needs from the interpreter."""

    def lookup(self, name: str) -> Value | None:
        """A variable's value (a list for an array), None when unset."""
        ...

    def assign(self, name: str, value: str) -> None:
        """Set a shell variable (``${X:=d}``, arithmetic assignment)."""
        ...

    def is_unknown(self, name: str) -> bool:
        """True when the variable holds the output of something not evaluated."""
        ...

    def positional(self) -> list[str]:
        """``$1 ...``."""
        ...

    def script_name(self) -> str:
        """``$0``."""
        ...

    def substitute(self, text: str) -> str | None:
        """The output of ``$(text)``; None when it cannot be known without running it."""
        ...

    def note(self, text: str) -> None:
        """Record a note for the description."""
        ...


def pattern_match(text: str, pattern: str) -> bool:
    """``fnmatch``-style match of a bash glob pattern (bounded length; longer: equality)."""
    if len(pattern) > _MAX_PATTERN or len(text) > MAX_WORD_CHARS:
        return text == pattern
    return fnmatchcase(text, pattern)


@dataclass(slots=True)
class _Fields:
    done: list[str] = field(default_factory=list)
    current: list[str] = field(default_factory=list)
    has: bool = False

    def add(self, text: str, quoted: bool) -> None:
        self.current.append(text)
        if text or quoted:
            self.has = True

    def finish(self) -> None:
        if self.has or any(self.current):
            self.done.append("".join(self.current))
        self.current = []
        self.has = False


@dataclass(slots=True)
class Expander:
    """Expands raw words against ``scope``; ``unknown`` is set when a value came from
    something not evaluated (reset it before an expansion whose certainty matters)."""

    scope: Scope
    unknown: bool = False
    spent: int = 0

    def words(self, raws: Sequence[str]) -> list[str]:
        """Command words: brace expansion, parameter/command/arithmetic expansion, field
        splitting, quote removal."""
        out: list[str] = []
        for raw in raws:
            if _PLAIN_WORD.fullmatch(raw):
                out.append(self._charge(raw))
                continue
            for item in self._braces(raw):
                out.extend(self._expand(item, split=True))
        return out

    def string(self, raw: str) -> str:
        """One word without field splitting (assignment values, ``[[ ]]`` operands, case
        words, redirection targets)."""
        return " ".join(self._expand(raw, split=False))

    def heredoc(self, body: str) -> str:
        """A here-document body: expanded as inside double quotes (``\\`` escapes only
        ``$ ` \\`` and newline)."""
        segments = segments_dq(body, heredoc=True)
        fields = _Fields()
        for seg in segments:
            self._emit(seg, fields, split=False)
        return self._charge("".join(fields.current))

    def pattern(self, raw: str) -> str:
        """A glob pattern: quoted parts are escaped so they match literally."""
        out: list[str] = []
        for seg in segments(raw):
            if seg.kind == "text":
                out.append(_escape_glob(seg.text) if seg.quoted else seg.text)
            elif seg.kind != "mark":
                fields = _Fields()
                self._emit(seg, fields, split=False)
                out.append(_escape_glob("".join(fields.current)))
        return "".join(out)

    def arithmetic(self, text: str) -> int | None:
        """The value of an arithmetic expression (its ``$`` expansions done first); None when
        it is unknown or not valid."""
        expanded = self.heredoc(text)
        if UNKNOWN in expanded:
            self.unknown = True
            return None
        try:
            return evaluate_arithmetic(expanded, self._arith_lookup, self.scope.assign)
        except ArithError as exc:
            if not exc.unknown:
                self.scope.note(f"arithmetic '{text.strip()[:60]}' not evaluated: {exc}")
            self.unknown = True
            return None

    def _arith_lookup(self, name: str) -> str | None:
        if self.scope.is_unknown(name):
            return None
        value = self.scope.lookup(name)
        if isinstance(value, list):
            return value[0] if value else ""
        return value or ""

    def _charge(self, text: str) -> str:
        if len(text) > MAX_WORD_CHARS:
            self.scope.note(f"a word longer than {MAX_WORD_CHARS:,} characters was cut")
            text = text[:MAX_WORD_CHARS]
        self.spent += len(text)
        if self.spent > MAX_EXPANSION_CHARS:
            raise ExpansionLimitError(f"expansions exceed {MAX_EXPANSION_CHARS:,} characters")
        return text

    def _braces(self, raw: str) -> list[str]:
        """Brace expansion of ``raw``; left as written (with a note) past
        :data:`MAX_BRACE_WORDS` words."""
        out = brace_words(raw)
        if out is None:
            self.scope.note(f"brace expansion in '{raw[:40]}' left as written (too many words)")
            return [raw]
        return out

    def _expand(self, raw: str, *, split: bool) -> list[str]:
        fields = _Fields()
        for seg in segments(raw):
            self._emit(seg, fields, split=split)
        fields.finish()
        return [self._charge(text) for text in fields.done]

    def _emit(self, seg: Segment, fields: _Fields, *, split: bool) -> None:
        if seg.kind == "mark":
            fields.has = True
            return
        if seg.kind == "text":
            fields.add(seg.text, seg.quoted)
            return
        value: Value
        before, self.unknown = self.unknown, False
        if seg.kind == "param":
            value = self._param(seg.text, seg.quoted)
        elif seg.kind == "arith":
            number = self.arithmetic(seg.text)
            value = UNKNOWN if number is None else str(number)
        else:
            output = self.scope.substitute(seg.text)
            if output is None:
                self.unknown = True
                output = UNKNOWN
            value = output.rstrip("\n")
        self.unknown = before or self.unknown
        if isinstance(value, list):
            if seg.quoted:
                for index, item in enumerate(value):
                    if index:
                        fields.finish()
                    fields.add(item, True)
                return
            value = " ".join(value)
        if seg.quoted or not split:
            fields.add(value, seg.quoted)
            return
        self._split_into(value, fields)

    def _split_into(self, value: str, fields: _Fields) -> None:
        ifs = self.scope.lookup("IFS")
        ifs_text = " \t\n" if ifs is None or isinstance(ifs, list) else ifs
        if not ifs_text:
            fields.add(value, False)
            return
        for index, part in enumerate(ifs_separator(ifs_text).split(value)):
            if index:
                fields.finish()
            fields.add(part, False)

    def _param(self, expr: str, quoted: bool) -> Value:
        """The value of ``${expr}`` (``expr`` without the braces)."""
        scope = self.scope
        if expr in {"@", "*"} or expr.startswith(("@:", "*:")):
            args = scope.positional()
            if len(expr) > 1:  # ${@:offset[:length]}, offsets counting $0 as 0
                offset_text, _, length_text = expr[2:].partition(":")
                start = max(0, (self.arithmetic(offset_text) or 0) - 1)
                length = self.arithmetic(length_text) if length_text else None
                args = args[start : None if length is None else start + max(0, length)]
            return list(args) if (expr[0] == "@" or not quoted) else " ".join(args)
        if expr == "#":
            return str(len(scope.positional()))
        if expr in {"?", "-", "_"}:
            return "0" if expr == "?" else ""
        if expr in {"$", "!", "RANDOM", "BASHPID"}:
            self.unknown = True
            return UNKNOWN
        if expr.startswith("#") and len(expr) > 1:
            value = self._lookup(expr[1:])
            if isinstance(value, list):
                return str(len(value)) if expr.endswith(("[@]", "[*]")) else str(len(value[0]))
            return str(len(value or ""))
        if expr.startswith("!") and _NAME.fullmatch(expr[1:]):
            target = self._lookup(expr[1:])
            if isinstance(target, str) and _NAME.fullmatch(target):
                found = self._lookup(target)
                return found if found is not None else ""
            return ""
        name, rest = _split_name(expr)
        if name is None:
            scope.note(f"expansion '${{{expr[:40]}}}' not understood; taken as empty")
            self.unknown = True
            return ""
        value = self._lookup(name)
        if rest:
            return self._operator(name, value, rest, quoted)
        return value if value is not None else ""

    def _lookup(self, name: str) -> Value | None:
        """A variable, ``A[i]``, ``A[@]``, a positional or ``0``."""
        scope = self.scope
        base, _, index = name.partition("[")
        if scope.is_unknown(base):
            self.unknown = True
            if scope.lookup(base) is None:
                return UNKNOWN
        if base.isdigit():
            if base == "0":
                return scope.script_name()
            args = scope.positional()
            position = int(base)
            return args[position - 1] if position <= len(args) else None
        value = scope.lookup(base)
        if not index:
            if isinstance(value, list):
                return value[0] if value else None
            return value
        index = index.rstrip("]")
        items = value if isinstance(value, list) else ([value] if value is not None else [])
        if index in {"@", "*"}:
            return list(items)
        found = self.arithmetic(index)
        if found is None:
            return None
        position = found
        if position < 0:
            position += len(items)
        return items[position] if 0 <= position < len(items) else None

    def _operator(self, name: str, value: Value | None, rest: str, quoted: bool) -> Value:
        text = " ".join(value) if isinstance(value, list) else value
        for op in (":-", ":=", ":+", ":?", "-", "=", "+", "?"):
            if rest.startswith(op):
                word = rest[len(op) :]
                unset = value is None or (op.startswith(":") and not text)
                if op.endswith("+"):
                    return "" if unset else self.string(word)
                if not unset:
                    return value if value is not None else ""
                if op.endswith("?"):
                    self.unknown = True
                    return ""
                default = self.string(word)
                if op.endswith("=") and "[" not in name:
                    self.scope.assign(name, default)
                return default
        subject = text or ""
        if rest.startswith(("##", "#", "%%", "%")):
            op = rest[:2] if rest[:2] in {"##", "%%"} else rest[:1]
            return _trim(subject, self.pattern(rest[len(op) :]), op)
        if rest.startswith("/"):
            return self._replace(subject, rest)
        if rest.startswith(("^^", ",,", "^", ",")):
            return subject.upper() if rest.startswith("^") else subject.lower()
        if rest.startswith(":"):
            offset_text, _, length_text = rest[1:].partition(":")
            offset = self.arithmetic(offset_text) or 0
            start = max(0, len(subject) + offset) if offset < 0 else offset
            if not length_text:
                return subject[start:]
            length = self.arithmetic(length_text) or 0
            end = len(subject) + length if length < 0 else start + length
            return subject[start:end]
        if rest.startswith("@"):
            return subject
        self.scope.note(f"expansion operator '{rest[:20]}' of ${name} not understood")
        self.unknown = True
        return subject

    def _replace(self, subject: str, rest: str) -> str:
        every = rest.startswith("//")
        anchor = rest[1] if rest[1:2] in {"#", "%"} and not every else ""
        body = rest[2:] if every or anchor else rest[1:]
        split = re.search(r"(?<!\\)/", body)
        pattern_raw = body[: split.start()] if split else body
        replacement_raw = body[split.end() :] if split else ""
        pattern = self.pattern(pattern_raw)
        replacement = self.string(replacement_raw)
        if not pattern:
            return subject
        if len(subject) > 4096 or len(pattern) > _MAX_PATTERN:
            return subject
        if anchor == "#":
            for end in range(len(subject), -1, -1):
                if pattern_match(subject[:end], pattern):
                    return replacement + subject[end:]
            return subject
        if anchor == "%":
            for start in range(len(subject) + 1):
                if pattern_match(subject[start:], pattern):
                    return subject[:start] + replacement
            return subject
        out: list[str] = []
        index = 0
        while index < len(subject):
            for end in range(len(subject), index, -1):
                if pattern_match(subject[index:end], pattern):
                    out.append(replacement)
                    index = end
                    break
            else:
                out.append(subject[index])
                index += 1
                continue
            if not every:
                out.append(subject[index:])
                return "".join(out)
        return "".join(out)


@functools.lru_cache(maxsize=16)
def ifs_separator(ifs: str) -> re.Pattern[str]:
    """What separates fields for ``IFS`` (not empty): a run of its white space, or one of its
    other characters with white space around it."""
    white = "".join(c for c in ifs if c in " \t\n")
    other = "".join(c for c in ifs if c not in " \t\n")
    around = f"[{re.escape(white)}]*" if white else ""
    parts = [f"{around}[{re.escape(other)}]{around}"] if other else []
    if white:
        parts.append(f"[{re.escape(white)}]+")
    return re.compile("|".join(parts))


class ExpansionLimitError(Exception):
    """The expansion budget of a description is spent (internal)."""


def _split_name(expr: str) -> tuple[str | None, str]:
    """``name`` (with ``[index]``) and the operator text after it."""
    if expr[:1].isdigit():
        digits = re.match(r"\d+", expr)
        assert digits is not None
        return digits.group(0), expr[digits.end() :]
    match = _NAME.match(expr)
    if match is None:
        return None, ""
    end = match.end()
    if expr[end : end + 1] == "[":
        close = expr.find("]", end)
        if close < 0:
            return None, ""
        end = close + 1
    return expr[:end], expr[end:]


def _trim(subject: str, pattern: str, op: str) -> str:
    if len(subject) > 4096:
        return subject
    if op in {"#", "##"}:
        ends = range(len(subject) + 1) if op == "#" else range(len(subject), -1, -1)
        for end in ends:
            if pattern_match(subject[:end], pattern):
                return subject[end:]
        return subject
    starts = range(len(subject), -1, -1) if op == "%" else range(len(subject) + 1)
    for start in starts:
        if pattern_match(subject[start:], pattern):
            return subject[:start]
    return subject


def _escape_glob(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)
