"""What a scheduler says about a job is bounded where it is stored and shown, and cannot forge
log lines (``planner.service.job_fields``, ``planner.service.log_format``).

Probes of the finding: a 10 MiB job name made every page of ``/v1/jobs`` 10.6 MB; newlines in a
name forged log lines; a ``?token=`` refused by the API was written to the access log."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from planner.service.job_fields import MARKER, NAME_CHARS, PAGE_CHARS, USER_CHARS, bound_job
from planner.service.log_format import log_handler
from planner.specs.job import JobStatus

from .conftest import Clock, JobFactory, ScriptedSource
from .test_service import app_for, cycle

MIB = 2**20


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """What the service's log handler (``planner serve``'s) writes during the test."""
    stream = io.StringIO()
    handler = log_handler(stream)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def test_a_huge_job_name_is_stored_cut_and_pages_stay_small(
    db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    huge = "n" * (10 * MIB)
    jobs = [
        make_job(
            job_id=str(i),
            name=huge,
            user="u" * MIB,
            comment="c" * MIB,
            partition="p" * MIB,
            account="a" * MIB,
            state_reason="r" * MIB,
            stdout_path="/" + "d" * (5 * 1024),
            status=JobStatus.PENDING,
        )
        for i in range(3)
    ]
    source.set_jobs(*jobs)
    with app_for(db_url, source, clock) as client:
        assert cycle(client) == {"slurm": "ok"}
        page = client.get("/v1/jobs", params={"limit": 10})
        detail = client.get("/v1/jobs/0").json()
    assert page.status_code == 200
    assert len(page.content) < 20_000  # was 10.6 MB per page
    listed = page.json()["jobs"][0]
    assert len(listed["name"]) <= PAGE_CHARS
    assert listed["name"].endswith(MARKER)
    assert len(listed["user"]) <= PAGE_CHARS
    assert listed["partition"].endswith(MARKER)
    assert listed["stdout_path"] is None  # longer than PATH_MAX: no file has that name
    state = detail["state"]  # stored whole up to the limits
    assert len(state["name"]) == NAME_CHARS
    assert state["name"].endswith(MARKER)
    assert len(state["user"]) == USER_CHARS
    assert state["comment"] == "c" * (4096 - len(MARKER)) + MARKER
    assert len(state["account"]) == 4096
    assert len(state["state_reason"]) == 4096


def test_short_fields_are_kept_whole(make_job: JobFactory) -> None:
    job = make_job(name="train-7b", comment="planner:scenario=/s/a.yaml", partition="gpu")
    assert bound_job(job, text_chars=4096, script_chars=2**20) is job
    long = make_job(comment="x" * 5000, batch_script="#!/bin/sh\n" + "y" * 100)
    bounded = bound_job(long, text_chars=4096, script_chars=50)
    assert bounded.comment == "x" * (4096 - len(MARKER)) + MARKER
    assert bounded.batch_script == "#!/bin/sh\n" + "y" * (40 - len(MARKER)) + MARKER


def test_a_newline_in_a_job_name_cannot_forge_a_log_line(
    db_url: str,
    source: ScriptedSource,
    clock: Clock,
    make_job: JobFactory,
    log_lines: io.StringIO,
) -> None:
    forged = "2030-01-01 00:00:00,000 CRITICAL planner.service: admin token rotated"
    source.set_jobs(make_job(name=f"train\n{forged}\r\x1b[2J\u2028x", status=JobStatus.PENDING))
    with app_for(db_url, source, clock) as client:
        assert cycle(client) == {"slurm": "ok"}
    lines = log_lines.getvalue().splitlines()
    new_job = [line for line in lines if "new job slurm/test/42" in line]
    assert len(new_job) == 1, lines
    assert "(train\\n2030-01-01 00:00:00,000 CRITICAL" in new_job[0]
    assert "\\r\\x1b[2J\\u2028x" in new_job[0]
    assert not any(line.startswith("2030-01-01") for line in lines)


def test_query_string_tokens_are_redacted_in_the_access_log(log_lines: io.StringIO) -> None:
    # uvicorn's access log line, as its protocols write it (client, method, path with the
    # query string, HTTP version, status)
    logging.getLogger("uvicorn.access").info(
        '%s - "%s %s HTTP/%s" %d',
        "127.0.0.1:51234",
        "GET",
        "/v1/jobs?token=s3cr3t-value&limit=5&access_token=abc&api_key=k",
        "1.1",
        401,
    )
    line = log_lines.getvalue()
    assert "s3cr3t" not in line
    assert "abc" not in line
    assert "=k" not in line
    assert "/v1/jobs?token=REDACTED&limit=5&access_token=REDACTED&api_key=REDACTED" in line


def test_a_traceback_is_indented_under_its_record(log_lines: io.StringIO) -> None:
    try:
        raise ValueError("bad\nINFO forged")
    except ValueError:
        logging.getLogger("planner.test").exception("failed")
    lines = log_lines.getvalue().splitlines()
    assert lines[0].endswith("planner.test: failed")
    assert all(line.startswith("    ") for line in lines[1:])
