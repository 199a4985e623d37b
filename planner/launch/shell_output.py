"""What launch-script commands print and write: ``echo printf cat tee pwd dirname basename
realpath readlink expr seq`` print into a ``$( )`` capture or, redirected, into a file the
script writes (kept in memory so readers can read, say, a DeepSpeed JSON the script
generated); ``sed`` (``s/literal/text/[g]`` and the ``^`` / ``$`` anchors; ``-i`` edits a
file in memory), ``cp`` and ``envsubst`` make files from other files; ``read`` takes a line
from a here-document, a here-string or a file. Input comes from here-documents (expanded unless
the delimiter is quoted), here-strings and ``<`` files of the job.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

from planner.launch.shell_arith import ArithError, evaluate_arithmetic
from planner.launch.shell_ast import Simple
from planner.launch.shell_expand import ifs_separator
from planner.launch.shell_interpreter import Frame
from planner.launch.shell_state import MAX_LOOP_ITERATIONS
from planner.launch.types import resolve_path

__all__ = ["OUTPUT_BUILTINS", "Builtin"]

Builtin = Callable[[Frame, list[str], dict[str, str], Simple], bool | None]
"""A command the interpreter runs itself: (frame, words, prefix env, node) -> exit status."""
_LITERAL = re.compile(r"[^.\[\]*^$\\+?(){}|]*")


def _stdout(frame: Frame, node: Simple) -> tuple[str | None, bool]:
    target: str | None = None
    append = False
    for redir in node.redirs:
        op = redir.op.lstrip("1")
        if op in {">", ">|", "&>", ">>", "&>>"}:
            target = frame.expander.string(redir.target)
            append = op.endswith(">>")
    return target, append


def _stdin(frame: Frame, node: Simple) -> str | None:
    for redir in node.redirs:
        if redir.heredoc is not None:
            body = redir.heredoc.body
            return body if redir.heredoc.quoted else frame.expander.heredoc(body)
        if redir.op == "<<<":
            return frame.expander.string(redir.target) + "\n"
        if redir.op.lstrip("0") == "<":
            return frame.shared.read(resolve_path(frame.expander.string(redir.target), frame.cwd))
    return None


def _emit(frame: Frame, node: Simple, text: str | None) -> bool | None:
    """``text`` to the command's standard output (None: not known)."""
    target, append = _stdout(frame, node)
    if target is not None:
        if text is None:
            frame.note(f"{target}: what the script writes there is not known")
            return None
        frame.shared.write(resolve_path(target, frame.cwd), text, append=append)
    elif frame.capture is not None:
        if text is None:
            frame.capture_unknown = True
        else:
            frame.capture.append(text)
    return True


def _escapes(text: str) -> str:
    table = {"n": "\n", "t": "\t", "\\": "\\", "r": "\r", "0": "\0", "a": "\a"}
    return re.sub(r"\\(.)", lambda m: table.get(m.group(1), m.group(0)), text)


