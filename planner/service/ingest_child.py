"""The entry point of the ingest process a split ``planner serve`` spawns.

A spawned child imports the module of its target before it runs it; the service's composition
root (``planner.service.main``: the web stack, the schedulers' clients, the store) takes seconds
to import, tens of seconds on a busy node. This module imports nothing of the service, so the
child asks the kernel to end it with its parent first (Linux ``prctl(PR_SET_PDEATHSIG,
SIGTERM)``, ``man 2 prctl``) and only then imports and runs the ingest loop: a ``planner serve``
killed while its child starts up (``kill -9``, the OOM killer) leaves no ingest process behind
writing to the store. Once running, the loop also checks its parent every second
(``planner.service.main.run_ingest``), which covers the platforms without ``prctl``.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from planner.service.settings import Settings

#: ``PR_SET_PDEATHSIG`` of ``<linux/prctl.h>``: the signal the calling process gets when the
#: thread that created it ends.
PR_SET_PDEATHSIG: Final = 1


def end_with_parent(parent_pid: int) -> bool:
    """Have this process sent SIGTERM when its parent ends (Linux only) and say whether the
    parent ``parent_pid`` is still there (False: it ended before the request took effect, and
    the caller should stop). Elsewhere, or when the kernel refuses, only the check is made."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        except (OSError, AttributeError):
            pass  # no libc or no prctl: the loop's own check remains
    return os.getppid() == parent_pid


def run(settings: Settings, parent_pid: int) -> None:
    """The ingest child: ended with ``parent_pid`` (see the module doc), then
    ``planner.service.main.run_ingest``."""
    if not end_with_parent(parent_pid):
        return
    from planner.service.main import run_ingest  # noqa: PLC0415 - imported once the signal is armed

    run_ingest(settings, parent_pid)
