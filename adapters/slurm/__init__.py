"""Slurm adapter: reads jobs and nodes through Slurm's command-line tools (22.05+).

``SlurmSource`` implements :class:`planner.ports.SchedulerSource`; the parsers in
:mod:`adapters.slurm.parse` are pure functions of the commands' output.
"""

from adapters.slurm.parse import (
    expand_hostlist,
    expand_stdout_path,
    gpus_from_gres,
    gpus_from_tres,
    parse_sacct_json,
    parse_sinfo_json,
    parse_squeue_json,
    parse_time_limit_s,
    slurm_state_to_status,
)
from adapters.slurm.source import CommandResult, Runner, SlurmSource, detect_slurm

__all__ = [
    "CommandResult",
    "Runner",
    "SlurmSource",
    "detect_slurm",
    "expand_hostlist",
    "expand_stdout_path",
    "gpus_from_gres",
    "gpus_from_tres",
    "parse_sacct_json",
    "parse_sinfo_json",
    "parse_squeue_json",
    "parse_time_limit_s",
    "slurm_state_to_status",
]
