"""The bash subset of launch scripts, parsed (never run): tokens, then a tree of commands.

:func:`parse_script` turns a script's text into a :class:`Seq` of commands: simple commands
(assignments, words, redirections, here-documents), pipelines, ``&&`` / ``||`` lists,
``if`` / ``for`` / ``while`` / ``until`` / ``case``, ``{ }`` groups, ``( )`` subshells, function
definitions, ``[[ ]]`` tests and ``(( ))`` arithmetic. Words stay raw (quotes and ``$``
expansions as written); :mod:`planner.launch.shell_expand` expands them when the interpreter
reaches them. Input is bounded (:mod:`planner.launch.shell_lexer`); a statement that
cannot be parsed is dropped and named in ``notes``, never raised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    Redir,
    Seq,
    Simple,
    TestCmd,
    While,
)
from planner.launch.shell_lexer import MAX_NESTING, REDIRECTS, ParseError, Token, tokenize

__all__ = ["parse_assignment", "parse_script"]


_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?)=")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]*$")
_RESERVED_ENDS = frozenset({"then", "elif", "else", "fi", "do", "done", "esac", "}", "in"})


@dataclass(slots=True)
class _Parser:
    tokens: list[Token]
    notes: list[str]
    index: int = 0
    depth: int = 0

    def peek(self) -> Token:
        return self.tokens[self.index]

    def take(self) -> Token:
        token = self.tokens[self.index]
        if token.kind != "eof":
            self.index += 1
        return token

    def is_word(self, *texts: str) -> bool:
        token = self.peek()
        return token.kind == "word" and token.text in texts

    def is_op(self, *texts: str) -> bool:
        token = self.peek()
        return token.kind == "op" and token.text in texts

    def expect_word(self, text: str) -> None:
        token = self.take()
        if token.kind != "word" or token.text != text:
            raise ParseError(f"line {token.line}: expected '{text}', found '{token.text[:40]}'")

    def skip_newlines(self) -> None:
        while self.peek().kind == "newline" or self.is_op(";"):
            self.take()

    def program(self) -> Seq:
        items: list[Node] = []
        while self.peek().kind != "eof":
            self.skip_newlines()
            if self.peek().kind == "eof":
                break
            start = self.index
            try:
                items.append(self.and_or())
                if self.is_op(";", "&"):
                    self.take()
            except (ParseError, RecursionError) as exc:
                line = self.tokens[start].line
                self.notes.append(f"line {line}: not understood ({exc}); statement skipped")
                self.index = max(self.index, start + 1)
                while self.peek().kind not in {"newline", "eof"}:
                    self.take()
        return Seq(tuple(items))

    def seq(self, ends: frozenset[str]) -> Seq:
        """Commands until a reserved word of ``ends`` (or ``)`` / ``;;``) in command position."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise ParseError("compound commands nested too deep")
        items: list[Node] = []
        while True:
            self.skip_newlines()
            token = self.peek()
            if token.kind == "eof":
                break
            if token.kind == "word" and token.text in ends:
                break
            if token.kind == "op" and token.text in {")", ";;", ";&", ";;&"}:
                break
            items.append(self.and_or())
            if self.is_op("&"):
                self.take()
        self.depth -= 1
        return Seq(tuple(items))

    def and_or(self) -> Node:
        first = self.pipeline()
        rest: list[tuple[str, Node]] = []
        while self.is_op("&&", "||"):
            op = self.take().text
            while self.peek().kind == "newline":
                self.take()
            rest.append((op, self.pipeline()))
        return AndOr(first, tuple(rest)) if rest else first

    def pipeline(self) -> Node:
        negated = False
        if self.is_word("!"):
            self.take()
            negated = True
        commands = [self.command()]
        while self.is_op("|", "|&"):
            self.take()
            while self.peek().kind == "newline":
                self.take()
            commands.append(self.command())
        if len(commands) == 1 and not negated:
            return commands[0]
        return Pipeline(tuple(commands), negated)

    def command(self) -> Node:
        token = self.peek()
        if token.kind == "arith":
            self.take()
            return ArithCmd(token.text, token.line)
        if token.kind == "op" and token.text == "(":
            self.take()
            body = self.seq(frozenset())
            if not self.is_op(")"):
                raise ParseError(f"line {token.line}: '(' without ')'")
            self.take()
            return Group(body, True, self.redirections())
        if token.kind == "op" and _redirect_op(token.text):
            return self.simple()
        if token.kind != "word":
            raise ParseError(f"line {token.line}: unexpected '{token.text[:40]}'")
        word = token.text
        if word == "if":
            return self.if_clause()
        if word == "for":
            return self.for_clause()
        if word in {"while", "until"}:
            return self.while_clause()
        if word == "case":
            return self.case_clause()
        if word == "{":
            self.take()
            body = self.seq(frozenset({"}"}))
            self.expect_word("}")
            return Group(body, False, self.redirections())
        if word == "[[":
            return self.test_clause()
        if word == "function":
            self.take()
            name = self.take().text
            if self.is_op("("):
                self.take()
                if self.is_op(")"):
                    self.take()
            self.skip_newlines()
            return FuncDef(name, self.command())
        if word in _RESERVED_ENDS:
            raise ParseError(f"line {token.line}: unexpected '{word}'")
        following = self.tokens[self.index + 1] if self.index + 1 < len(self.tokens) else token
        if following.kind == "op" and following.text == "(" and _NAME.match(word):
            self.take()
            self.take()
            if not self.is_op(")"):
                raise ParseError(f"line {token.line}: '{word}(' is not a function definition")
            self.take()
            self.skip_newlines()
            return FuncDef(word, self.command())
        return self.simple()

    def redirections(self) -> tuple[Redir, ...]:
        found: list[Redir] = []
        while self.peek().kind == "op" and _redirect_op(self.peek().text):
            op = self.take().text
            target = self.take()
            found.append(Redir(op, target.text, target.heredoc))
        return tuple(found)

    def simple(self) -> Simple:
        line = self.peek().line
        assigns: list[Assign] = []
        words: list[str] = []
        redirs: list[Redir] = []
        while True:
            token = self.peek()
            if token.kind == "word":
                self.take()
                match = _ASSIGN.match(token.text) if not words else None
                if match:
                    assigns.append(self.assignment(token.text, match))
                else:
                    words.append(token.text)
            elif token.kind == "op" and _redirect_op(token.text):
                self.take()
                target = self.take()
                if target.kind != "word":
                    raise ParseError(f"line {token.line}: redirection without a target")
                redirs.append(Redir(token.text, target.text, target.heredoc))
            else:
                break
        return Simple(tuple(assigns), tuple(words), tuple(redirs), line)

    def assignment(self, raw: str, match: re.Match[str]) -> Assign:
        name, index, plus = match.group(1), match.group(2), match.group(3)
        value = raw[match.end() :]
        index_text = index[1:-1] if index else None
        if value.startswith("(") and value.endswith(")") and index is None:
            inner = tokenize(value[1:-1], self.notes)
            items = tuple(t.text for t in inner if t.kind == "word")
            return Assign(name, items=items, append=bool(plus))
        return Assign(name, value=value, index=index_text, append=bool(plus))

    def if_clause(self) -> If:
        line = self.take().line
        branches: list[tuple[Seq, Seq]] = []
        cond = self.seq(frozenset({"then"}))
        self.expect_word("then")
        body = self.seq(frozenset({"elif", "else", "fi"}))
        branches.append((cond, body))
        orelse: Seq | None = None
        while True:
            token = self.take()
            if token.kind == "word" and token.text == "elif":
                cond = self.seq(frozenset({"then"}))
                self.expect_word("then")
                branches.append((cond, self.seq(frozenset({"elif", "else", "fi"}))))
            elif token.kind == "word" and token.text == "else":
                orelse = self.seq(frozenset({"fi"}))
                self.expect_word("fi")
                break
            elif token.kind == "word" and token.text == "fi":
                break
            else:
                raise ParseError(f"line {line}: 'if' without 'fi'")
        self.redirections()
        return If(tuple(branches), orelse, line)

    def for_clause(self) -> Node:
        line = self.take().line
        if self.peek().kind == "arith":  # for (( ; ; )): not followed
            self.take()
            self.skip_newlines()
            self.expect_word("do")
            self.seq(frozenset({"done"}))
            self.expect_word("done")
            self.notes.append(f"line {line}: arithmetic 'for (( ))' loop skipped")
            return Seq()
        var = self.take().text
        while self.peek().kind == "newline":
            self.take()
        words: tuple[str, ...] | None = None
        if self.is_word("in"):
            self.take()
            collected: list[str] = []
            while self.peek().kind == "word":
                collected.append(self.take().text)
            words = tuple(collected)
        self.skip_newlines()
        self.expect_word("do")
        body = self.seq(frozenset({"done"}))
        self.expect_word("done")
        self.redirections()
        return For(var, words, body, line)

    def while_clause(self) -> While:
        token = self.take()
        cond = self.seq(frozenset({"do"}))
        self.expect_word("do")
        body = self.seq(frozenset({"done"}))
        self.expect_word("done")
        self.redirections()
        return While(cond, body, token.text == "until", token.line)

    def case_clause(self) -> Case:
        line = self.take().line
        word = self.take().text
        while self.peek().kind == "newline":
            self.take()
        self.expect_word("in")
        arms: list[tuple[tuple[str, ...], Seq]] = []
        while True:
            self.skip_newlines()
            if self.is_word("esac") or self.peek().kind == "eof":
                break
            if self.is_op("("):
                self.take()
            patterns: list[str] = []
            while True:
                token = self.take()
                if token.kind != "word":
                    raise ParseError(f"line {token.line}: bad case pattern")
                patterns.append(token.text)
                if self.is_op("|"):
                    self.take()
                    continue
                break
            if not self.is_op(")"):
                raise ParseError(f"line {line}: case pattern without ')'")
            self.take()
            body = self.seq(frozenset({"esac"}))
            arms.append((tuple(patterns), body))
            if self.is_op(";;", ";&", ";;&"):
                self.take()
        self.expect_word("esac")
        self.redirections()
        return Case(word, tuple(arms), line)

    def test_clause(self) -> TestCmd:
        line = self.take().line
        words: list[str] = []
        while True:
            token = self.take()
            if token.kind in {"eof", "newline"}:
                raise ParseError(f"line {line}: '[[' without ']]'")
            if token.kind == "word" and token.text == "]]":
                break
            words.append(token.text)
        return TestCmd(tuple(words), line)


def parse_assignment(raw: str, notes: list[str]) -> Assign | None:
    """``NAME=value``, ``NAME+=value``, ``NAME[i]=value`` or ``NAME=(items)`` (a raw word, as
    given to ``export`` / ``declare`` / ``local``), None when ``raw`` is not one."""
    match = _ASSIGN.match(raw)
    if match is None:
        return None
    return _Parser([], notes).assignment(raw, match)


def _redirect_op(text: str) -> bool:
    return text.lstrip("0123456789") in REDIRECTS


def parse_script(text: str, notes: list[str]) -> Seq:
    """The commands of ``text`` (a bash script or command line). Statements that cannot be
    parsed are skipped and named in ``notes``; never raises."""
    try:
        tokens = tokenize(text, notes)
    except (ParseError, RecursionError) as exc:
        notes.append(f"script not read: {exc}")
        return Seq()
    return _Parser(tokens, notes).program()
