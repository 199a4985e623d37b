"""What the framework-reader tests share: the launch files of ``tests/data/launch/<style>/`` in
memory under a job directory, a scheduler allocation, and one reader run on one invocation."""

from __future__ import annotations

from pathlib import Path

from planner.launch.describe import finish
from planner.launch.reader import LaunchReader, ReadContext
from planner.launch.types import Facts, Invocation, Launch, MemoryFiles

DATA = Path(__file__).resolve().parents[1] / "data" / "launch"

MEGATRON_FSDP_STRATEGY_STAGES = (
    ("no_shard", 0),
    ("optim", 1),
    ("optim_grads", 2),
    ("optim_grads_params", 3),
)
"""Megatron-FSDP's sharding strategies and the ZeRO stage each runs, as its
``ParamAndGradBuffer`` distributes nothing, the main weights (with the optimizer states on
them), those and the gradients, or those and the model weights (NVIDIA/Megatron-LM
``megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py`` @ core_v0.15.0)."""

_ALLOCATION_FIELDS = ("hardware.num_gpus", "hardware.gpus_per_node", "launch.num_nodes")


def data_files(
    style: str,
    root: str,
    *,
    pattern: str = "*",
    without: str = "",
    extra: dict[str, str] | None = None,
) -> MemoryFiles:
    """The files of ``tests/data/launch/<style>`` matching ``pattern`` (but not ending in
    ``without``) under the absolute directory ``root``, plus ``extra`` (path -> text)."""
    base = DATA / style
    files = MemoryFiles(
        files={
            f"{root}/{path.relative_to(base).as_posix()}": path.read_text(encoding="utf-8")
            for path in base.rglob(pattern)
            if path.is_file() and (not without or not path.as_posix().endswith(without))
        }
    )
    files.files.update(extra or {})
    return files


def allocation(
    gpus: int = 0, nodes: int = 0, per_node: int = 0, *, world_size: int = 0, source: str = "launch"
) -> Facts:
    """What the scheduler and launcher say of the GPUs: each count that is given (non-zero)."""
    facts = Facts()
    for name, value in (
        ("hardware.num_gpus", gpus),
        ("launch.num_nodes", nodes),
        ("hardware.gpus_per_node", per_node),
        ("launch.world_size", world_size),
    ):
        if value:
            facts.set(name, value, source)
    return facts


def read(
    reader: LaunchReader,
    invocation: Invocation,
    files: MemoryFiles,
    *,
    given: Facts | None = None,
    work_dir: str | None = None,
    invocations: tuple[Invocation, ...] | None = None,
) -> Facts:
    """What ``reader`` reads from ``invocation`` (which it must recognise) with ``files`` and
    the allocation ``given``; the job starts in ``work_dir`` (default: the invocation's)."""
    assert reader.recognises(invocation)
    context = ReadContext(
        launch=Launch(work_dir=work_dir or invocation.cwd),
        files=files,
        allocation=given if given is not None else Facts(),
        invocations=invocations if invocations is not None else (invocation,),
    )
    return reader.read(invocation, context)


def read_program(
    reader: LaunchReader,
    style: str,
    root: str,
    program: str,
    *args: str,
    launcher: str = "",
    launcher_args: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    allocation: Facts | None = None,
    where: str = "",
    pattern: str = "*",
    gpus_from_allocation: bool = False,
) -> Facts:
    """The finished facts of ``program args`` run in ``root`` (holding the files of
    ``tests/data/launch/<style>`` matching ``pattern``) under the ``allocation``; with
    ``gpus_from_allocation`` the allocation's GPU counts fill in where the reader counted
    none."""
    invocation = Invocation(
        program=program,
        args=args,
        env=env or {},
        cwd=root,
        launcher=launcher,
        launcher_args=launcher_args or {},
        where=where,
    )
    given = allocation if allocation is not None else Facts()
    facts = read(reader, invocation, data_files(style, root, pattern=pattern), given=given)
    return finished(with_allocation(facts, given) if gpus_from_allocation else facts)


def with_allocation(facts: Facts, given: Facts) -> Facts:
    """``facts`` with the allocation's GPU counts where the reader counted no GPUs (as
    ``describe_launch`` settles them)."""
    if not facts.has("hardware.num_gpus"):
        for name in _ALLOCATION_FIELDS:
            found = given.values.get(name)
            if found is not None:
                facts.set(name, found.value, found.source)
    return facts


def finished(facts: Facts) -> Facts:
    """``facts`` after :func:`~planner.launch.describe.finish`."""
    finish(facts)
    return facts
