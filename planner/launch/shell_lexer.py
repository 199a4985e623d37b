"""Tokens of the bash subset of launch scripts (used by :mod:`planner.launch.shell_syntax`).

Words are kept raw (quotes and ``$`` expansions as written, including ``NAME=(...)`` array
values); operators, newlines and ``(( ))`` arithmetic are their own tokens; here-document bodies
are read at the end of the line that names them. The scanners for ``$( )``, ``${ }``, quotes
and backticks (:func:`find_close`, :func:`dollar_end`) are shared with word expansion. Bounded:
:data:`MAX_TOKENS` tokens per script, :data:`MAX_NESTING` nested quotes / substitutions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "MAX_NESTING",
    "MAX_TOKENS",
    "REDIRECTS",
    "HereDoc",
    "ParseError",
    "Token",
    "dollar_end",
    "find_close",
    "tokenize",
]

MAX_TOKENS = 50_000
"""Most tokens read from one script; the rest is dropped with a note."""
MAX_NESTING = 24
"""Deepest nesting of compound commands and ``$( )`` / quotes the parser follows."""

_PLAIN = re.compile(r"[^\s;&|<>()'\"\\$`]+")
_ARRAY_START = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_OPERATORS = (
    "<<<", "<<-", ";;&", "&>>", "&&", "||", ";;", ";&", "|&", "<<", ">>", ">&", "<&",
    ">|", "&>", "<>", "|", "&", ";", "(", ")", "<", ">",
)  # fmt: skip
_OPERATOR = re.compile("|".join(re.escape(op) for op in _OPERATORS))
_BLANKS = re.compile(r"[ \t\r]+")
REDIRECTS = frozenset({"<<<", "<<-", "&>>", "<<", ">>", ">&", "<&", ">|", "&>", "<>", "<", ">"})


class ParseError(Exception):
    """A statement the parser does not accept (internal: turned into a note)."""


@dataclass(slots=True)
class HereDoc:
    """A here-document's body (filled when the lexer reaches the lines after its command);
    ``quoted``: the delimiter was quoted, so the body is not expanded."""

    delimiter: str
    strip_tabs: bool
    quoted: bool
    body: str = ""


@dataclass(frozen=True, slots=True)
class Token:
    """One token: ``kind`` is ``word``, ``op``, ``newline``, ``arith`` or ``eof``."""

    kind: str  # word | op | newline | arith | eof
    text: str
    line: int
    heredoc: HereDoc | None = None


@dataclass(slots=True)
class _Lexer:
    text: str
    notes: list[str]
    pos: int = 0
    line: int = 1
    tokens: list[Token] = field(default_factory=list)
    pending: list[HereDoc] = field(default_factory=list)

    def run(self) -> list[Token]:
        text = self.text
        while self.pos < len(text):
            if len(self.tokens) >= MAX_TOKENS:
                self.notes.append(f"script longer than {MAX_TOKENS:,} tokens: the rest is ignored")
                break
            char = text[self.pos]
            if char in " \t\r":
                blanks = _BLANKS.match(text, self.pos)
                self.pos = blanks.end() if blanks else self.pos + 1
            elif char == "\\" and text.startswith("\\\n", self.pos):
                self.pos += 2
                self.line += 1
            elif char == "#":
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            elif char == "\n":
                self.tokens.append(Token("newline", "\n", self.line))
                self.pos += 1
                self.line += 1
                self._read_heredocs()
            elif text.startswith("((", self.pos) and self._at_command_start():
                start_line = self.line
                end = find_close(text, self.pos + 2, "((", 0)
                inner = text[self.pos + 2 : end - 2 if end >= 2 else end]
                self.line += text.count("\n", self.pos, end)
                self.pos = end
                self.tokens.append(Token("arith", inner, start_line))
            elif text.startswith(("<(", ">("), self.pos):  # process substitution: one word
                start, start_line = self.pos, self.line
                end = find_close(text, self.pos + 2, "(", 0)
                self.line += text.count("\n", self.pos, end)
                self.pos = end
                self.tokens.append(Token("word", text[start:end], start_line))
            elif (op := self._operator()) is not None:
                self._add_operator(op, "")
            else:
                self._word()
        self.tokens.append(Token("eof", "", self.line))
        return self.tokens

    def _at_command_start(self) -> bool:
        if not self.tokens:
            return True
        last = self.tokens[-1]
        if last.kind == "word":
            return last.text in {
                "for",
                "do",
                "then",
                "else",
                "elif",
                "if",
                "while",
                "until",
                "{",
                "!",
            }
        return last.kind == "newline" or (last.kind == "op" and last.text not in REDIRECTS)

    def _operator(self) -> str | None:
        match = _OPERATOR.match(self.text, self.pos)
        return match.group(0) if match else None

    def _add_operator(self, op: str, fd: str) -> None:
        self.pos += len(op)
        self.tokens.append(Token("op", fd + op, self.line))
        if op in {"<<", "<<-"}:
            while self.pos < len(self.text) and self.text[self.pos] in " \t":
                self.pos += 1
            start = self.pos
            self._scan_word()
            raw = self.text[start : self.pos]
            quoted = any(q in raw for q in "'\"\\")
            delimiter = re.sub(r"['\"\\]", "", raw)
            heredoc = HereDoc(delimiter, op == "<<-", quoted)
            self.pending.append(heredoc)
            self.tokens.append(Token("word", raw, self.line, heredoc))

    def _word(self) -> None:
        start, line = self.pos, self.line
        self._scan_word()
        raw = self.text[start : self.pos]
        if raw.isdigit() and self.pos < len(self.text) and self.text[self.pos] in "<>":
            op = self._operator()
            if op is not None:
                self._add_operator(op, raw)
                return
        if not raw:  # a stray character no rule takes: skip it
            self.pos += 1
            return
        self.tokens.append(Token("word", raw, line))

    def _scan_word(self) -> None:
        text, n = self.text, len(self.text)
        start = self.pos
        while self.pos < n:
            match = _PLAIN.match(text, self.pos)
            if match:
                self.pos = match.end()
                continue
            char = text[self.pos]
            if char in " \t\r\n;&|<>)":
                return
            if char == "(":
                if not _ARRAY_START.fullmatch(text[start : self.pos]):
                    return
                end = find_close(text, self.pos + 1, "(", 0)
            elif char == "'":
                end = text.find("'", self.pos + 1)
                end = n if end < 0 else end + 1
            elif char == '"':
                end = find_close(text, self.pos + 1, '"', 0)
            elif char == "\\":
                end = min(n, self.pos + 2)
            elif char == "`":
                end = find_close(text, self.pos + 1, "`", 0)
            else:  # "$"
                end = dollar_end(text, self.pos)
            self.line += text.count("\n", self.pos, end)
            self.pos = end

    def _read_heredocs(self) -> None:
        for heredoc in self.pending:
            lines: list[str] = []
            while self.pos < len(self.text):
                end = self.text.find("\n", self.pos)
                end = len(self.text) if end < 0 else end
                row = self.text[self.pos : end]
                self.pos = min(len(self.text), end + 1)
                self.line += 1
                check = row.lstrip("\t") if heredoc.strip_tabs else row
                if check == heredoc.delimiter:
                    break
                lines.append(check)
            heredoc.body = "".join(f"{row}\n" for row in lines)
        self.pending.clear()


def dollar_end(text: str, pos: int, depth: int = 0) -> int:
    """End (exclusive) of the ``$`` expansion starting at ``pos``."""
    n = len(text)
    if text.startswith("$((", pos):
        return find_close(text, pos + 3, "((", depth + 1)
    if text.startswith("$(", pos):
        return find_close(text, pos + 2, "(", depth + 1)
    if text.startswith("${", pos):
        return find_close(text, pos + 2, "{", depth + 1)
    if text.startswith("$'", pos):
        index = pos + 2
        while index < n and text[index] != "'":
            index += 2 if text[index] == "\\" else 1
        return min(n, index + 1)
    if text.startswith('$"', pos):
        return find_close(text, pos + 2, '"', depth + 1)
    return pos + 1


def find_close(text: str, pos: int, opener: str, depth: int) -> int:
    """Index just past the close of ``opener`` (``(``, ``((``, ``{``, ``"``, `````), skipping
    nested quotes and expansions; the text's end when it is never closed."""
    if depth > MAX_NESTING:
        raise ParseError("quotes or substitutions nested too deep")
    if opener in {'"', "`"}:
        return _close_quote(text, pos, opener, depth)
    return _close_bracket(text, pos, opener, depth)


def _close_quote(text: str, pos: int, opener: str, depth: int) -> int:
    """The close of a double quote (expansions and backquotes inside it skipped) or of a
    backquote (only escapes skipped)."""
    n = len(text)
    index = pos
    while index < n:
        char = text[index]
        if char == "\\":
            index += 2
        elif char == opener:
            return index + 1
        elif opener == '"' and char == "$":
            index = dollar_end(text, index, depth) if index + 1 < n else index + 1
        elif opener == '"' and char == "`":
            index = find_close(text, index + 1, "`", depth + 1)
        else:
            index += 1
    return n


def _close_bracket(text: str, pos: int, opener: str, depth: int) -> int:
    """The close of ``(``, ``((`` or ``{``, counting nested brackets of its kind and skipping
    quotes, expansions and (outside braces) comments."""
    n = len(text)
    level = 1
    index = pos
    open_char, close_char = ("{", "}") if opener == "{" else ("(", ")")
    while index < n:
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == "'" and opener != "{":
            end = text.find("'", index + 1)
            index = n if end < 0 else end + 1
            continue
        if char == '"':
            index = find_close(text, index + 1, '"', depth + 1)
            continue
        if char == "$" and index + 1 < n and text[index + 1] in "({":
            index = dollar_end(text, index, depth)
            continue
        if char == open_char:
            level += 1
        elif char == close_char:
            level -= 1
            if level == 0:
                double = opener == "((" and text.startswith("))", index)
                return index + 2 if double else index + 1
        elif opener == "(" and char == "#" and (index == 0 or text[index - 1] in " \t\n"):
            end = text.find("\n", index)
            index = n if end < 0 else end
            continue
        index += 1
    return n


def tokenize(text: str, notes: list[str]) -> list[Token]:
    """The tokens of ``text`` (ending with an ``eof`` token); raises :class:`ParseError` when
    quotes or substitutions nest deeper than :data:`MAX_NESTING`."""
    return _Lexer(text, notes).run()
