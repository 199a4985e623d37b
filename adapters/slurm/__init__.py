"""Slurm adapter: reads jobs and nodes through Slurm's command-line tools (22.05+).

``SlurmSource`` implements :class:`planner.ports.SchedulerSource`; the parsers are pure functions
of the commands' output, one module per concern: :mod:`~adapters.slurm.squeue`,
:mod:`~adapters.slurm.sinfo`, :mod:`~adapters.slurm.sacct` and :mod:`~adapters.slurm.scontrol`
(what active jobs ask of and hold on each node: :mod:`~adapters.slurm.resources`),
over the shared JSON reader, job states and time limits of :mod:`~adapters.slurm.output`, the
GRES/TRES strings of :mod:`~adapters.slurm.gres` and the hostlists of
:mod:`~adapters.slurm.hostlist` (python-hostlist). ``SlurmHintWriter`` and
``write_hints_file`` (:mod:`adapters.slurm.hints`) hand predictions back to Slurm (opt-in).
"""

from adapters.slurm.gres import gpus_from_gres, gpus_from_tres
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
from adapters.slurm.hostlist import expand_hostlist
from adapters.slurm.output import parse_time_limit_s, slurm_state_to_status
from adapters.slurm.sacct import parse_sacct_json
from adapters.slurm.sinfo import parse_sinfo_json
from adapters.slurm.source import CommandResult, Runner, SlurmSource, detect_slurm
from adapters.slurm.squeue import expand_stdout_path, parse_squeue_json

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
