"""``planner simulate JOB_FILE [--url URL] [--source S] [--json]``: if this job were submitted
now, when would it start and finish (p10/p50/p90)?

The answer needs the live queue: which jobs run and wait, their ETAs, the nodes. The running
service holds it, so the command asks it (``POST /v1/simulate`` at ``--url``, default
``$PLANNER_URL`` or ``http://127.0.0.1:8080``) and prints its answer: the same function answers
the API and the command line, over the queue as the service sees it now. A queue snapshot file
would be stale by the time it is read and would lack the running jobs' ETAs, which is where the
answer comes from.

JOB_FILE (YAML or JSON, ``-`` for standard input) is the request body of ``/v1/simulate``
(``job:`` its GPUs, GPU type, partition or ClusterQueue, time limit or runtime; ``scenario:``
what it trains, in the ``planner predict`` format; ``source:``, ``samples:``), or a plain
scenario file (``planner predict``'s), which is taken as ``scenario:``. The API's bearer token
comes from ``--token-file`` or ``$PLANNER_TOKEN``.

Exit codes: 0 answered, 2 the request was invalid (the API's 422, naming the field; or an
unreadable JOB_FILE), 1 the service could not answer (unreachable, refused, busy: 429 says when
to retry).

This module imports typer and ``planner.errors`` only; the rest loads inside the command (no web
framework, no HTTP client library: the standard library's ``urllib``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated

import typer

from planner.errors import PlannerError, SpecError

EXIT_INVALID = 2
EXIT_UNAVAILABLE = 1
DEFAULT_URL = "http://127.0.0.1:8080"
#: Longest answer read from the service, bytes.
MAX_ANSWER_BYTES = 1 << 20
#: Largest token file, bytes.
MAX_TOKEN_BYTES = 4096
_SCENARIO_KEYS = frozenset({"model", "hardware", "parallelism", "training"})


def request_body(doc: object, *, source: str | None, samples: int | None) -> dict[str, object]:
    """The ``/v1/simulate`` body of a JOB_FILE document (a plain scenario becomes its
    ``scenario``); ``source`` and ``samples`` override the file's. Raises ``SpecError`` when the
    document is not a mapping."""
    if not isinstance(doc, dict):
        raise SpecError("JOB_FILE", "must be one mapping (job:, scenario:) or a scenario")
    body: dict[str, object] = dict(doc)
    if not {"job", "scenario"} & body.keys() and _SCENARIO_KEYS & body.keys():
        body = {"scenario": body}
    if source is not None:
        body["source"] = source
    if samples is not None:
        body["samples"] = samples
    return body


def _token(token_file: Path | None) -> str | None:
    if token_file is not None:
        from planner.cli_input import read_input_text

        text = read_input_text(str(token_file), max_bytes=MAX_TOKEN_BYTES).strip()
        if not text:
            raise SpecError("--token-file", f"{token_file} is empty")
        return text
    return os.environ.get("PLANNER_TOKEN") or None


def post_json(
    url: str, body: Mapping[str, object], *, token: str | None, timeout_s: float
) -> tuple[int, dict[str, object], dict[str, str]]:
    """POST ``body`` as JSON; returns (HTTP status, JSON answer: an object as read, headers).
    Raises ``PlannerError`` when the service cannot be reached or answers something not JSON
    or not an object."""
    import json
    import urllib.error
    import urllib.request

    if not url.startswith(("http://", "https://")):
        raise SpecError("--url", f"{url!r} is not an http(s) URL")
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            status, raw, got = response.status, response.read(MAX_ANSWER_BYTES), response.headers
    except urllib.error.HTTPError as exc:
        status, raw, got = exc.code, exc.read(MAX_ANSWER_BYTES), exc.headers
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PlannerError(
            f"cannot reach the planner at {url} ({reason}); start it with planner serve, or "
            "pass --url (PLANNER_URL)"
        ) from None
    try:
        answer = json.loads(raw)
    except ValueError:
        raise PlannerError(
            f"{url} answered HTTP {status} with something that is not JSON"
        ) from None
    if not isinstance(answer, dict) or not all(isinstance(k, str) for k in answer):
        raise PlannerError(f"{url} answered HTTP {status} with JSON that is not an object")
    return status, answer, {k.lower(): v for k, v in got.items()}


def _when(epoch_s: float | None) -> str:
    import datetime

    if epoch_s is None:
        return "beyond horizon"
    return datetime.datetime.fromtimestamp(epoch_s, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M")


def _hours(seconds: float | None) -> str:
    return "beyond horizon" if seconds is None else f"{seconds / 3600:.1f} h"


def _band(result: Mapping[str, object], key: str) -> dict[str, float | None]:
    """The p10/p50/p90 band ``result[key]`` (epoch s or s; null: beyond the horizon).
    Raises ``PlannerError`` naming the field when the answer does not hold one."""
    band = result.get(key)
    out: dict[str, float | None] = {}
    for q in ("p10", "p50", "p90"):
        value = band.get(q) if isinstance(band, Mapping) else "no band"
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)):
            raise PlannerError(f"the planner's answer has no {key}.{q} (got {value!r})")
        out[q] = value
    return out


def format_result(result: Mapping[str, object]) -> str:
    """The ``/v1/simulate`` answer as a table (times UTC). Raises ``PlannerError`` when one
    of its bands is malformed."""
    runtime_from = {
        "scenario": "the scenario's prediction",
        "runtime_s": "job.runtime_s",
        "time_limit": "its time limit",
    }.get(str(result.get("runtime_from")), str(result.get("runtime_from")))
    name = f" {result['name']!r}" if result.get("name") else ""
    lines = [
        f"job{name}: {result['num_gpus']} GPUs ({result.get('gpu_type') or 'any type'}) "
        f"submitted now to {result['source']}: {result['jobs_running']} running, "
        f"{result['jobs_pending']} waiting ahead; {result['samples']} samples on "
        f"{result['fleet']}",
        f"{'':9}{'p10':>18}{'p50':>18}{'p90':>18}",
    ]
    rows: tuple[tuple[str, str, Callable[[float | None], str]], ...] = (
        ("start", "start_s", _when),
        ("finish", "completion_s", _when),
        ("wait", "wait_s", _hours),
        ("runtime", "runtime_s", _hours),
    )
    for label, key, show in rows:
        band = _band(result, key)
        cells = "".join(f"{show(band[q]):>18}" for q in ("p10", "p50", "p90"))
        lines.append(f"{label:9}{cells}")
    lines.append(f"times UTC; runtime from {runtime_from}")
    return "\n".join(lines)


def simulate(
    job_file: Annotated[
        str, typer.Argument(help="The job (job:, scenario:) or a scenario file; - for stdin")
    ],
    *,
    url: Annotated[
        str, typer.Option("--url", envvar="PLANNER_URL", help="The planner service")
    ] = DEFAULT_URL,
    source: Annotated[
        str | None,
        typer.Option(help="The queue: scheduler or scheduler/cluster (default: the only one)"),
    ] = None,
    samples: Annotated[int | None, typer.Option(help="Monte Carlo samples (1-2000)")] = None,
    token_file: Annotated[
        Path | None,
        typer.Option("--token-file", help="A file holding the API's bearer token (PLANNER_TOKEN)"),
    ] = None,
    timeout_s: Annotated[float, typer.Option("--timeout", help="Seconds to wait")] = 120.0,
    json_out: Annotated[bool, typer.Option("--json", help="Print the API's JSON answer")] = False,
) -> None:
    """If this job were submitted now, when would it start and finish (p10/p50/p90)? Asks the
    running planner service, which holds the live queue (POST /v1/simulate)."""
    import json

    from planner.cli_input import input_documents

    try:
        docs = input_documents(job_file)
        if len(docs) != 1:
            raise SpecError(job_file, f"holds {len(docs)} documents; give one job")
        body = request_body(docs[0], source=source, samples=samples)
        token = _token(token_file)
    except SpecError as exc:
        typer.echo(f"planner: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None
    endpoint = url.rstrip("/") + "/v1/simulate"
    try:
        status, answer, headers = post_json(endpoint, body, token=token, timeout_s=timeout_s)
    except SpecError as exc:
        typer.echo(f"planner: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None
    except PlannerError as exc:
        typer.echo(f"planner: {exc}", err=True)
        raise typer.Exit(EXIT_UNAVAILABLE) from None
    if status != 200:
        error = answer.get("error") or answer.get("detail") or f"HTTP {status}"
        if status == 429:
            error = f"{error} (retry in {headers.get('retry-after', 'a few')} s)"
        typer.echo(f"planner: {error}", err=True)
        raise typer.Exit(EXIT_INVALID if status in (400, 413, 415, 422) else EXIT_UNAVAILABLE)
    try:
        typer.echo(json.dumps(answer) if json_out else format_result(answer))
    except PlannerError as exc:
        typer.echo(f"planner: {exc}", err=True)
        raise typer.Exit(EXIT_UNAVAILABLE) from None


__all__ = ["format_result", "post_json", "request_body", "simulate"]
