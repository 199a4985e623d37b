"""How the planner learns what a job trains, in order of precedence.

1. A scenario file named in the job's comment: ``planner:scenario=PATH`` (Slurm
   ``--comment=planner:scenario=/path/job.yaml``; a relative path is taken from the job's
   working directory). YAML, JSON or a one-line JSONL, in the scenario format.
2. Megatron-LM arguments found in the job's command line or batch script (``--num-layers``,
   ``--hidden-size``, ...); the hardware comes from the job's GPU allocation.
3. Nothing: the job is still listed, marked ``described_by: none``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from planner.catalog import gpu_key_for_gres_type
from planner.errors import PlannerError, SpecError
from planner.forecast.arguments import schedule_from_arguments
from planner.scenario import (
    format_for_path,
    parse_scenario,
    predict_documents,
    read_documents,
    scenario_document_from_megatron_args,
)
from planner.specs.job import JobState

DescribedBy = Literal["scenario_file", "megatron_args", "none"]

_SCENARIO_COMMENT = re.compile(r"planner:scenario=(\S+)")
_TRACE_COMMENT = re.compile(r"planner:trace=(\S+)")
_TRACE_META_COMMENT = re.compile(r"planner:trace-meta=(\S+)")


@dataclass(frozen=True, slots=True, kw_only=True)
class JobDescription:
    """What the planner knows a job trains.

    ``document`` is the scenario document (scenario-format dict) or None; ``prediction`` the
    ``planner predict`` output for it (None when the scenario is invalid: ``error`` says why);
    ``train_iters`` the total iterations the job runs, when the description says.
    """

    described_by: DescribedBy
    detail: str
    document: dict[str, Any] | None = None
    prediction: dict[str, Any] | None = None
    train_iters: int | None = None
    error: str | None = None


_OWN_HINT = re.compile(r"\s*planner:hint=\S*")


def description_key(job: JobState) -> str:
    """Digest of everything :func:`describe_job` reads from the job; re-describe when it changes.

    The planner's own ``planner:hint=`` token in the comment is left out: rewriting a hint must
    not make the job look new.
    """
    parts = (
        _OWN_HINT.sub("", job.comment),
        job.command or "",
        job.batch_script or "",
        str(job.num_gpus),
        job.gpu_type or "",
        job.work_dir or "",
        job.name,
    )
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def _comment_path(job: JobState, pattern: re.Pattern[str]) -> str | None:
    match = pattern.search(job.comment)
    if match is None:
        return None
    path = match.group(1)
    if not posixpath.isabs(path) and job.work_dir:
        path = posixpath.normpath(posixpath.join(job.work_dir, path))
    return path


def scenario_path_from_comment(job: JobState) -> str | None:
    """The ``planner:scenario=PATH`` of the job's comment, made absolute against its work dir."""
    return _comment_path(job, _SCENARIO_COMMENT)


def trace_paths_from_comment(job: JobState) -> tuple[str, str] | None:
    """``(trace, meta)`` from ``planner:trace=PATH planner:trace-meta=PATH`` in the comment (a
    per-rank operation trace the job writes, and its layout file), made absolute against the
    job's work dir; None unless both are given."""
    trace = _comment_path(job, _TRACE_COMMENT)
    meta = _comment_path(job, _TRACE_META_COMMENT)
    return None if trace is None or meta is None else (trace, meta)


def _train_iters(document: dict[str, Any]) -> int | None:
    """Iterations the scenario runs: ``training.train_iters``, else total_tokens / tokens per
    iteration (global batch x sequence length)."""
    try:
        scenario = parse_scenario(document)
    except PlannerError:
        training_doc = document.get("training")
        raw = training_doc.get("train_iters") if isinstance(training_doc, dict) else None
        return raw if isinstance(raw, int) and raw > 0 else None
    training = scenario.training
    if training is None:
        return None
    if training.train_iters:
        return int(training.train_iters)
    if training.total_tokens:
        tokens_per_iteration = scenario.parallelism.global_batch_size * scenario.model.seq_length
        return max(1, round(training.total_tokens / tokens_per_iteration))
    return None


def _predicted(described_by: DescribedBy, detail: str, document: object) -> JobDescription:
    if not isinstance(document, dict):
        return JobDescription(
            described_by=described_by,
            detail=detail,
            error=f"{detail}: the scenario must be a mapping in the scenario format",
        )
    result = predict_documents([document])[0]
    if "error" in result:
        return JobDescription(
            described_by=described_by,
            detail=detail,
            document=document,
            train_iters=_train_iters(document),
            error=result["error"],
        )
    return JobDescription(
        described_by=described_by,
        detail=detail,
        document=document,
        prediction=result,
        train_iters=_train_iters(document),
    )


def describe_job(job: JobState, read_text: Callable[[str], str]) -> JobDescription:
    """Describe ``job`` (see the module docstring for the order).

    ``read_text(path)`` reads a scenario file named in the comment and raises a
    ``PlannerError`` (e.g. ``SourceError``) when it cannot. Never raises: a broken scenario
    file or an invalid scenario comes back as a description with ``error`` set.
    """
    path = scenario_path_from_comment(job)
    if path is not None:
        try:
            documents = read_documents(read_text(path), format_for_path(path), source=path)
        except PlannerError as exc:
            return JobDescription(described_by="scenario_file", detail=path, error=str(exc))
        if len(documents) != 1:
            return JobDescription(
                described_by="scenario_file",
                detail=path,
                error=f"{path}: holds {len(documents)} scenarios; a job needs exactly one",
            )
        document = documents[0]
        if isinstance(document, SpecError):
            return JobDescription(described_by="scenario_file", detail=path, error=str(document))
        return _predicted("scenario_file", path, document)

    gpu = gpu_key_for_gres_type(job.gpu_type) if job.gpu_type else None
    for label, text in (("command", job.command), ("batch_script", job.batch_script)):
        if not text:
            continue
        document = scenario_document_from_megatron_args(
            text, num_gpus=job.num_gpus or None, gpu=gpu, name=job.name or None
        )
        if document is None:
            continue
        description = _predicted("megatron_args", label, document)
        if description.error and gpu is None and job.gpu_type:
            return JobDescription(
                described_by="megatron_args",
                detail=label,
                document=document,
                train_iters=description.train_iters,
                error=f"hardware.gpu: the job's GPU type {job.gpu_type!r} is not in the "
                "catalog; attach a scenario with --comment=planner:scenario=PATH",
            )
        return description
    return JobDescription(
        described_by="none",
        detail="no planner:scenario=PATH comment and no Megatron-LM arguments found",
    )


def training_schedule(job: JobState) -> dict[str, Any] | None:
    """The evaluation and checkpoint intervals the job's command line or batch script states
    (``planner.forecast.arguments``: Megatron-LM, NeMo and torchtitan names), as a dict for the
    store; None when they state none (issue 14)."""
    text = "\n".join(t for t in (job.command, job.batch_script) if t)
    schedule = schedule_from_arguments(text) if text else None
    return None if schedule is None or schedule.empty else dataclasses.asdict(schedule)
