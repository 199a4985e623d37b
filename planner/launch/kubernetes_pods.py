"""Pod templates of Kubernetes manifests, read as data: typed access to a manifest's fields
(errors name the field path), containers (command, args, env, working directory, GPUs), the
``$(VAR)`` references Kubernetes expands in them, and the command line a container runs.

Used by :mod:`planner.launch.kubernetes` (PyTorchJob, JobSet, Job) and
:mod:`planner.launch.kubernetes_trainjob` (TrainJob and its training runtime). Nothing here does
I/O or runs anything.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from planner.errors import SpecError

__all__ = [
    "GPU_RESOURCES",
    "Container",
    "ManifestField",
    "TrainingPods",
    "command_text",
    "env_entries",
    "expand_references",
    "main_container",
    "pod_containers",
    "pod_gpus",
    "read_container",
    "resource_gpus",
    "upsert_env",
]

GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
"""Extended resources that count as GPUs in a container's ``resources``."""

_SHELLS = {"sh", "bash", "dash", "zsh", "ash"}
_FLAGS = re.compile(r"^-[a-zA-Z]+$")


class ManifestField:
    """One value of a manifest document with its dotted path (``spec.pytorchReplicaSpecs.
    Worker.replicas``) and the document's ``source`` (``job.yaml``), read with type checks.

    Absent values read as None (or empty); a value of the wrong type raises ``SpecError`` whose
    field is ``"<source>: <path>"`` and whose message says what was expected.
    """

    __slots__ = ("path", "source", "value")

    def __init__(self, value: object, path: str, source: str) -> None:
        self.value = value
        self.path = path
        self.source = source

    @property
    def label(self) -> str:
        """``source: path`` (the source alone for a document's root)."""
        return f"{self.source}: {self.path}" if self.path else self.source

    def _fail(self, expected: str) -> SpecError:
        shown = repr(self.value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        return SpecError(self.label, f"must be {expected}, not {shown}; fix the manifest")

    def get(self, key: str) -> ManifestField:
        """The member ``key`` of this mapping (None when this value is absent)."""
        path = f"{self.path}.{key}" if self.path else key
        if self.value is None:
            return ManifestField(None, path, self.source)
        if not isinstance(self.value, Mapping):
            raise self._fail("a mapping")
        return ManifestField(self.value.get(key), path, self.source)

    def mapping(self) -> Mapping[str, object]:
        """This value as a mapping (empty when absent)."""
        if self.value is None:
            return {}
        if not isinstance(self.value, Mapping):
            raise self._fail("a mapping")
        return self.value

    def names(self) -> list[str]:
        """The keys of this mapping (empty when absent)."""
        return [str(key) for key in self.mapping()]

    def items(self) -> list[ManifestField]:
        """The items of this list (empty when absent)."""
        if self.value is None:
            return []
        if not isinstance(self.value, list | tuple):
            raise self._fail("a list")
        return [
            ManifestField(item, f"{self.path}[{index}]", self.source)
            for index, item in enumerate(self.value)
        ]

    def text(self) -> str | None:
        """This scalar as text (numbers as written; None when absent)."""
        if self.value is None:
            return None
        if isinstance(self.value, bool):
            return "true" if self.value else "false"
        if isinstance(self.value, str | int | float):
            return str(self.value)
        raise self._fail("a string")

    def texts(self) -> tuple[str, ...]:
        """This list of scalars as text (``command``, ``args``)."""
        found: list[str] = []
        for item in self.items():
            value = item.text()
            if value is None:
                raise item._fail("a string")
            found.append(value)
        return tuple(found)

    def count(self) -> int | None:
        """This value as a whole number >= 0 (``8`` or ``"8"``; None when absent)."""
        value = self.value
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        if isinstance(value, float) and value.is_integer() and value >= 0:
            return int(value)
        if isinstance(value, str) and value.strip().isdigit():
            return int(value.strip())
        raise self._fail("a whole number >= 0")

    def flag(self) -> bool | None:
        """This value as a boolean (None when absent)."""
        if self.value is None or isinstance(self.value, bool):
            return self.value
        raise self._fail("true or false")


@dataclass(frozen=True, slots=True, kw_only=True)
class Container:
    """One container of a pod template.

    ``path``: its field path (``spec.template.spec.containers[0]``); ``env``: its ``env``
    entries with a plain ``value``, in order; ``env_unknown``: names whose value comes from
    ``valueFrom`` (a secret, a field of the pod) and is unknown here; ``gpus``: the GPUs it
    asks for (``resources.limits``, else ``requests``, of ``nvidia.com/gpu`` or
    ``amd.com/gpu``), with ``gpus_path`` the field that says so.
    """

    name: str
    path: str
    image: str | None = None
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    env_unknown: tuple[str, ...] = ()
    env_from: bool = False
    working_dir: str | None = None
    gpus: int = 0
    gpus_path: str = ""


def resource_gpus(
    resources: ManifestField, order: tuple[str, str] = ("limits", "requests")
) -> tuple[int, ManifestField | None]:
    """GPUs in a ``resources`` mapping (``nvidia.com/gpu`` or ``amd.com/gpu`` of the first of
    ``order``'s sections that asks for some) and the field that says so; ``(0, None)`` when
    none does."""
    for section in order:
        values = resources.get(section)
        for key in GPU_RESOURCES:
            found = values.get(key)
            amount = found.count()
            if amount:
                return amount, found
    return 0, None


def env_entries(node: ManifestField) -> tuple[list[tuple[str, str]], list[str]]:
    """The ``env`` list at ``node``: ``(name, value)`` of each entry with a value (a missing
    value is empty), and the names set through ``valueFrom`` (a secret or field reference whose
    value the manifest does not hold)."""
    values: list[tuple[str, str]] = []
    unknown: list[str] = []
    for entry in node.items():
        name = entry.get("name").text()
        if not name:
            continue
        value = entry.get("value").text()
        if value is None and entry.get("valueFrom").value is not None:
            unknown.append(name)
        else:
            values.append((name, value or ""))
    return values, unknown


def read_container(node: ManifestField) -> Container:
    """The container at ``node`` (a ``containers[i]`` item)."""
    env, unknown = env_entries(node.get("env"))
    gpus, found = resource_gpus(node.get("resources"))
    return Container(
        name=node.get("name").text() or "",
        path=node.path,
        image=node.get("image").text(),
        command=node.get("command").texts(),
        args=node.get("args").texts(),
        env=tuple(env),
        env_unknown=tuple(unknown),
        env_from=bool(node.get("envFrom").items()),
        working_dir=node.get("workingDir").text() or None,
        gpus=gpus,
        gpus_path=f"{found.path} ({gpus})" if found is not None else "",
    )


def pod_containers(template: ManifestField) -> list[Container]:
    """The containers of a pod template (``template.spec.containers``)."""
    return [read_container(item) for item in template.get("spec").get("containers").items()]


def pod_gpus(containers: Sequence[Container]) -> int:
    """GPUs one pod of these containers asks for."""
    return sum(container.gpus for container in containers)


def main_container(containers: Sequence[Container], name: str = "") -> Container | None:
    """The container that trains: the one named ``name``, else the first asking for GPUs, else
    the first (the service's convention for a job's main container)."""
    if not containers:
        return None
    named = next((c for c in containers if name and c.name == name), None)
    return named or next((c for c in containers if c.gpus > 0), containers[0])


def upsert_env(env: list[tuple[str, str]], name: str, value: str) -> None:
    """Set ``name`` in the ordered ``env`` list in place (replacing an entry of that name, as
    the Kubeflow controllers do), or append it."""
    for index, (key, _) in enumerate(env):
        if key == name:
            env[index] = (name, value)
            return
    env.append((name, value))


def expand_references(text: str, env: Mapping[str, str]) -> str:
    """``text`` with Kubernetes' ``$(VAR)`` references replaced by the values in ``env``.

    As the kubelet expands a container's ``command``, ``args`` and ``env`` values: ``$$`` is an
    escaped ``$``; a reference to a name not in ``env`` stays as written; a ``$`` not followed
    by ``(`` or ``$`` stays. Shell syntax (``${X}``, ``$X``) is left to the shell.
    """
    if "$" not in text:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "$" or index + 1 >= len(text):
            out.append(char)
            index += 1
            continue
        following = text[index + 1]
        if following == "$":
            out.append("$")
            index += 2
        elif following == "(":
            close = text.find(")", index + 2)
            if close < 0:
                out.append("$(")
                index += 2
                continue
            name = text[index + 2 : close]
            out.append(env.get(name, f"$({name})"))
            index = close + 1
        else:
            out.append("$" + following)
            index += 2
    return "".join(out)


def command_text(argv: Sequence[str]) -> str:
    """The command line a container's ``command`` + ``args`` run, for the shell layer: the
    script itself for ``bash -c '<script>'`` / ``sh -c`` (its extra words become the positional
    parameters ``$1``...), else the words joined with shell quoting."""
    if argv and argv[0].rsplit("/", 1)[-1] in _SHELLS:
        index = 1
        reads_script = False
        while index < len(argv) and _FLAGS.match(argv[index]):
            reads_script = reads_script or "c" in argv[index]
            index += 1
        if reads_script and index < len(argv):
            script = argv[index]
            positional = list(argv[index + 2 :])
            if positional:
                return f"set -- {shlex.join(positional)}\n{script}"
            return script
    return shlex.join(argv)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingPods:
    """What a training object runs, before the shell layer reads its command.

    ``kind``: the object's kind; ``container``: the container that trains (None: none found);
    ``command``: its effective ``command`` + ``args`` words (after a controller's changes);
    ``env``: its environment in order (container entries, then what the controller injects,
    later entries winning); ``cwd``: its ``workingDir``; ``where``: where the command is
    written (``job.yaml: spec...containers[0]``); ``pods``: pods that train (one node each),
    with ``pods_source``; ``gpus_per_pod`` with ``gpus_source``; ``num_gpus``: GPUs of all
    training pods, with ``num_gpus_source`` when it is not pods x GPUs per pod of the two
    sources; ``notes``: what a person should know (unknown env values, elastic sizes).
    """

    kind: str
    container: Container | None
    command: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    where: str = ""
    pods: int = 0
    pods_source: str = ""
    gpus_per_pod: int = 0
    gpus_source: str = ""
    num_gpus: int = 0
    num_gpus_source: str = ""
    notes: tuple[str, ...] = ()
