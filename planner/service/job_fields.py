"""Bounds on what a scheduler says about a job, where it is stored and where it is shown.

Job names, users, comments, partitions, reasons and the rest are typed by cluster users: a
10 MiB job name once made every page of ``/v1/jobs`` 10.6 MB (and PostgreSQL refuses a name
longer than its ``VARCHAR(256)`` column, which fails the whole cycle). So:

* **stored** (:func:`bound_snapshot`, on every snapshot a source reports, before anything reads
  it): each text field whole up to ``limits.job_text_chars`` (default 4,096), the job's name
  and user up to their store columns (:data:`NAME_CHARS`, :data:`USER_CHARS`), a node name up
  to :data:`NODE_CHARS`, the batch script up to ``max_scenario_file_bytes``; longer ones are
  cut and end with :data:`MARKER`. A path longer than ``PATH_MAX`` (:data:`PATH_CHARS`) cannot
  name a file, so it is dropped rather than cut (a cut path could name another file). The
  identity fields (scheduler, cluster, job id) are kept as they are: cutting them could merge
  two jobs.
* **shown** in pages (:func:`shown`): at most :data:`PAGE_CHARS` characters per field, cut with
  the same marker; the job's own page (``GET /v1/jobs/{id}``) shows its stored ``state`` whole.
* **exported** as metric label values (:func:`label`): at most :data:`LABEL_CHARS` characters,
  cut with the marker and a digest of the whole value, so that two long values never share a
  series (a job id or cluster name is an identity, a node name from a log line is not bounded
  where it is stored).
"""

from __future__ import annotations

import dataclasses
import hashlib

from planner.specs.job import ClusterSnapshot, JobState, NodeState

__all__ = [
    "LABEL_CHARS",
    "MARKER",
    "NAME_CHARS",
    "NODE_CHARS",
    "PAGE_CHARS",
    "PATH_CHARS",
    "USER_CHARS",
    "bound_job",
    "bound_snapshot",
    "cut",
    "label",
    "shown",
]

#: Ends a cut text (its length counts in the bound).
MARKER = "…[cut]"
#: The store's column of a job's name (``planner.service.models.JobRow.name``).
NAME_CHARS = 256
#: The store's column of a job's user.
USER_CHARS = 128
#: A node's name (the node history's column).
NODE_CHARS = 256
#: Linux ``PATH_MAX``, including the terminating NUL.
PATH_CHARS = 4095
#: Characters of one field in a page of ``/v1/jobs``.
PAGE_CHARS = 256
#: Characters of one label value of ``/metrics``.
LABEL_CHARS = 128

_TEXT_FIELDS = (
    "partition",
    "account",
    "state_reason",
    "gpu_type",
    "command",
    "comment",
    "namespace",
    "queue_name",
)
_PATH_FIELDS = ("stdout_path", "work_dir")


def cut(text: str, limit: int) -> str:
    """``text`` when it has at most ``limit`` characters, else its start and :data:`MARKER`
    (``limit`` characters in all)."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(MARKER))] + MARKER


def label(value: object) -> str:
    """``value`` as a metric label value: its text when it has at most :data:`LABEL_CHARS`
    characters, else its start, :data:`MARKER` and the first 8 hex digits of the SHA-256 of
    the whole text (``LABEL_CHARS`` characters in all; distinct values stay distinct)."""
    text = str(value)
    if len(text) <= LABEL_CHARS:
        return text
    digest = hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()[:8]
    tail = f"{MARKER}{digest}"
    return text[: LABEL_CHARS - len(tail)] + tail


def shown(text: str | None) -> str | None:
    """A stored field as a page shows it (at most :data:`PAGE_CHARS` characters)."""
    return None if text is None else cut(text, PAGE_CHARS)


def bound_job(job: JobState, *, text_chars: int, script_chars: int) -> JobState:
    """``job`` with every text field within its bound (module docstring); the same object
    when nothing is over."""
    changes: dict[str, object] = {}
    for name, limit in (("name", NAME_CHARS), ("user", USER_CHARS)):
        value = getattr(job, name)
        if len(value) > min(limit, text_chars):
            changes[name] = cut(value, min(limit, text_chars))
    for name in _TEXT_FIELDS:
        value = getattr(job, name)
        if value is not None and len(value) > text_chars:
            changes[name] = cut(value, text_chars)
    for name in _PATH_FIELDS:
        value = getattr(job, name)
        if value is not None and len(value) > PATH_CHARS:
            changes[name] = None
    if job.batch_script is not None and len(job.batch_script) > script_chars:
        changes["batch_script"] = cut(job.batch_script, script_chars)
    if any(len(node) > NODE_CHARS for node in job.node_list):
        changes["node_list"] = tuple(cut(node, NODE_CHARS) for node in job.node_list)
    return dataclasses.replace(job, **changes) if changes else job  # type: ignore[arg-type]


def _bound_node(node: NodeState, text_chars: int) -> NodeState:
    changes: dict[str, object] = {}
    if len(node.name) > NODE_CHARS:
        changes["name"] = cut(node.name, NODE_CHARS)
    if len(node.state) > text_chars:
        changes["state"] = cut(node.state, text_chars)
    if node.gpu_type is not None and len(node.gpu_type) > text_chars:
        changes["gpu_type"] = cut(node.gpu_type, text_chars)
    if any(len(p) > text_chars for p in node.partitions):
        changes["partitions"] = tuple(cut(p, text_chars) for p in node.partitions)
    return dataclasses.replace(node, **changes) if changes else node  # type: ignore[arg-type]


def bound_snapshot(
    snapshot: ClusterSnapshot, *, text_chars: int, script_chars: int
) -> ClusterSnapshot:
    """``snapshot`` with every job's and node's text within its bound, and each warning line
    within ``text_chars``."""
    return dataclasses.replace(
        snapshot,
        jobs=tuple(
            bound_job(j, text_chars=text_chars, script_chars=script_chars) for j in snapshot.jobs
        ),
        nodes=tuple(_bound_node(n, text_chars) for n in snapshot.nodes),
        warnings=tuple(cut(w, text_chars) for w in snapshot.warnings),
    )
