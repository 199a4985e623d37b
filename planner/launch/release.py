"""The framework's release a launch runs: the tag of the NeMo Framework container it starts in
(pure).

The NeMo Framework container (NGC ``nvcr.io/nvidia/nemo``) ships NeMo, Megatron-Bridge and
Megatron-Core together and is released by month: its tag ``YY.MM`` (``25.09``, ``25.11``), with
a patch number for a re-release (``26.06.01``; a further ``.``/``-`` suffix is kept as part of
the release); Megatron-Bridge publishes its performance per container under those names
(NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary-archive.md`` @ ``067f987df03b``: "25.11
NeMo Container", "26.06.01 NeMo Container"). A job names the container in its Kubernetes
pod template (``image``) or on Slurm through pyxis (``srun
--container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH``: ``nvcr.io#nvidia/nemo:25.11`` is enroot's
spelling of the same reference, a path names a squashfs file; NVIDIA/pyxis wiki, "Usage"). The
tag is the scenario's ``training.framework_version``, by which the observed-runs calibration
keeps its corrections per release.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from planner.launch.types import Facts, Invocation

__all__ = ["NEMO_REPOSITORY", "launch_release", "nemo_container_release", "release_at_least"]

NEMO_REPOSITORY: Final = "nvidia/nemo"
"""The NeMo Framework container's repository path (on ``nvcr.io`` or a mirror of it)."""
_RELEASE_TAG: Final = re.compile(r"\d{2}\.\d{2}(?:\.\d{1,2})?(?:[.-][A-Za-z0-9]+)?")
"""``YY.MM``, an optional patch number, an optional pre-release suffix."""
_NUMBERS: Final = re.compile(r"(\d{2})\.(\d{2})(?:\.(\d{1,2}))?")
"""A release's year, month and patch number."""
_DIGEST: Final = re.compile(r"@[a-z0-9]+:[0-9a-fA-F]+$")
"""A content digest after the reference (``@sha256:...``)."""


def nemo_container_release(image: str) -> str | None:
    """The release of a NeMo Framework container reference (``nvcr.io/nvidia/nemo:25.11`` ->
    ``25.11``; ``$oauthtoken@nvcr.io#nvidia/nemo:26.06.01`` -> ``26.06.01``), None for any
    other image, a
    reference without a tag (a digest alone, a ``.sqsh`` file) or with a tag that is not a
    release (``latest``, ``dev``)."""
    reference = _DIGEST.sub("", image.strip()).rpartition("@")[2].replace("#", "/")
    name, colon, tag = reference.rpartition(":")
    if not colon or "/" in tag or not _RELEASE_TAG.fullmatch(tag):
        return None
    if name != NEMO_REPOSITORY and not name.endswith("/" + NEMO_REPOSITORY):
        return None
    return tag


def launch_release(allocation: Facts, invocation: Invocation) -> tuple[str, str] | None:
    """The NeMo Framework container release ``invocation`` runs in and where the launch says
    so: the Kubernetes container's ``image`` (``launch.container_image`` of ``allocation``),
    else pyxis' ``srun --container-image`` around the program; None when neither names a NeMo
    container release."""
    found = allocation.values.get("launch.container_image")
    images = [] if found is None else [(str(found.value), found.source)]
    srun_image = invocation.launcher_args.get("container_image")
    if invocation.launcher == "srun" and srun_image:
        where = f"{invocation.where}: " if invocation.where else ""
        images.append((srun_image, f"{where}srun --container-image"))
    for image, source in images:
        release = nemo_container_release(image)
        if release is not None:
            return release, source
    return None


def release_at_least(release: str, first: str) -> bool:
    """Whether the container release ``release`` (``26.06.01``) is ``first`` (``26.06``) or
    later, by year, month and patch number (a pre-release suffix is not weighed)."""

    def key(text: str) -> tuple[int, int, int]:
        found = _NUMBERS.match(text)
        if found is None:
            return (0, 0, 0)
        year, month, patch = found.groups()
        return int(year), int(month), int(patch or 0)

    return key(release) >= key(first)
