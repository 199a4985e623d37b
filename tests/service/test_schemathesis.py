"""Schemathesis over ``/openapi.json`` against a real planner process.

The planner of ``tests/deploy/planner_feed.py`` (the real app, ingest loop and store, fed by a
scripted Slurm source so jobs exist) is served by uvicorn; ``schemathesis run`` tests every
operation (examples, coverage, fuzzing and the stateful phase over the OpenAPI links, e.g.
``GET /v1/jobs`` -> ``GET /v1/jobs/{job_id}``) with every check but one, as an admin and without
a token, and must find nothing: no 5xx, no undocumented status, content type or header, no body
off its schema, no request that needed a token accepted without one.

``POST /v1/reviews`` runs under its budgets (``limits.review_*``, tightened here so that
generated bodies meet them): the HAR of the run shows how many requests each review operation
got and that they include reviews that ran (the request model's example) and reviews refused
by a budget.

Left out: ``positive_data_acceptance``. The scenario, explore and recommend documents are
modelled by their top-level fields only (``planner.service.api.models``: the format's own parser
is the authority and answers 422 naming the field), so a schema-valid document may still be an
invalid scenario; the 422 is documented.

When first run, Schemathesis found 13 contract mismatches (undocumented 404/400, wrong
content types, two error shapes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from .conftest import ADMIN_TOKEN, write_token_file
from .test_serve_process import REPO, free_port

pytestmark = pytest.mark.integration

#: Examples per operation and phase: ~2,000 requests in about a minute on 2 cores.
MAX_EXAMPLES = 40


def test_schemathesis_finds_no_failure(tmp_path: Path) -> None:
    pytest.importorskip("schemathesis", reason="pip install -e .[dev] (schemathesis)")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "planner.log"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PLANNER_AUTH__TOKEN_FILE": str(write_token_file(tmp_path / "tokens")),
        "PLANNER_LIMITS__EXPLORE_TIME_BUDGET_S": "2",
        "PLANNER_LIMITS__QUEUE": "64",
        "PLANNER_LIMITS__REVIEW_TIME_BUDGET_S": "5",
        "PLANNER_LIMITS__REVIEW_MAX_SAMPLES": "500",
        "PLANNER_LIMITS__REVIEW_MAX_HORIZON_DAYS": "120",
    }
    with log.open("wb") as out:
        planner = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.deploy.planner_feed",
                "--port",
                str(port),
                "--workdir",
                str(tmp_path / "feed"),
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
    try:
        deadline = time.monotonic() + 180  # a hang detector: slow starts happen on busy machines
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/v1/jobs", timeout=2).json()["jobs"]:
                    break
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            time.sleep(0.5)
        else:
            pytest.fail(f"the fed planner did not start:\n{log.read_text()[-3000:]}")
        report = tmp_path / "schemathesis.txt"
        har = tmp_path / "schemathesis.har"
        with report.open("w") as out:
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "schemathesis.cli",
                    "run",
                    f"{url}/openapi.json",
                    "--checks",
                    "all",
                    "--exclude-checks",
                    "positive_data_acceptance",
                    "--max-examples",
                    str(MAX_EXAMPLES),
                    "--workers",
                    "1",
                    "--seed",
                    "16",
                    "-H",
                    f"Authorization: Bearer {ADMIN_TOKEN}",
                    "--report",
                    "har",
                    "--report-har-path",
                    str(har),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=900,
                check=False,
                env={**os.environ, "NO_COLOR": "1"},
            )
        text = report.read_text()
        tail = text[text.find("FAILURES") :] if "FAILURES" in text else text[-4000:]
        assert proc.returncode == 0, tail[:8000]
        spec = httpx.get(f"{url}/openapi.json", timeout=10).json()
        operations = sum(len(item) for item in spec["paths"].values())
        assert f"Tested: {operations}" in text, text[-2000:]  # every operation
        reviews = review_requests(har)
        print("review requests by operation and status:", sorted(reviews.items(), key=str))
        posted = {
            status: n
            for (op, status), n in reviews.items()
            if op == "POST /v1/reviews" and isinstance(status, int)
        }
        assert sum(posted.values()) >= MAX_EXAMPLES, reviews
        assert posted.get(200, 0) >= 1, reviews  # a review ran
        assert reviews[("POST /v1/reviews", "refused by a limits.review_ budget")] >= 1, reviews
        assert not any(status >= 500 for status in posted), reviews
        for op in ("GET /v1/reviews", "GET /v1/reviews/latest", "GET /v1/reviews/queue"):
            assert any(o == op for o, _ in reviews), (op, reviews)
        assert planner.poll() is None, "the planner died under Schemathesis"
        assert "Traceback" not in log.read_text()
    finally:
        planner.kill()
        planner.wait(10)


def review_requests(har: Path) -> Counter[tuple[str, object]]:
    """Requests to the review operations in a HAR file: ``(operation, status)`` counts, and
    ``(POST /v1/reviews, "refused by a limits.review_ budget")`` for the 422s naming one."""
    counts: Counter[tuple[str, object]] = Counter()
    for entry in json.loads(har.read_text())["log"]["entries"]:
        request, response = entry["request"], entry["response"]
        path = httpx.URL(request["url"]).path
        if not path.startswith("/v1/reviews"):
            continue
        operation = f"{request['method']} {path}"
        counts[(operation, response["status"])] += 1
        body = (response.get("content") or {}).get("text") or ""
        if response["status"] == 422 and '"error":"limits.review_' in body.replace(" ", ""):
            counts[(operation, "refused by a limits.review_ budget")] += 1
    return counts
