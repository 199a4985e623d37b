"""Bash arithmetic (``$(( ))``, ``(( ))``, array indices) on 64-bit signed integers.

Operators, lowest precedence first: ``,``; ``= += -= *= /= %=``; ``?:``; ``||``; ``&&``; ``|``;
``^``; ``&``; ``== !=``; ``< > <= >=``; ``<< >>``; ``+ -``; ``* / %``; ``**``; unary
``! ~ + -``; ``++`` / ``--``. Numbers: decimal, ``0x`` hex, ``0`` octal, ``base#digits``.
A variable's value is itself evaluated as an expression (at most :data:`_MAX_DEPTH` levels);
an unset or empty one is 0. Division by zero, a bad token or an unknown variable raise
:class:`ArithError`. Nothing is executed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["ArithError", "evaluate_arithmetic"]

_MAX_TEXT = 4096
_MAX_DEPTH = 64
_TOKEN = re.compile(
    r"\s*(?:(?P<num>0[xX][0-9A-Fa-f]+|\d+#[0-9A-Za-z@_]+|\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>\*\*=?|<<=|>>=|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|[-+*/%<>=!~&|^?:(),]))"
)
_BINARY = {
    "||": 3, "&&": 4, "|": 5, "^": 6, "&": 7, "==": 8, "!=": 8, "<": 9, ">": 9, "<=": 9,
    ">=": 9, "<<": 10, ">>": 10, "+": 11, "-": 11, "*": 12, "/": 12, "%": 12, "**": 13,
}  # fmt: skip
_ASSIGNMENTS = {"=", "+=", "-=", "*=", "/=", "%=", "**=", "<<=", ">>=", "&=", "|=", "^="}


class ArithError(Exception):
    """An expression that cannot be evaluated; ``unknown``: because a value is unknown."""

    def __init__(self, message: str, *, unknown: bool = False) -> None:
        super().__init__(message)
        self.unknown = unknown


def _wrap(value: int) -> int:
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass(slots=True)
class _Evaluator:
    tokens: list[tuple[str, str]]
    lookup: Callable[[str], str | None]
    assign: Callable[[str, str], None]
    depth: int
    index: int = 0
    skip: int = 0  # > 0 while evaluating a branch whose value is discarded (short circuit)

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.index] if self.index < len(self.tokens) else ("end", "")

    def take(self) -> tuple[str, str]:
        token = self.peek()
        self.index += 1
        return token

    def expect(self, text: str) -> None:
        kind, value = self.take()
        if kind != "op" or value != text:
            raise ArithError(f"expected '{text}'")

    def comma(self, level: int) -> int:
        value = self.assignment(level)
        while self.peek() == ("op", ","):
            self.take()
            value = self.assignment(level)
        return value

    def assignment(self, level: int) -> int:
        if level > _MAX_DEPTH:
            raise ArithError("expression nested too deep")
        kind, name = self.peek()
        following = self.tokens[self.index + 1] if self.index + 1 < len(self.tokens) else None
        if kind == "name" and following and following[0] == "op" and following[1] in _ASSIGNMENTS:
            self.index += 2
            value = self.assignment(level + 1)
            op = following[1]
            if op != "=":
                value = self.apply(op[:-1], self.variable(name), value)
            if not self.skip:
                self.assign(name, str(value))
            return value
        return self.conditional(level)

    def conditional(self, level: int) -> int:
        condition = self.binary(0, level)
        if self.peek() != ("op", "?"):
            return condition
        self.take()
        if not condition:
            self.skip += 1
        first = self.assignment(level + 1)
        if not condition:
            self.skip -= 1
        self.expect(":")
        if condition:
            self.skip += 1
        second = self.assignment(level + 1)
        if condition:
            self.skip -= 1
        return first if condition else second

    def binary(self, minimum: int, level: int) -> int:
        if level > _MAX_DEPTH:
            raise ArithError("expression nested too deep")
        left = self.unary(level + 1)
        while True:
            kind, op = self.peek()
            precedence = _BINARY.get(op) if kind == "op" else None
            if precedence is None or precedence < minimum:
                return left
            self.take()
            if op in {"&&", "||"}:
                short = (op == "&&" and not left) or (op == "||" and left)
                if short:
                    self.skip += 1
                right = self.binary(precedence + 1, level + 1)
                if short:
                    self.skip -= 1
                    left = int(op == "||")
                else:
                    left = int(bool(right))
                continue
            right = self.binary(precedence if op == "**" else precedence + 1, level + 1)
            left = self.apply(op, left, right)

    def apply(self, op: str, left: int, right: int) -> int:
        if op in {"/", "%"}:
            if right == 0:
                if self.skip:
                    return 0
                raise ArithError("division by 0")
            quotient = abs(left) // abs(right) * (1 if (left >= 0) == (right >= 0) else -1)
            return _wrap(quotient if op == "/" else left - quotient * right)
        if op == "**":
            if right < 0:
                raise ArithError("exponent less than 0")
            return _wrap(pow(left, right, 1 << 64))
        table: dict[str, Callable[[int, int], int]] = {
            "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
            "<<": lambda a, b: a << (b & 63), ">>": lambda a, b: a >> (b & 63),
            "<": lambda a, b: int(a < b), ">": lambda a, b: int(a > b),
            "<=": lambda a, b: int(a <= b), ">=": lambda a, b: int(a >= b),
            "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b),
            "&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b,
        }  # fmt: skip
        return _wrap(table[op](left, right))

    def unary(self, level: int) -> int:
        if level > _MAX_DEPTH:
            raise ArithError("expression nested too deep")
        kind, value = self.take()
        if kind == "op":
            if value in {"+", "-", "!", "~"}:
                operand = self.unary(level + 1)
                return {"+": operand, "-": _wrap(-operand), "!": int(not operand),
                        "~": ~operand}[value]  # fmt: skip
            if value in {"++", "--"}:
                name_kind, name = self.take()
                if name_kind != "name":
                    raise ArithError(f"'{value}' needs a variable")
                result = self.variable(name) + (1 if value == "++" else -1)
                if not self.skip:
                    self.assign(name, str(result))
                return result
            if value == "(":
                result = self.comma(level + 1)
                self.expect(")")
                return result
            raise ArithError(f"unexpected '{value}'")
        if kind == "num":
            return _number(value)
        if kind == "name":
            current = self.variable(value)
            after = self.peek()
            if after in {("op", "++"), ("op", "--")}:
                self.take()
                if not self.skip:
                    self.assign(value, str(current + (1 if after[1] == "++" else -1)))
            return current
        raise ArithError("expression ends early")

    def variable(self, name: str) -> int:
        text = self.lookup(name)
        if text is None:
            if self.skip:
                return 0
            raise ArithError(f"${name} is not known", unknown=True)
        text = text.strip()
        if not text:
            return 0
        if re.fullmatch(r"-?\d+", text):
            return _wrap(int(text))
        if self.depth >= 8:
            raise ArithError(f"${name} refers to itself")
        return evaluate_arithmetic(text, self.lookup, self.assign, _depth=self.depth + 1)


def _number(text: str) -> int:
    try:
        if text.lower().startswith("0x"):
            return _wrap(int(text, 16))
        if "#" in text:
            base_text, digits = text.split("#", 1)
            base = int(base_text)
            if not 2 <= base <= 36:
                raise ArithError(f"base {base} not handled")
            return _wrap(int(digits, base))
        if len(text) > 1 and text.startswith("0"):
            return _wrap(int(text, 8))
        return _wrap(int(text))
    except ValueError as exc:
        raise ArithError(f"bad number '{text}'") from exc


def evaluate_arithmetic(
    text: str,
    lookup: Callable[[str], str | None],
    assign: Callable[[str, str], None],
    *,
    _depth: int = 0,
) -> int:
    """The value of ``text`` (no ``$`` left in it). ``lookup(name)``: a variable's text, ""
    when unset, None when unknown; ``assign(name, value)`` for ``=``, ``+=``, ``++``."""
    if len(text) > _MAX_TEXT:
        raise ArithError(f"expression longer than {_MAX_TEXT} characters")
    tokens: list[tuple[str, str]] = []
    position = 0
    stripped = text.rstrip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None or match.end() == position:
            raise ArithError(f"unexpected '{stripped[position : position + 10].strip()}'")
        kind = match.lastgroup or "op"
        tokens.append((kind, match.group(kind)))
        position = match.end()
    if not tokens:
        return 0
    evaluator = _Evaluator(tokens, lookup, assign, _depth)
    value = evaluator.comma(0)
    if evaluator.index < len(tokens):
        raise ArithError(f"unexpected '{tokens[evaluator.index][1]}'")
    return value
