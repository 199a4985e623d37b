"""Shell builtins, as far as a launch script's meaning needs them.

Variables and the shell: ``export declare typeset local readonly unset shift set cd pushd popd
source . eval let exit return break continue test [ true false :``; commands without output that
matter to nothing here (``mkdir``, ``sleep``, ``trap``, ...) succeed. What commands print and
write is :mod:`planner.launch.shell_output`. Command substitution (:func:`substitute`) runs the
commands on a copy of the shell, capturing what they print; a few common GPU-count idioms
(``nvidia-smi -L | wc -l``, ``torch.cuda.device_count()``, ``scontrol show hostnames | wc -l``)
answer the node's GPU count (the node count) when the allocation says it.
"""

from __future__ import annotations

import contextlib

from planner.launch.shell_ast import Pipeline, Seq, Simple
from planner.launch.shell_conditions import evaluate_test
from planner.launch.shell_interpreter import Frame
from planner.launch.shell_output import OUTPUT_BUILTINS, Builtin
from planner.launch.shell_state import MAX_DEPTH, FunctionReturn, LoopJump, ScriptExit
from planner.launch.shell_syntax import parse_assignment, parse_script
from planner.launch.types import resolve_path

__all__ = ["BUILTINS", "DECLARATIONS", "substitute"]

DECLARATIONS = frozenset({"export", "declare", "typeset", "local", "readonly"})
_QUIET = frozenset({
    "wait", "sleep", "trap", "ulimit", "umask", "shopt", "alias", "unalias", "hash", "mkdir",
    "touch", "rm", "chmod", "chown", "ln", "sync", "disown", "unlimit", "renice",
})  # fmt: skip


