"""``test`` / ``[ ]`` / ``[[ ]]`` conditions of launch scripts, decided where the script's
own values decide them.

Operators: ``!``, ``-a`` / ``&&``, ``-o`` / ``||``, ``( )``; strings ``-z -n = == != < >``
(``[[ == ]]`` / ``!=`` with a glob pattern on the right); integers ``-eq -ne -lt -le -gt -ge``;
files ``-f -e -s -r -x`` through the job's files. Anything else (``-d``, ``=~``, ``-v``, an
operand that came from something not evaluated) is undecidable: the result is None.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from planner.launch.shell_expand import pattern_match

__all__ = ["evaluate_test"]

_UNARY_STRING = frozenset({"-z", "-n"})
_UNARY_FILE = frozenset({"-f", "-e", "-s", "-r", "-x", "-w", "-a"})
_UNDECIDABLE_UNARY = frozenset({"-d", "-L", "-h", "-p", "-S", "-b", "-c", "-t", "-v", "-O",
                                "-G", "-N", "-k", "-u", "-g", "-o", "-R"})  # fmt: skip
_INTEGER = {
    "-eq": lambda a, b: a == b, "-ne": lambda a, b: a != b, "-lt": lambda a, b: a < b,
    "-le": lambda a, b: a <= b, "-gt": lambda a, b: a > b, "-ge": lambda a, b: a >= b,
}  # fmt: skip
_STRING = frozenset({"=", "==", "!=", "<", ">"})
_BINARY = _STRING | frozenset(_INTEGER) | frozenset({"=~", "-nt", "-ot", "-ef"})


@dataclass(slots=True)
class _Test:
    words: Sequence[str]
    patterns: Sequence[bool]  # word i is an unquoted pattern (``[[ x == p* ]]``)
    exists: Callable[[str], bool]
    double: bool
    index: int = 0

    def peek(self) -> str | None:
        return self.words[self.index] if self.index < len(self.words) else None

    def disjunction(self) -> bool | None:
        left = self.conjunction()
        while self.peek() in ({"||"} if self.double else {"-o"}):
            self.index += 1
            right = self.conjunction()
            left = _or(left, right)
        return left

    def conjunction(self) -> bool | None:
        left = self.negation()
        while self.peek() in ({"&&"} if self.double else {"-a"}):
            self.index += 1
            right = self.negation()
            left = _and(left, right)
        return left

    def negation(self) -> bool | None:
        if self.peek() == "!" and self.index + 1 < len(self.words):
            self.index += 1
            value = self.negation()
            return None if value is None else not value
        return self.primary()

    def primary(self) -> bool | None:
        word = self.peek()
        if word is None:
            return False
        if word == "(":
            self.index += 1
            value = self.disjunction()
            if self.peek() == ")":
                self.index += 1
            return value
        following = self.words[self.index + 1] if self.index + 1 < len(self.words) else None
        if following in _BINARY and self.index + 2 < len(self.words):
            right_index = self.index + 2
            right = self.words[right_index]
            self.index += 3
            return self.binary(word, following, right, self.patterns[right_index])
        if word in _UNARY_STRING | _UNARY_FILE | _UNDECIDABLE_UNARY and following is not None:
            self.index += 2
            if word == "-z":
                return following == ""
            if word == "-n":
                return following != ""
            if word in _UNARY_FILE:
                return self.exists(following) if following else False
            return None
        self.index += 1
        return word != ""

    def binary(self, left: str, op: str, right: str, pattern: bool) -> bool | None:
        if op in _INTEGER:
            a, b = _integer(left), _integer(right)
            if a is None or b is None:
                return None
            return bool(_INTEGER[op](a, b))
        if op in {"=", "==", "!="}:
            same = pattern_match(left, right) if (self.double and pattern) else left == right
            return same if op != "!=" else not same
        if op == "<":
            return left < right
        if op == ">":
            return left > right
        return None


def _integer(text: str) -> int | None:
    text = text.strip()
    return int(text) if re.fullmatch(r"-?\d{1,18}", text) else None


def _or(left: bool | None, right: bool | None) -> bool | None:
    if left is True or right is True:
        return True
    if left is None or right is None:
        return None
    return False


def _and(left: bool | None, right: bool | None) -> bool | None:
    if left is False or right is False:
        return False
    if left is None or right is None:
        return None
    return True


def evaluate_test(
    words: Sequence[str],
    exists: Callable[[str], bool],
    *,
    double: bool = False,
    patterns: Sequence[bool] | None = None,
) -> bool | None:
    """The truth of a ``test`` expression (``words`` expanded, without ``[`` / ``]``), None
    when the script's values do not decide it. ``double``: ``[[ ]]`` syntax; ``patterns[i]``:
    word i was written unquoted (a glob on the right of ``==``); ``exists(path)`` checks a
    file of the job."""
    flags = list(patterns) if patterns is not None else [False] * len(words)
    test = _Test(list(words), flags, exists, double)
    value = test.disjunction()
    if test.index < len(words):
        return None
    return value