def _echo(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    args = words[1:]
    newline, escapes = True, False
    while args and re.fullmatch(r"-[neE]+", args[0]):
        newline = newline and "n" not in args[0]
        escapes = "e" in args[0]
        args = args[1:]
    text = " ".join(args)
    return _emit(frame, node, (_escapes(text) if escapes else text) + ("\n" if newline else ""))


def _printf(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    args = words[1:]
    if args[:1] == ["-v"]:
        return None
    if not args:
        return True
    fmt, values = _escapes(args[0]), args[1:]
    out: list[str] = []
    for _ in range(MAX_LOOP_ITERATIONS):
        text, used = _format(fmt, values)
        out.append(text)
        values = values[used:]
        if not values or used == 0:
            break
    return _emit(frame, node, "".join(out))


def _format(fmt: str, values: list[str]) -> tuple[str, int]:
    """One pass of ``printf``'s format over ``values``: the text and how many it used."""
    used = 0

    def fill(match: re.Match[str]) -> str:
        nonlocal used
        if match.group(0) == "%%":
            return "%"
        value = values[used] if used < len(values) else ""
        used += 1
        return _escapes(value) if match.group(1) == "b" else value

    return re.sub(r"%%|%[-+ #0-9.]*([sdifgqbxX])", fill, fmt), used


def _cat(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    names = [w for w in words[1:] if not (w.startswith("-") and w != "-")]
    parts: list[str | None] = []
    for name in names or ["-"]:
        if name == "-":
            parts.append(_stdin(frame, node))
        else:
            parts.append(frame.shared.read(resolve_path(name, frame.cwd)))
    known = [p for p in parts if p is not None]
    return _emit(frame, node, "".join(known) if len(known) == len(parts) else None)


def _tee(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    text = _stdin(frame, node)
    append = "-a" in words[1:]
    if text is None:
        return None
    for name in words[1:]:
        if not name.startswith("-"):
            frame.shared.write(resolve_path(name, frame.cwd), text, append=append)
    return _emit(frame, node, text)


def _sed_commands(scripts: list[str]) -> list[tuple[str, str, bool]] | None:
    """``s/pattern/replacement/[g]`` commands with literal patterns (``^`` / ``$`` alone
    allowed); None for anything else."""
    commands: list[tuple[str, str, bool]] = []
    for script in scripts:
        rest = script.strip()
        while rest:
            if len(rest) < 4 or rest[0] != "s":
                return None
            delimiter = rest[1]
            parts = re.split(rf"(?<!\\){re.escape(delimiter)}", rest[2:], maxsplit=2)
            if len(parts) != 3:
                return None
            pattern, replacement, tail = parts
            flags, _, rest = tail.partition(";")
            rest = rest.strip()
            pattern = pattern.replace("\\" + delimiter, delimiter).replace("\\.", ".")
            replacement = replacement.replace("\\" + delimiter, delimiter)
            if pattern not in {"^", "$"} and not _LITERAL.fullmatch(pattern.replace(".", "")):
                return None
            if flags.strip() not in {"", "g"} or "&" in replacement.replace("\\&", ""):
                return None
            commands.append((pattern, replacement.replace("\\&", "&"), "g" in flags))
    return commands


def _sed_apply(text: str, commands: list[tuple[str, str, bool]]) -> str:
    lines = text.split("\n")
    for pattern, replacement, every in commands:
        if pattern == "^":
            lines = [replacement + line for line in lines]
        elif pattern == "$":
            lines = [line + replacement if line else line for line in lines]
        else:
            lines = [line.replace(pattern, replacement, -1 if every else 1) for line in lines]
    return "\n".join(lines)


def _sed(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    scripts: list[str] = []
    files: list[str] = []
    in_place = False
    args = words[1:]
    index = 0
    while index < len(args):
        word = args[index]
        if word in {"-e", "--expression"} and index + 1 < len(args):
            scripts.append(args[index + 1])
            index += 2
            continue
        if word.startswith("--expression="):
            scripts.append(word.partition("=")[2])
        elif word.startswith("-i") or word.startswith("--in-place"):
            in_place = True
        elif word.startswith("-") and word != "-":
            frame.capture_unknown = frame.capture is not None
            return _emit(frame, node, None) if _stdout(frame, node)[0] else None
        elif not scripts:
            scripts.append(word)
        else:
            files.append(word)
        index += 1
    commands = _sed_commands(scripts)
    if in_place:
        for name in files:
            path = resolve_path(name, frame.cwd)
            text = frame.shared.read(path)
            if commands is not None and text is not None:
                frame.shared.write(path, _sed_apply(text, commands))
            else:
                frame.note(f"sed -i on {name}: edit not followed")
        return True
    sources = [frame.shared.read(resolve_path(n, frame.cwd)) for n in files] or [
        _stdin(frame, node)
    ]
    if commands is None or any(s is None for s in sources):
        return _emit(frame, node, None)
    return _emit(frame, node, _sed_apply("".join(s or "" for s in sources), commands))


def _cp(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    names = [w for w in words[1:] if not w.startswith("-")]
    if len(names) != 2:
        return True
    text = frame.shared.read(resolve_path(names[0], frame.cwd))
    target = names[1]
    if target.endswith("/") or target in {".", ".."}:
        target = posixpath.join(target, posixpath.basename(names[0]))
    if text is not None:
        frame.shared.write(resolve_path(target, frame.cwd), text)
    return True


def _envsubst(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    text = _stdin(frame, node)
    if text is None:
        return _emit(frame, node, None)
    allowed = set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", " ".join(words[1:])))
    env = frame.environment(prefix)

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if allowed and name not in allowed:
            return match.group(0)
        return env.get(name, "")

    pattern = r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)"
    return _emit(frame, node, re.sub(pattern, value, text))


def _path_tool(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    command = words[0]
    args = [w for w in words[1:] if not w.startswith("-")]
    if not args:
        return _emit(frame, node, None)
    path = args[0]
    if command == "dirname":
        result = posixpath.dirname(path.rstrip("/")) or "."
    elif command == "basename":
        result = posixpath.basename(path.rstrip("/"))
        if len(args) > 1 and result.endswith(args[1]) and result != args[1]:
            result = result[: -len(args[1])]
    else:
        result = resolve_path(path, frame.cwd)
    return _emit(frame, node, result + "\n")


def _pwd(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    return _emit(frame, node, None if frame.cwd is None else frame.cwd + "\n")


def _expr(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    text = " ".join("==" if w == "=" else w for w in words[1:])
    try:
        value = evaluate_arithmetic(text, lambda name: None, lambda name, value: None)
    except ArithError:
        return _emit(frame, node, None)
    return _emit(frame, node, f"{value}\n")


def _seq(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    numbers = [int(w) for w in words[1:] if re.fullmatch(r"-?\d{1,9}", w)]
    if len(numbers) != len(words) - 1 or not 1 <= len(numbers) <= 3:
        return _emit(frame, node, None)
    first, step, last = (
        (1, 1, numbers[0]) if len(numbers) == 1
        else (numbers[0], 1, numbers[1]) if len(numbers) == 2
        else (numbers[0], numbers[1], numbers[2])
    )  # fmt: skip
    if step == 0 or (last - first) // step + 1 > MAX_LOOP_ITERATIONS:
        return _emit(frame, node, None)
    stop = last + 1 if step > 0 else last - 1
    return _emit(frame, node, "".join(f"{v}\n" for v in range(first, stop, step)))


def _read(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    names: list[str] = []
    array: str | None = None
    args = words[1:]
    index = 0
    while index < len(args):
        word = args[index]
        if word == "-a" and index + 1 < len(args):
            array = args[index + 1]
            index += 2
            continue
        if word in {"-d", "-p", "-t", "-n", "-N", "-u", "-i"}:
            index += 2
            continue
        if not word.startswith("-"):
            names.append(word)
        index += 1
    text = _stdin(frame, node)
    if text is None:
        for name in [*names, *([array] if array else [])]:
            frame.set_var(name, "", unknown=True)
        return None
    line = text.split("\n", 1)[0]
    ifs_value = prefix.get("IFS", frame.vars.get("IFS", " \t\n"))
    ifs = ifs_value if isinstance(ifs_value, str) else " \t\n"
    if array is not None:
        frame.set_var(array, _split_read(line, ifs, 0))
        return True
    names = names or ["REPLY"]
    fields = _split_read(line, ifs, len(names) - 1)
    for position, name in enumerate(names):
        frame.set_var(name, fields[position] if position < len(fields) else "")
    return True


def _split_read(line: str, ifs: str, maxsplit: int) -> list[str]:
    white = "".join(c for c in ifs if c in " \t\n")
    line = line.strip(white) if white else line
    if not ifs:
        return [line]
    return ifs_separator(ifs).split(line, maxsplit=maxsplit)


OUTPUT_BUILTINS: dict[str, Builtin] = {
    "echo": _echo, "printf": _printf, "cat": _cat, "tee": _tee, "sed": _sed, "cp": _cp,
    "envsubst": _envsubst, "dirname": _path_tool, "basename": _path_tool,
    "realpath": _path_tool, "readlink": _path_tool, "pwd": _pwd, "expr": _expr, "seq": _seq,
    "read": _read,
}  # fmt: skip
"""Commands whose output (or input) the interpreter follows."""
