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


def _cut(text: str | None, limit: int) -> str | None:
    return None if text is None else cut(text, limit)


def _path(path: str | None) -> str | None:
    """A path that can name a file (at most :data:`PATH_CHARS` characters), or None."""
    return None if path is None or len(path) > PATH_CHARS else path


def _names(names: tuple[str, ...], limit: int) -> tuple[str, ...]:
    if all(len(name) <= limit for name in names):
        return names
    return tuple(cut(name, limit) for name in names)


def bound_job(job: JobState, *, text_chars: int, script_chars: int) -> JobState:
    """``job`` with every text field within its bound (module docstring); the same object
    when nothing is over."""
    name = cut(job.name, min(NAME_CHARS, text_chars))
    user = cut(job.user, min(USER_CHARS, text_chars))
    partition = cut(job.partition, text_chars)
    account = cut(job.account, text_chars)
    reason = cut(job.state_reason, text_chars)
    gpu_type = _cut(job.gpu_type, text_chars)
    command = _cut(job.command, text_chars)
    comment = cut(job.comment, text_chars)
    namespace = cut(job.namespace, text_chars)
    queue = cut(job.queue_name, text_chars)
    stdout_path, work_dir = _path(job.stdout_path), _path(job.work_dir)
    script = _cut(job.batch_script, script_chars)
    nodes = _names(job.node_list, NODE_CHARS)
    bounded = (name, user, partition, account, reason, gpu_type, command, comment, namespace,
               queue, stdout_path, work_dir, script, nodes)  # fmt: skip
    given = (job.name, job.user, job.partition, job.account, job.state_reason, job.gpu_type,
             job.command, job.comment, job.namespace, job.queue_name, job.stdout_path,
             job.work_dir, job.batch_script, job.node_list)  # fmt: skip
    if bounded == given:  # the values are the same objects then: no text is compared
        return job
    return dataclasses.replace(
        job,
        name=name,
        user=user,
        partition=partition,
        account=account,
        state_reason=reason,
        gpu_type=gpu_type,
        command=command,
        comment=comment,
        namespace=namespace,
        queue_name=queue,
        stdout_path=stdout_path,
        work_dir=work_dir,
        batch_script=script,
        node_list=nodes,
    )


def _bound_node(node: NodeState, text_chars: int) -> NodeState:
    name = cut(node.name, NODE_CHARS)
    state = cut(node.state, text_chars)
    gpu_type = _cut(node.gpu_type, text_chars)
    partitions = _names(node.partitions, text_chars)
    if (name, state, gpu_type, partitions) == (
        node.name,
        node.state,
        node.gpu_type,
        node.partitions,
    ):
        return node
    return dataclasses.replace(
        node, name=name, state=state, gpu_type=gpu_type, partitions=partitions
    )


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
