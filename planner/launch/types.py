"""The values that travel between the launch readers: what a job's launch is, how its files are
read, what each reader found (each value with where it came from) and what comes out.

A *launch* is what a scheduler holds about how a job starts: a Slurm batch script or command
line, or a Kubernetes object (PyTorchJob, TrainJob, JobSet, Job) with its containers' command,
args and env. The shell layer (:mod:`planner.launch.shell`) and the Kubernetes layer
(:mod:`planner.launch.kubernetes`) turn it into :class:`Invocation` values, one per training
program it runs; each framework reader (:mod:`planner.launch.readers`) recognises the programs of
its framework and fills :class:`Facts` from their arguments and the config files they name.

Nothing here does I/O: files come through a :class:`LaunchFiles` port, bounded in size and count
(:class:`BoundedFiles`), so the service reads them under its job-file rules and the command line
inside the directory it is given.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from planner.errors import SourceError
from planner.launch.values import as_int

__all__ = [
    "DEFAULT_MAX_FILES",
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_TOTAL_BYTES",
    "BoundedFiles",
    "Facts",
    "Invocation",
    "Launch",
    "LaunchFiles",
    "MemoryFiles",
    "Sourced",
    "resolve_path",
]

DEFAULT_MAX_FILE_BYTES = 1 << 20
"""Largest config file a description reads (1 MiB): launch configs are a few KiB."""
DEFAULT_MAX_FILES = 32
"""Most files one description reads (scripts, configs, env files, a model's config.json)."""
DEFAULT_MAX_TOTAL_BYTES = 4 << 20
"""Most bytes one description reads over all its files (4 MiB)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Launch:
    """How a job starts, as its scheduler holds it.

    ``command``: the job's command line (Slurm ``--wrap``/``srun`` command, or a Kubernetes
    container's command and args joined); ``batch_script``: the text of the batch script;
    ``manifest``: the Kubernetes object(s) as parsed mappings (a TrainJob with the
    ClusterTrainingRuntime it names, when it is known); ``env``: environment the job starts with
    (Slurm ``--export`` values, a container's ``env``); ``work_dir``: the absolute directory the
    job starts in (relative paths of the launch are taken from it); ``num_gpus`` / ``num_nodes`` /
    ``gpus_per_node``: the allocation the scheduler reports (0: unknown); ``gpu``: the GPU's
    catalog key when known; ``name``: the job's name; ``log_text``: the head of the job's log when
    it is readable (a witness of the resolved configuration); ``script_name``: how the batch
    script is cited in sources (its file name; default ``job.sbatch``); ``per_node``: the command
    runs once on every node of the allocation (a Kubernetes pod's container), so a launcher
    inside it that names no node count (``torchrun`` without ``--nnodes``) spans them all.
    """

    command: str | None = None
    batch_script: str | None = None
    manifest: tuple[Mapping[str, object], ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    work_dir: str | None = None
    num_gpus: int = 0
    num_nodes: int = 0
    gpus_per_node: int = 0
    gpu: str | None = None
    name: str = ""
    log_text: str | None = None
    script_name: str = ""
    per_node: bool = False


class LaunchFiles(Protocol):
    """Reads the files a launch names.

    ``read_text(path)`` takes an absolute path (callers resolve relative paths with
    :func:`resolve_path`) and returns the file's text; it raises ``SourceError`` (a
    ``PlannerError``) when the file is missing, outside what may be read for the job, too large,
    or not text. ``exists(path)`` says whether ``read_text`` would find a file there (False when
    it would be refused).
    """

    def read_text(self, path: str) -> str: ...

    def exists(self, path: str) -> bool: ...


def resolve_path(path: str, cwd: str | None) -> str:
    """``path`` made absolute against ``cwd`` (``..`` and ``.`` removed; ``~`` is left as is:
    a home directory is not the job's tree). ``cwd`` None: the path as written, normalised."""
    if posixpath.isabs(path) or not cwd:
        return posixpath.normpath(path)
    return posixpath.normpath(posixpath.join(cwd, path))


@dataclass(slots=True)
class MemoryFiles:
    """Files held in memory, by absolute path: files a launch script writes itself (a heredoc
    ``cat > ds.json <<EOF``) and the files of unit tests. ``fallback`` is asked for anything
    else."""

    files: dict[str, str] = field(default_factory=dict)
    fallback: LaunchFiles | None = None

    def read_text(self, path: str) -> str:
        key = posixpath.normpath(path)
        if key in self.files:
            return self.files[key]
        if self.fallback is not None:
            return self.fallback.read_text(path)
        raise SourceError(path, "no such file")

    def exists(self, path: str) -> bool:
        key = posixpath.normpath(path)
        if key in self.files:
            return True
        return self.fallback is not None and self.fallback.exists(path)


@dataclass(slots=True)
class BoundedFiles:
    """``inner`` with the bounds of one description: at most ``max_files`` distinct files,
    ``max_file_bytes`` each and ``max_total_bytes`` together (characters of text, as read).
    A file read twice is served from memory and counts once. Raises ``SourceError`` naming the
    bound and the path when one is exceeded."""

    inner: LaunchFiles
    max_files: int = DEFAULT_MAX_FILES
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES
    _cache: dict[str, str] = field(default_factory=dict)
    _total: int = 0

    def read_text(self, path: str) -> str:
        key = posixpath.normpath(path)
        if key in self._cache:
            return self._cache[key]
        if len(self._cache) >= self.max_files:
            raise SourceError(path, f"not read: a launch may name at most {self.max_files} files")
        text = self.inner.read_text(key)
        if len(text) > self.max_file_bytes:
            raise SourceError(
                path,
                f"not read: over {self.max_file_bytes:,} bytes; a launch's config files are "
                "a few KiB",
            )
        if self._total + len(text) > self.max_total_bytes:
            raise SourceError(
                path, f"not read: the launch's files exceed {self.max_total_bytes:,} bytes"
            )
        self._total += len(text)
        self._cache[key] = text
        return text

    def exists(self, path: str) -> bool:
        key = posixpath.normpath(path)
        return key in self._cache or self.inner.exists(key)


@dataclass(frozen=True, slots=True, kw_only=True)
class Invocation:
    """One program a launch runs, with the launcher around it unwrapped.

    ``program``: the training program as the launch names it: a script path as written
    (``pretrain_gpt.py``, ``scripts/run_orpo.py``), a module (``torchtitan.train`` for
    ``python -m torchtitan.train``) or a command (``tune``, ``nemo``, ``llamafactory-cli``,
    ``axolotl``, ``composer``); ``args``: its arguments after variable expansion, in order;
    ``env``: the environment it sees (the script's exported and prefix assignments over the
    job's); ``cwd``: its absolute working directory, when known; ``launcher``: what started it
    (``torchrun``, ``accelerate``, ``deepspeed``, ``srun``, ``python``, ``composer``, or ``""``),
    with ``launcher_args`` the launcher's own options (``{"nproc_per_node": "8",
    "num_processes": "16", "config_file": "fsdp.yaml"}``: names without dashes, ``-`` as ``_``);
    ``where``: ``file:line`` of the command in the launch.
    """

    program: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    launcher: str = ""
    launcher_args: Mapping[str, str] = field(default_factory=dict)
    where: str = ""


@dataclass(frozen=True, slots=True)
class Sourced:
    """One value and where it came from: ``file:line`` (``train.toml:14``), ``override``
    (``override: --training.seq_len``), ``default of <framework> <version> (<file>)``,
    ``catalog:<key>`` (a built-in name resolved through the catalog), ``log`` (the job's own
    log), ``launch`` (the scheduler's allocation) or ``derived: <rule>``."""

    value: object
    source: str


@dataclass(slots=True)
class Facts:
    """What the readers found, by dotted scenario-format field (``model.num_layers``,
    ``parallelism.tensor_parallel``, ``hardware.num_gpus``, ``training.train_iters``), plus the
    launch facts the scenario format does not hold under ``launch.*`` (``launch.num_nodes``,
    ``launch.fsdp_shard``, ``launch.gradient_accumulation``, ``launch.model_name``,
    ``launch.hf_id``, ``launch.hf_model_type``, ``launch.padded_vocab_size``).

    ``set`` overwrites (apply sources in increasing precedence: framework defaults, then files,
    then overrides); ``default`` fills only what is still unset and records the field as
    assumed; ``unknown`` names fields no source could determine.
    """

    values: dict[str, Sourced] = field(default_factory=dict)
    assumed: set[str] = field(default_factory=set)
    unknown: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)

    def set(self, name: str, value: object, source: str) -> None:
        """Record ``name = value`` from ``source``, over any earlier value."""
        if value is None:
            return
        self.values[name] = Sourced(value, source)
        self.assumed.discard(name)
        self.unknown.discard(name)

    def default(self, name: str, value: object, source: str) -> None:
        """Record ``name = value`` as an assumed documented default, unless already known."""
        if value is None or name in self.values:
            return
        self.values[name] = Sourced(value, source)
        self.assumed.add(name)
        self.unknown.discard(name)

    def get(self, name: str, fallback: object = None) -> object:
        """The value of ``name``, or ``fallback``."""
        found = self.values.get(name)
        return fallback if found is None else found.value

    def int(self, name: str) -> int | None:
        """The value of ``name`` as an int when it is integral (:func:`~planner.launch.values.
        as_int`), else None."""
        return as_int(self.get(name))

    def has(self, name: str) -> bool:
        """True when ``name`` has a value."""
        return name in self.values

    def mark_unknown(self, name: str) -> None:
        """Record that no source determines ``name`` (unless one already did)."""
        if name not in self.values:
            self.unknown.add(name)

    def note(self, text: str) -> None:
        """Add a line for the reader of the description (a trap met, a value chosen)."""
        if text not in self.notes:
            self.notes.append(text)

    def __iter__(self) -> Iterator[tuple[str, Sourced]]:
        return iter(sorted(self.values.items()))


Recognise = Callable[[Invocation], bool]
