"""What ``scontrol`` prints: the cluster name, and whether ``write batch_script`` got a script."""

from __future__ import annotations

import re


def parse_cluster_name(scontrol_show_config: str) -> str | None:
    """``ClusterName`` from ``scontrol show config`` output, or ``None`` when absent."""
    match = re.search(r"^\s*ClusterName\s*=\s*(\S+)\s*$", scontrol_show_config, re.MULTILINE)
    return match.group(1) if match else None


def batch_script_failed(stderr: str) -> bool:
    """True when ``scontrol write batch_script ID -`` reported that it got no script.

    22.05 exits 0 even then, printing e.g. "job script retrieval failed: Job script not
    specified" (an ``srun``/``salloc`` job) or "...: Invalid job id specified" on stderr.
    """
    return "job script retrieval failed" in stderr.lower()
