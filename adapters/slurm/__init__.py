"""Slurm adapter: reads jobs and nodes through Slurm's command-line tools (22.05+).

``SlurmSource`` implements :class:`planner.ports.SchedulerSource`; the parsers in
:mod:`adapters.slurm.parse` are pure functions of the commands' output. ``SlurmHintWriter`` and
``write_hints_file`` (:mod:`adapters.slurm.hints`) hand predictions back to Slurm (opt-in).
"""

from adapters.slurm.hints import (
    COMMENT_MAX_BYTES,
    HintWriteResult,
    SlurmHint,
    SlurmHintWriter,
    TimeLimitPolicy,
    UnknownJobError,
    job_key,
    merge_hint,
    parse_hint_token,
    propose_time_limit_min,
    scenario_key,
    write_hints_file,
)
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
    "COMMENT_MAX_BYTES",
    "CommandResult",
    "HintWriteResult",
    "Runner",
    "SlurmHint",
    "SlurmHintWriter",
    "SlurmSource",
    "TimeLimitPolicy",
    "UnknownJobError",
    "detect_slurm",
    "expand_hostlist",
    "expand_stdout_path",
    "gpus_from_gres",
    "gpus_from_tres",
    "job_key",
    "merge_hint",
    "parse_hint_token",
    "parse_sacct_json",
    "parse_sinfo_json",
    "parse_squeue_json",
    "parse_time_limit_s",
    "propose_time_limit_min",
    "scenario_key",
    "slurm_state_to_status",
    "write_hints_file",
]
