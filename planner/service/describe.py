"""How the planner learns what a job trains, in order of precedence.

1. A scenario file named in the job's comment: ``planner:scenario=PATH`` (Slurm
   ``--comment=planner:scenario=/path/job.yaml``; a relative path is taken from the job's
   working directory). YAML, JSON or a one-line JSONL, in the scenario format.
2. The job's launch, read by the launch readers (``planner.launch.describe``): its batch
   script or command line and the config files they name (torchtitan, NeMo, Megatron-Bridge,
   Megatron-LM, Megatron-DeepSpeed, HF Trainer / TRL / accelerate, Axolotl, LLaMA-Factory,
   torchtune, LLM Foundry, PyTorch FSDP scripts), read under the job-file rules; the hardware
   comes from the job's GPU allocation. ``described_by`` names the reader.
3. Nothing: the job is still listed, marked ``described_by: none``.

What is described once and kept (each cache bounded in entries and bytes, least recently used
dropped first; each caller gets its own copy): a scenario file's description by the digest of
its format and text; a launch's description by its content (command, batch script, objects,
environment, allocation, name, GPU type) with what each file it read gave (text or error, as
the job's own read gives it): a job of the same launch whose files read the same gets the kept
one, so a changed file, or a job that may not read it, is described afresh; the training
schedule by the launch text.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import pickle
import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypedDict

from planner.catalog import gpu_key_for_gres_type
from planner.errors import PlannerError, SourceError, SpecError
from planner.forecast.arguments import schedule_from_arguments
from planner.launch.describe import LaunchDescription, describe_launch
from planner.launch.types import Launch
from planner.scenario import format_for_path, parse_scenario, read_documents
from planner.scenario.documents import DocumentError, PredictedJson, predict_results
from planner.service.lru import Lru
from planner.specs.job import JobState

_SCENARIO_COMMENT = re.compile(r"planner:scenario=(\S+)")
_TRACE_COMMENT = re.compile(r"planner:trace=(\S+)")
_TRACE_META_COMMENT = re.compile(r"planner:trace-meta=(\S+)")


class LaunchFactsJson(TypedDict):
    """Where the values of a launch description came from (``planner describe --json``'s
    fields besides the scenario and the prediction): ``provenance`` (dotted field -> where its
    value came from), ``assumed`` (fields filled by documented defaults), ``unknown`` (fields no
    source determined), ``launch`` (facts outside the scenario format), ``notes``, and
    ``log_read`` (whether the head of the job's log was read as a witness)."""

    provenance: dict[str, str]
    assumed: list[str]
    unknown: list[str]
    launch: dict[str, object]
    notes: list[str]
    log_read: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class JobDescription:
    """What the planner knows a job trains.

    ``document`` is the scenario document (scenario-format object) or None; ``prediction`` the
    ``planner predict --json`` object for it (a ``PredictedJson``, as the store keeps it; None
    when the scenario is invalid: ``error`` says why); ``train_iters`` the total iterations the
    job runs, when the description says. ``described_by`` is ``scenario_file``, a launch
    reader's name (``torchtitan``, ``megatron``, ...) or ``none``. ``facts``: where a launch
    description's values came from (:class:`LaunchFactsJson`; launch descriptions only).
    """

    described_by: str
    detail: str
    document: dict[str, object] | None = None
    prediction: dict[str, object] | None = None
    train_iters: int | None = None
    error: str | None = None
    facts: LaunchFactsJson | None = None


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
        job.launch_manifest or "",
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


def _train_iters(document: Mapping[str, object]) -> int | None:
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


def _digest(*parts: str) -> bytes:
    """SHA-256 of ``parts`` (a cache key that keeps no text of a user's file)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.digest()


class _PredictionCache:
    """The predictions of the last ``size`` scenario documents, by the document's canonical
    JSON: a prediction is a pure function of its document, and a cluster's jobs name the same
    few scenarios many times over (in the load benchmark 10,000 jobs name 3,200 files holding
    600 distinct documents), so each is predicted once. Callers get their own copies;
    thread-safe (the API and the ingest loop describe jobs concurrently)."""

    def __init__(self, size: int) -> None:
        self._kept: Lru[str, tuple[PredictedJson | DocumentError, int | None]] = Lru(
            max_entries=size
        )

    def predict(
        self, document: Mapping[str, object]
    ) -> tuple[PredictedJson | DocumentError, int | None]:
        """``(predict_results([document])[0], _train_iters(document))``."""
        try:
            key = json.dumps(document, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError):  # not plain JSON (a YAML date, NaN): predicted afresh
            return predict_results([document])[0], _train_iters(document)
        hit = self._kept.get(key)
        if hit is None:
            hit = (predict_results([document])[0], _train_iters(document))
            self._kept.put(key, hit)
        return copy.deepcopy(hit[0]), hit[1]


#: Scenario documents whose predictions are kept (a few MiB).
PREDICTION_CACHE_SIZE = 4096
_predictions = _PredictionCache(PREDICTION_CACHE_SIZE)

#: Bounds of each cache of descriptions (launches, scenario files' texts): entries, and bytes
#: of the pickled descriptions they keep (a launch's description is a few KiB).
DESCRIPTION_CACHE_ENTRIES = 4096
DESCRIPTION_CACHE_BYTES = 32 << 20

#: Scenario files' descriptions by the digest of their format and text (a cluster's jobs name
#: thousands of files holding a few hundred distinct scenarios): the pickled (document, its
#: prediction, train_iters) of a file holding one mapping.
_scenario_files: Lru[bytes, bytes] = Lru(
    max_entries=DESCRIPTION_CACHE_ENTRIES, max_bytes=DESCRIPTION_CACHE_BYTES, weigh=len
)


def _predicted(described_by: str, detail: str, document: object) -> JobDescription:
    if not isinstance(document, dict):
        return JobDescription(
            described_by=described_by,
            detail=detail,
            error=f"{detail}: the scenario must be a mapping in the scenario format",
        )
    result, train_iters = _predictions.predict(document)
    return _with_prediction(described_by, detail, document, result, train_iters)


def _with_prediction(
    described_by: str,
    detail: str,
    document: dict[str, object],
    result: PredictedJson | DocumentError,
    train_iters: int | None,
) -> JobDescription:
    if "error" in result:
        return JobDescription(
            described_by=described_by,
            detail=detail,
            document=document,
            train_iters=train_iters,
            error=result["error"],
        )
    return JobDescription(
        described_by=described_by,
        detail=detail,
        document=document,
        prediction=dict(result),
        train_iters=train_iters,
    )


def describe_job(
    job: JobState, read_text: Callable[[str], str], *, log_text: str | None = None
) -> JobDescription:
    """Describe ``job`` (see the module docstring for the order).

    ``read_text(path)`` reads a scenario file named in the comment, or a file the launch names,
    and raises a ``PlannerError`` (e.g. ``SourceError``) when it cannot. ``log_text``: the head
    of the job's log, when it is readable: what the framework printed of its configuration
    fills what the launch left open and is checked against what it said
    (``planner.launch.witness``). Never raises: a broken scenario file or an invalid scenario
    comes back as a description with ``error`` set.
    """
    path = scenario_path_from_comment(job)
    if path is not None:
        try:
            text = read_text(path)
            fmt = format_for_path(path)
            key = _digest(fmt, text)
            kept = _scenario_files.get(key)
            if kept is not None:  # a file of the same text, described before (pickled here)
                document, result, train_iters = pickle.loads(kept)
                return _with_prediction("scenario_file", path, document, result, train_iters)
            documents = read_documents(text, fmt, source=path)
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
        if not isinstance(document, dict):
            return _predicted("scenario_file", path, document)
        result, train_iters = _predictions.predict(document)
        # what one mapping's text gives depends on nothing else (its path only names it)
        _scenario_files.put(key, pickle.dumps((document, result, train_iters)))
        return _with_prediction("scenario_file", path, document, result, train_iters)

    return describe_from_launch(job, read_text, log_text=log_text)


class _JobFiles:
    """The files a job's launch names, read under the job-file rules (``read_text`` is the
    source's ``read_text_file`` bound to the job); each path is read once, and what came of it
    (its text or the error) kept: ``exists`` reads the file. ``asked``: the paths asked for
    since :meth:`record`, in order, with the digest of what came of each (:meth:`outcome`)."""

    def __init__(self, read_text: Callable[[str], str]) -> None:
        self._read = read_text
        self._outcomes: dict[str, str | PlannerError] = {}
        self.asked: dict[str, bytes] = {}

    def _get(self, path: str) -> str | PlannerError:
        found = self._outcomes.get(path)
        if found is None:
            try:
                found = self._read(path)
            except PlannerError as exc:
                found = exc
            except (UnicodeDecodeError, ValueError, OSError) as exc:
                found = SourceError(path, f"not read: {type(exc).__name__}")
            self._outcomes[path] = found
        if path not in self.asked:
            self.asked[path] = self.outcome(path)
        return found

    def outcome(self, path: str) -> bytes:
        """Digest of what reading ``path`` gives this job: its text, or the error's kind and
        message (a file another job may read but this one may not is another outcome)."""
        found = self._get(path) if path not in self._outcomes else self._outcomes[path]
        if isinstance(found, str):
            return _digest("text", found)
        return _digest("error", type(found).__qualname__, str(found))

    def record(self) -> None:
        """Count only the paths asked for from now on in ``asked``."""
        self.asked = {}

    def read_text(self, path: str) -> str:
        found = self._get(path)
        if isinstance(found, PlannerError):
            raise found
        return found

    def exists(self, path: str) -> bool:
        return isinstance(self._get(path), str)


@dataclass(frozen=True, slots=True)
class _Described:
    """A launch's description and what reading each file it read gave (path ->
    :meth:`_JobFiles.outcome`, in the order read): valid for a job of the same launch whose
    reads of these paths give the same, since a description is a function of its launch and
    of what its files held. ``description``: pickled when it holds mappings (each job gets
    its own copy), else itself (only text and numbers: ``described_by: none``, most of a
    cluster's jobs before their scripts are read)."""

    reads: tuple[tuple[str, bytes], ...]
    description: JobDescription | bytes

    @classmethod
    def of(cls, description: JobDescription, reads: tuple[tuple[str, bytes], ...]) -> _Described:
        mutable = (description.document, description.prediction, description.facts)
        kept = description if mutable == (None, None, None) else pickle.dumps(description)
        return cls(reads=reads, description=kept)

    def get(self) -> JobDescription | None:
        """The description (a copy of its mappings)."""
        if isinstance(self.description, JobDescription):
            return self.description
        found = pickle.loads(self.description)
        return found if isinstance(found, JobDescription) else None

    @property
    def size(self) -> int:
        """Bytes it holds, roughly."""
        kept = self.description
        own = len(kept) if isinstance(kept, bytes) else 256 + len(kept.detail + (kept.error or ""))
        return own + sum(len(p) + len(d) + 64 for p, d in self.reads)


#: Descriptions kept per launch: jobs of one launch whose files differ (a config file edited
#: between two submissions, a user who may not read what another may).
LAUNCH_VARIANTS = 4

#: Launches' descriptions by the launch's content (:func:`_launch_key`), newest first.
_launches: Lru[bytes, tuple[_Described, ...]] = Lru(
    max_entries=DESCRIPTION_CACHE_ENTRIES,
    max_bytes=DESCRIPTION_CACHE_BYTES,
    weigh=lambda variants: sum(v.size for v in variants),
)


def _launch_key(launch: Launch, gpu_type: str | None) -> bytes:
    """Digest of everything of ``launch`` (but its log) and the job's GPU type: what a launch's
    description depends on besides the files it reads."""
    fields = [
        repr(getattr(launch, f.name))
        for f in dataclasses.fields(launch)
        if f.name not in {"manifest", "env", "log_text"}
    ]
    manifest = json.dumps(launch.manifest, sort_keys=True, default=repr) if launch.manifest else ""
    env = json.dumps(sorted(launch.env.items())) if launch.env else ""
    return _digest(manifest, env, gpu_type or "", *fields)


def _described_before(key: bytes, files: _JobFiles) -> JobDescription | None:
    """The description kept for the launch ``key`` whose files read as they did then."""
    for kept in _launches.get(key) or ():
        if all(files.outcome(path) == digest for path, digest in kept.reads):
            return kept.get()
    return None


def _remember(key: bytes, files: _JobFiles, description: JobDescription) -> None:
    made = _Described.of(description, tuple(files.asked.items()))
    older = [kept for kept in _launches.get(key) or () if kept.reads != made.reads]
    _launches.put(key, (made, *older[: LAUNCH_VARIANTS - 1]))


def _manifest(job: JobState) -> tuple[Mapping[str, object], ...]:
    """The Kubernetes object of ``job`` (``JobState.launch_manifest``), parsed; () for none."""
    if not job.launch_manifest:
        return ()
    try:
        document = json.loads(job.launch_manifest)
    except (ValueError, RecursionError):
        return ()
    return (document,) if isinstance(document, dict) else ()


def launch_of(job: JobState) -> Launch:
    """The launch of ``job`` as the launch readers take it."""
    gpu = gpu_key_for_gres_type(job.gpu_type) if job.gpu_type else None
    manifest = _manifest(job)
    return Launch(  # the object, when there is one, says all the command says and its env
        manifest=manifest,
        command=None if manifest else job.command,
        batch_script=None if manifest else job.batch_script,
        work_dir=job.work_dir,
        num_gpus=job.num_gpus,
        num_nodes=job.num_nodes,
        gpu=gpu,
        name=job.name,
        script_name=posixpath.basename(job.command or "") if job.batch_script else "",
        per_node=job.scheduler == "kubernetes",
    )


def describe_from_launch(
    job: JobState, read_text: Callable[[str], str], *, log_text: str | None = None
) -> JobDescription:
    """Describe ``job`` from its launch (``planner.launch.describe.describe_launch``), with the
    head of its log as a witness when given."""
    if not (job.batch_script or job.command):
        return JobDescription(
            described_by="none",
            detail="no planner:scenario=PATH comment and no command or batch script to read",
        )
    launch = dataclasses.replace(launch_of(job), log_text=log_text)
    files = _JobFiles(read_text)
    # a launch many jobs share (a script submitted again and again, an array's tasks) is
    # described once while what it reads stays as it was; a job's own log is not kept
    key = _launch_key(launch, job.gpu_type) if log_text is None else None
    if key is not None:
        kept = _described_before(key, files)
        if kept is not None:
            return kept
    files.record()
    described = describe_launch(launch, files)
    if not described.recognised:
        description = JobDescription(
            described_by="none",
            detail=f"no planner:scenario=PATH comment; {described.error or described.detail}",
        )
    else:
        description = _from_launch_description(job, launch, described)
    if key is not None:
        _remember(key, files, description)
    return description


def _from_launch_description(
    job: JobState, launch: Launch, described: LaunchDescription
) -> JobDescription:
    facts: LaunchFactsJson = {
        "provenance": described.provenance,
        "assumed": list(described.assumed),
        "unknown": list(described.unknown),
        "launch": described.launch,
        "notes": list(described.notes),
        "log_read": launch.log_text is not None,
    }
    document = described.scenario or None
    error = described.error
    predicted = described.predicted
    prediction: dict[str, object] | None = None
    if predicted is not None and "error" in predicted:
        error = predicted["error"]
        if launch.gpu is None and job.gpu_type:
            error = (
                f"hardware.gpu: the job's GPU type {job.gpu_type!r} is not in the catalog; "
                "attach a scenario with --comment=planner:scenario=PATH"
            )
    elif predicted is not None:
        prediction = dict(predicted)
    return JobDescription(
        described_by=described.described_by,
        detail=described.detail,
        document=document,
        prediction=prediction,
        train_iters=described.train_iters,
        error=error,
        facts=facts,
    )


#: Training schedules by the digest of the launch text they were read from (a function of it).
_schedules: Lru[bytes, tuple[dict[str, object] | None]] = Lru(max_entries=DESCRIPTION_CACHE_ENTRIES)


def training_schedule(job: JobState) -> dict[str, object] | None:
    """The evaluation and checkpoint intervals the job's command line or batch script states
    (``planner.forecast.arguments``: Megatron-LM, NeMo and torchtitan names), as a dict for the
    store (a new one each call); None when they state none."""
    text = "\n".join(t for t in (job.command, job.batch_script) if t)
    if not text:
        return None
    key = _digest(text)
    kept = _schedules.get(key)
    if kept is None:
        schedule = schedule_from_arguments(text)
        kept = (None if schedule.empty else dataclasses.asdict(schedule),)
        _schedules.put(key, kept)
    return None if kept[0] is None else dict(kept[0])
