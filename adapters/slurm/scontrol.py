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


#: Slurm's ``bf_interval`` when ``SchedulerParameters`` leaves it out, seconds (slurm.conf(5):
#: "Default: 30"; https://slurm.schedmd.com/slurm.conf.html#OPT_bf_interval=#).
DEFAULT_BF_INTERVAL_S = 30.0


def _config_value(text: str, name: str) -> str | None:
    match = re.search(rf"^\s*{name}\s*=\s*(.*?)\s*$", text, re.MULTILINE)
    return match.group(1) if match else None


def parse_backfill_interval(scontrol_show_config: str) -> float | None:
    """Seconds between two of the backfill scheduler's cycles, from ``scontrol show config``:
    ``SchedulerParameters``' ``bf_interval`` under ``SchedulerType=sched/backfill``, 30 when
    it is left out (Slurm's default). None when the controller does not backfill
    (``sched/builtin`` starts jobs in strict priority order; ``bf_interval=-1`` stops the
    backfill loop), when the output names no scheduler, or when the value is not a number."""
    scheduler = _config_value(scontrol_show_config, "SchedulerType")
    if scheduler is None or "backfill" not in scheduler:
        return None
    params = _config_value(scontrol_show_config, "SchedulerParameters") or ""
    for item in params.split(","):
        name, _, value = item.strip().partition("=")
        if name == "bf_interval":
            try:
                seconds = float(value)
            except ValueError:
                return None
            return seconds if seconds > 0 else None
    return DEFAULT_BF_INTERVAL_S
