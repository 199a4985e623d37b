"""The structure of one raw shell word, for :mod:`planner.launch.shell_expand`.

:func:`segments` splits a word as written into literal text (quoted or not) and the
expansions in it (``$X`` / ``${...}``, ``$(...)`` / backticks, ``$((...))``), with ``"…"``,
``'…'``, ``$'…'`` and backslashes resolved; :func:`segments_dq` does the same for the inside of
double quotes and here-document bodies. :func:`brace_words` performs brace expansion
(``{a,b}``, ``{1..4}``, ``{a..e..2}``), bounded by :data:`MAX_BRACE_WORDS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from planner.launch.shell_lexer import dollar_end, find_close

__all__ = ["MAX_BRACE_WORDS", "Segment", "brace_words", "segments", "segments_dq"]

MAX_BRACE_WORDS = 256
"""Most words one brace expansion may produce; a larger one stays literal."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LITERAL_RUN = re.compile(r"[^\\'\"`$]+")
_LITERAL_RUN_DQ = re.compile(r"[^\\`$]+")
_BRACE = re.compile(r"\{([^{}'\"$\\\s]*)\}")
_SEQUENCE = re.compile(r"(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?")


@dataclass(slots=True)
class Segment:
    """A piece of a word: ``kind`` ``text`` (literal), ``param`` (``text`` is what is inside
    ``${ }``), ``cmd`` (the command of ``$( )``), ``arith`` (the expression of ``$(( ))``) or
    ``mark`` (an empty quoted part: the word exists even when empty); ``quoted``: inside
    quotes (no field splitting)."""

    kind: str  # text | param | cmd | arith | mark
    text: str
    quoted: bool


def brace_words(raw: str) -> list[str] | None:
    """``raw`` with its ``{a,b}`` / ``{1..4}`` groups expanded; None past the bound."""
    words = [raw]
    done: list[str] = []
    while words:
        word = words.pop()
        match = _BRACE.search(word)
        while match is not None and (
            (match.start() > 0 and word[match.start() - 1] == "$")
            or _inside_quotes(word, match.start())
        ):
            match = _BRACE.search(word, match.end())
        items: list[str] = []
        if match is not None:
            inner = match.group(1)
            sequence = _SEQUENCE.fullmatch(inner)
            items = _sequence(sequence) if sequence else inner.split(",") if "," in inner else []
            if sequence and not items:
                return None
        if match is None or not items:
            done.append(word)
            continue
        head, tail = word[: match.start()], word[match.end() :]
        words.extend(head + item + tail for item in reversed(items))
        if len(words) + len(done) > MAX_BRACE_WORDS:
            return None
    return done


def _sequence(match: re.Match[str]) -> list[str]:
    first, last, step_text = match.group(1), match.group(2), match.group(3)
    step = abs(int(step_text)) if step_text else 1
    step = step or 1
    if first.lstrip("-").isdigit() and last.lstrip("-").isdigit():
        a, b = int(first), int(last)
        if abs(b - a) // step + 1 > MAX_BRACE_WORDS:
            return []
        values = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        return [str(v) for v in values]
    if first.isalpha() and last.isalpha():
        a, b = ord(first), ord(last)
        values = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        return [chr(v) for v in values]
    return []


def _inside_quotes(raw: str, position: int) -> bool:
    quote = ""
    index = 0
    while index < position:
        char = raw[index]
        if char == "\\" and quote != "'":
            index += 2
            continue
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        index += 1
    return bool(quote)


_ANSI = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "f": "\f",
         "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}  # fmt: skip


def _ansi_c(body: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        if char != "\\" or index + 1 >= len(body):
            out.append(char)
            index += 1
            continue
        code = body[index + 1]
        if code in _ANSI:
            out.append(_ANSI[code])
            index += 2
        elif code == "x":
            digits = re.match(r"[0-9A-Fa-f]{1,2}", body[index + 2 :])
            out.append(chr(int(digits.group(0), 16)) if digits else "\\x")
            index += 2 + (len(digits.group(0)) if digits else 0)
        elif code in "01234567":
            digits = re.match(r"[0-7]{1,3}", body[index + 1 :])
            assert digits is not None
            out.append(chr(int(digits.group(0), 8)))
            index += 1 + len(digits.group(0))
        else:
            out.append("\\" + code)
            index += 2
    return "".join(out)


def _dollar(raw: str, index: int, quoted: bool) -> tuple[Segment | None, int]:
    """The ``$`` expansion at ``index`` and the index after it (None: a literal ``$``)."""
    nxt = raw[index + 1 : index + 2]
    if raw.startswith("$((", index):
        end = dollar_end(raw, index)
        inner = raw[index + 3 : end - 2] if raw.endswith("))", 0, end) else raw[index + 3 : end]
        return Segment("arith", inner, quoted), end
    if nxt == "(":
        end = dollar_end(raw, index)
        return Segment("cmd", raw[index + 2 : end - 1], quoted), end
    if nxt == "{":
        end = dollar_end(raw, index)
        return Segment("param", raw[index + 2 : end - 1], quoted), end
    if nxt and (nxt.isdigit() or nxt in "@*#?$!-"):
        return Segment("param", nxt, quoted), index + 2
    match = _NAME.match(raw, index + 1)
    if match:
        return Segment("param", match.group(0), quoted), match.end()
    return None, index + 1


def segments(raw: str) -> list[Segment]:
    """A raw word as literal text (quoted or not) and expansions."""
    segments: list[Segment] = []
    index, n = 0, len(raw)
    while index < n:
        char = raw[index]
        if char == "\\":
            if raw.startswith("\\\n", index):
                index += 2
                continue
            segments.append(Segment("text", raw[index + 1 : index + 2], True))
            index += 2
        elif char == "'":
            end = raw.find("'", index + 1)
            end = n if end < 0 else end
            segments.append(Segment("text", raw[index + 1 : end], True))
            index = end + 1
        elif char == '"':
            end = _quote_end(raw, index + 1)
            inner = segments_dq(raw[index + 1 : end])
            if not _only_list(inner):  # "$@" / "${A[@]}" alone may make no word at all
                segments.append(Segment("mark", "", True))
            segments.extend(inner)
            index = end + 1
        elif char == "`":
            end = raw.find("`", index + 1)
            end = n if end < 0 else end
            segments.append(Segment("cmd", raw[index + 1 : end].replace("\\`", "`"), False))
            index = end + 1
        elif char == "$" and raw.startswith("$'", index):
            end = index + 2
            while end < n and raw[end] != "'":
                end += 2 if raw[end] == "\\" else 1
            segments.append(Segment("text", _ansi_c(raw[index + 2 : end]), True))
            index = end + 1
        elif char == "$" and raw.startswith('$"', index):
            end = _quote_end(raw, index + 2)
            segments.append(Segment("mark", "", True))
            segments.extend(segments_dq(raw[index + 2 : end]))
            index = end + 1
        elif char == "$":
            seg, index = _dollar(raw, index, False)
            segments.append(seg or Segment("text", "$", False))
        else:
            match = _LITERAL_RUN.match(raw, index)
            assert match is not None
            segments.append(Segment("text", match.group(0), False))
            index = match.end()
    return segments


def _only_list(segments: list[Segment]) -> bool:
    return (
        len(segments) == 1
        and segments[0].kind == "param"
        and (
            segments[0].text == "@"
            or segments[0].text.startswith("@:")
            or segments[0].text.endswith("[@]")
        )
    )


def _quote_end(raw: str, index: int) -> int:
    return find_close(raw, index, '"', 0) - 1


def segments_dq(raw: str, *, heredoc: bool = False) -> list[Segment]:
    """The inside of ``"…"`` (or a here-document body): everything quoted."""
    segments: list[Segment] = []
    index, n = 0, len(raw)
    escapable = "$`\\\n" if heredoc else '$`\\"\n'
    while index < n:
        char = raw[index]
        if char == "\\" and index + 1 < n and raw[index + 1] in escapable:
            if raw[index + 1] != "\n":
                segments.append(Segment("text", raw[index + 1], True))
            index += 2
        elif char == "`":
            end = raw.find("`", index + 1)
            end = n if end < 0 else end
            segments.append(Segment("cmd", raw[index + 1 : end].replace("\\`", "`"), True))
            index = end + 1
        elif char == "$":
            seg, index = _dollar(raw, index, True)
            segments.append(seg or Segment("text", "$", True))
        else:
            match = _LITERAL_RUN_DQ.match(raw, index)
            end = match.end() if match else index + 1
            segments.append(Segment("text", raw[index:end], True))
            index = end
    return segments
