"""Slurm hostlists (``node[01-04,07]``) → host names, through the kept library python-hostlist.

python-hostlist implements Slurm's hostlist syntax (ranges, zero padding, several bracket groups,
comma-separated lists); this module keeps the project's contract around it: the empty words
squeue and sacct print for "no nodes" give ``()``, order and duplicates are kept as written, and
a malformed list raises ``ValueError`` naming the hostlist (the JSON parsers turn that into a
:class:`~planner.errors.SourcePermanentError` naming the field).
"""

from __future__ import annotations

import hostlist

# What squeue/sacct print for a job that has no nodes (pending, or ended before it ran).
_NO_NODES = frozenset({"", "(null)", "None assigned", "N/A"})


def expand_hostlist(text: str) -> tuple[str, ...]:
    """Expand a Slurm hostlist: ``node[1-3,5]`` → node1 node2 node3 node5; zero padding is kept
    (``gpu[01-02]``), several bracket groups multiply (``r[1-2]n[1-2]``), comma-separated lists
    concatenate. ``""``, ``"(null)"``, ``"N/A"`` and ``"None assigned"`` give ``()``.
    Raises ``ValueError`` on an unbalanced bracket, a descending or non-numeric range.
    """
    text = text.strip()
    if text in _NO_NODES:
        return ()
    try:
        names: list[str] = hostlist.expand_hostlist(text, allow_duplicates=True)
    except hostlist.BadHostlist as exc:
        raise ValueError(
            f"hostlist {text!r} is not a Slurm hostlist ({exc}); expected e.g. node[01-04,07]"
        ) from None
    return tuple(names)
