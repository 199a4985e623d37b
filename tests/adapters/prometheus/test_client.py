"""PrometheusClient answers and errors, with httpx.MockTransport (the real-server paths are in
test_real_prometheus.py)."""

from __future__ import annotations

import math
from collections.abc import Callable

import httpx
import pytest

from adapters.prometheus import JobSelector, PrometheusClient, Sample, Series
from adapters.prometheus.client import quote, regex_escape
from planner.errors import SourcePermanentError, SourceTemporaryError


def client(handler: Callable[[httpx.Request], httpx.Response]) -> PrometheusClient:
    return PrometheusClient(
        "http://prom:9090/prefix/",
        timeout_s=3,
        transport=httpx.MockTransport(handler),
        bearer_token="t0k",
    )


def ok(data: object) -> httpx.Response:
    return httpx.Response(200, json={"status": "success", "data": data})


def test_vector_scalar_and_matrix_answers() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        q = dict(httpx.QueryParams(request.content.decode()))["query"]
        if q == "up" and request.url.path.endswith("/query"):
            return ok(
                {
                    "resultType": "vector",
                    "result": [
                        {"metric": {"__name__": "up", "job": "a"}, "value": [1700000000.5, "1"]},
                        {"metric": {"job": "b"}, "value": [1700000000.5, "NaN"]},
                    ],
                }
            )
        if q == "scalar(1)":
            return ok({"resultType": "scalar", "result": [1700000000, "+Inf"]})
        return ok(
            {
                "resultType": "matrix",
                "result": [{"metric": {"job": "a"}, "values": [[1, "1"], [2, "2.5"]]}],
            }
        )

    with client(handler) as c:
        up = c.query_vector("up", at_s=1700000000.5)
        assert up[0] == Sample(
            labels={"__name__": "up", "job": "a"}, value=1.0, timestamp_s=1700000000.5
        )
        assert math.isnan(up[1].value)
        assert c.query("scalar(1)") == [Sample(labels={}, value=math.inf, timestamp_s=1.7e9)]
        assert c.query_range("up", start_s=1, end_s=2, step_s=1) == [
            Series(labels={"job": "a"}, points=((1.0, 1.0), (2.0, 2.5)))
        ]
        with pytest.raises(SourcePermanentError, match="instant vector was expected"):
            c.query_vector("up[5m]")
    request = seen[0]
    assert request.method == "POST"
    assert request.url.path == "/prefix/api/v1/query"
    assert request.headers["Authorization"] == "Bearer t0k"
    form = dict(httpx.QueryParams(request.content.decode()))
    assert form == {"query": "up", "timeout": "3s", "time": "1700000000.500"}


@pytest.mark.parametrize(
    ("status", "body", "error", "match"),
    [
        (
            400,
            {"status": "error", "errorType": "bad_data", "error": "parse error"},
            SourcePermanentError,
            "bad query 'q': bad_data: parse error",
        ),
        (
            422,
            {"status": "error", "errorType": "execution", "error": "too many samples"},
            SourceTemporaryError,
            "execution: too many samples",
        ),
        (
            503,
            {"status": "error", "errorType": "timeout", "error": "query timed out"},
            SourceTemporaryError,
            "timeout",
        ),
        (502, "<html>bad gateway</html>", SourceTemporaryError, "HTTP 502"),
        (429, "slow down", SourceTemporaryError, "HTTP 429"),
        (401, "unauthorized", SourcePermanentError, "bearer token"),
        (404, "404 page not found", SourcePermanentError, "check the base URL"),
        (
            200,
            {"status": "success", "data": {"resultType": "streams", "result": []}},
            SourcePermanentError,
            "unexpected result type",
        ),
        (
            200,
            {
                "status": "success",
                "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1]}]},
            },
            SourcePermanentError,
            "malformed answer",
        ),
    ],
)
def test_errors_are_classified(
    status: int, body: object, error: type[Exception], match: str
) -> None:
    def handler(_: httpx.Request) -> httpx.Response:
        if isinstance(body, str):
            return httpx.Response(status, text=body)
        return httpx.Response(status, json=body)

    with client(handler) as c, pytest.raises(error, match=match) as err:
        c.query("q")
    assert str(err.value).startswith("prometheus: ")


def test_range_limits_are_checked_before_asking() -> None:
    with client(lambda _: ok({})) as c:
        with pytest.raises(ValueError, match="11000 points"):
            c.query_range("up", start_s=0, end_s=86400 * 7, step_s=1)
        with pytest.raises(ValueError, match="bad range"):
            c.query_range("up", start_s=10, end_s=0, step_s=1)


def test_promql_quoting_and_job_selectors() -> None:
    assert quote('a"b\\c') == '"a\\"b\\\\c"'
    assert regex_escape("pod-0.x") == "pod-0\\.x"
    sel = JobSelector.pods("research", "llama.70b")
    assert sel.promql(("training_iteration",)) == (
        '{__name__=~"training_iteration",namespace="research",pod=~"llama\\\\.70b.*"}'
    )
    with pytest.raises(ValueError, match="bad matcher"):
        JobSelector(matchers=(("job id", "=", "1"),))