def _declare(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    command = words[0]
    export = command == "export"
    unexport = False
    notes: list[str] = []
    for word in words[1:]:
        if word.startswith(("-", "+")) and "=" not in word:
            if command == "export" and "n" in word:
                unexport = True
            elif "x" in word:
                export = word.startswith("-")
                unexport = word.startswith("+")
            elif "f" in word:
                return True
            continue
        assign = parse_assignment(word, notes)
        if assign is None and "=" in word:
            name, _, value = frame.expander.string(word).partition("=")
        else:
            name, value = (assign.name if assign else word), None
        if command == "local" and frame.locals:
            frame.locals[-1].setdefault(name, frame.vars.get(name))
        if assign is not None:
            frame.apply_assign(assign)
        elif value is not None:
            frame.set_var(name, value)
        elif command == "local" and name not in frame.vars:
            frame.set_var(name, "")
        if unexport:
            frame.exported.discard(name)
        elif export:
            frame.exported.add(name)
    return True


def _unset(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    functions = "-f" in words[1:]
    for name in words[1:]:
        if name.startswith("-"):
            continue
        if functions:
            frame.functions.pop(name, None)
        else:
            frame.vars.pop(name, None)
            frame.exported.discard(name)
    return True


def _shift(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    count = int(words[1]) if len(words) > 1 and words[1].isdigit() else 1
    if count > len(frame.args):
        return False
    frame.args = frame.args[count:]
    return True


def _set(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    args = words[1:]
    if "--" in args:
        frame.args = args[args.index("--") + 1 :]
    elif args and not args[0].startswith(("-", "+")):
        frame.args = list(args)
    return True


def _cd(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    command = words[0]
    args = [w for w in words[1:] if not (w.startswith("-") and w != "-")]
    if command == "popd":
        if not frame.dirs:
            return False
        frame.old_cwd, frame.cwd = frame.cwd, frame.dirs.pop()
        return True
    if not args:
        frame.note(f"{command} without a directory (home): directory no longer known")
        frame.old_cwd, frame.cwd = frame.cwd, None
        return True
    target = frame.old_cwd if args[0] == "-" else resolve_path(args[0], frame.cwd)
    if command == "pushd":
        frame.dirs.append(frame.cwd)
    frame.old_cwd, frame.cwd = frame.cwd, target
    return True


def _source(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    if len(words) < 2 or not frame.enter(words[1]):
        return None
    path = resolve_path(words[1], frame.cwd)
    text = frame.shared.read(path)
    if text is None:
        frame.note(f"{words[1]} could not be read; not sourced")
        return None
    saved = (frame.source, frame.offset, frame.args, frame.line)
    frame.source, frame.offset = frame.label(path), 0
    if len(words) > 2:
        frame.args = words[2:]
    frame.shared.depth += 1
    try:
        _run_in(frame, text)
    finally:
        frame.shared.depth -= 1
        frame.source, frame.offset, restored_args, frame.line = saved
        if len(words) > 2:
            frame.args = restored_args
    return True


def _run_in(frame: Frame, text: str) -> None:
    notes: list[str] = []
    tree = parse_script(text, notes)
    for note in notes:
        frame.shared.note(f"{frame.source}: {note}")
    with contextlib.suppress(FunctionReturn):  # return in a sourced file ends the file
        frame.run(tree)


def _eval(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    if not frame.enter("eval"):
        return None
    saved = frame.offset
    frame.offset = frame.offset + node.line - 1
    frame.shared.depth += 1
    try:
        _run_in(frame, " ".join(words[1:]))
    finally:
        frame.shared.depth -= 1
        frame.offset = saved
    return None


def _test(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    args = words[1:]
    if words[0] == "[":
        if not args or args[-1] != "]":
            return None
        args = args[:-1]
    if frame.words_unknown:
        return None
    return evaluate_test(args, frame.test_exists)


def _let(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    result: int | None = 0
    for expression in words[1:]:
        result = frame.expander.arithmetic(expression)
    return None if result is None else result != 0


def _jump(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
    command = words[0]
    if command == "exit":
        raise ScriptExit
    if command == "return":
        raise FunctionReturn
    levels = int(words[1]) if len(words) > 1 and words[1].isdigit() else 1
    raise LoopJump(command, max(1, levels))


def _constant(value: bool) -> Builtin:
    def run(frame: Frame, words: list[str], prefix: dict[str, str], node: Simple) -> bool | None:
        return value

    return run


BUILTINS: dict[str, Builtin] = {
    ":": _constant(True), "true": _constant(True), "false": _constant(False),
    **OUTPUT_BUILTINS, "export": _declare, "declare": _declare, "typeset": _declare,
    "local": _declare, "readonly": _declare, "unset": _unset, "shift": _shift, "set": _set,
    "cd": _cd, "pushd": _cd, "popd": _cd, "source": _source, ".": _source, "eval": _eval,
    "test": _test, "[": _test, "let": _let, "exit": _jump, "return": _jump, "break": _jump,
    "continue": _jump, **{name: _constant(True) for name in _QUIET},
}  # fmt: skip
"""Commands the interpreter runs itself: name -> (frame, words, prefix env, node) -> status."""


def _gpu_count_idiom(frame: Frame, tree: Seq) -> str | bool | None:
    """The answer of a GPU / node count idiom; False when ``tree`` is not one."""
    if len(tree.items) != 1:
        return False
    item = tree.items[0]
    nodes = item.commands if isinstance(item, Pipeline) else (item,)
    commands = [c for c in nodes if isinstance(c, Simple) and c.words]
    if len(commands) != len(nodes):
        return False
    first, last = commands[0].words, commands[-1].words
    allocation = frame.shared.allocation
    counts_lines = len(commands) > 1 and tuple(last) in {("wc", "-l"), ("wc", "--lines")}
    if first[0] == "nvidia-smi" and counts_lines:
        gpus = allocation.int("hardware.gpus_per_node")
        return None if gpus is None else str(gpus)
    if tuple(first[:3]) == ("scontrol", "show", "hostnames") and counts_lines:
        node_count = allocation.int("launch.num_nodes")
        return None if node_count is None else str(node_count)
    if len(commands) == 1 and first[0].startswith("python") and "-c" in first:
        script = " ".join(first)
        if "device_count()" in script:
            gpus = allocation.int("hardware.gpus_per_node")
            return None if gpus is None else str(gpus)
    return False


def substitute(frame: Frame, text: str) -> str | None:
    """The output of ``$(text)``: run on a copy of the shell, capturing what builtins print;
    None (with a note) when any command's output is not known."""
    shown = " ".join(text.split())
    shown = shown if len(shown) <= 70 else shown[:67] + "..."
    if frame.shared.depth >= MAX_DEPTH:
        frame.note(f"$({shown}) not evaluated: nested too deep")
        return None
    notes: list[str] = []
    tree = parse_script(text, notes)
    idiom = _gpu_count_idiom(frame, tree)
    if idiom is not False:
        if idiom is None:
            frame.note(f"$({shown}) needs the node's GPU or node count, which is not known")
        return idiom if isinstance(idiom, str) else None
    child = frame.copy(capture=True)
    frame.shared.depth += 1
    try:
        child.run(tree)
    except (ScriptExit, FunctionReturn, LoopJump):  # they end only the substitution
        pass
    finally:
        frame.shared.depth -= 1
    if child.capture_unknown or child.capture is None:
        frame.note(f"$({shown}) not evaluated: its output is not known")
        return None
    return "".join(child.capture)
