"""A small client of the Prometheus HTTP API (``/api/v1/query``, ``/api/v1/query_range``).

Only what the planner needs: instant and range queries (POSTed as forms, so long PromQL is fine)
and label names. Values come back as floats (``"NaN"``/``"+Inf"`` included), times as epoch
seconds. Every failure becomes a planner ``SourceError``:

* ``SourceTemporaryError`` (retry later): connection refused, timeouts, HTTP 5xx, 429, 503, and
  the server's own query ``timeout``/``execution``/``unavailable`` errors (HTTP 422/503);
* ``SourcePermanentError`` (fix the configuration or the query): malformed PromQL (HTTP 400
  ``bad_data``), authentication (401/403), wrong URL (404 or a body that is not the Prometheus
  API).

Prometheus API reference: https://prometheus.io/docs/prometheus/latest/querying/api/
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from planner.errors import SourcePermanentError, SourceTemporaryError

#: Prometheus refuses range queries above 11,000 points per series.
MAX_POINTS_PER_SERIES = 11_000

_TEMPORARY_ERROR_TYPES = frozenset({"timeout", "canceled", "execution", "unavailable", "internal"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """One series of an instant query: its labels (``__name__`` included when Prometheus kept
    it), its value and the evaluation time (epoch seconds)."""

    labels: Mapping[str, str]
    value: float
    timestamp_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Series:
    """One series of a range query (or of an instant query of a range selector, ``x[5m]``):
    ``points`` are ``(epoch seconds, value)`` pairs in time order."""

    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...] = field(default=())


class PrometheusClient:
    """Query one Prometheus server (or anything serving its API: Thanos, Mimir, VictoriaMetrics).

    ``base_url`` is the server root (``http://prometheus:9090``; a path prefix such as
    ``/prometheus`` is kept). ``timeout_s`` bounds each HTTP request and is passed to the server
    as its query ``timeout`` too. ``bearer_token`` and ``headers`` are sent with every request
    (e.g. ``X-Scope-OrgID`` for Mimir). ``transport`` is for tests (``httpx.MockTransport``).
    The name ``source`` labels the errors (``"prometheus"``).
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 10.0,
        bearer_token: str | None = None,
        headers: Mapping[str, str] | None = None,
        verify_tls: bool = True,
        transport: httpx.BaseTransport | None = None,
        source: str = "prometheus",
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        all_headers = {"Accept": "application/json", **(headers or {})}
        if bearer_token:
            all_headers["Authorization"] = f"Bearer {bearer_token}"
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.source = source
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout_s),
            headers=all_headers,
            verify=verify_tls,
            transport=transport,
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> PrometheusClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- queries -----------------------------------------------------------------------------

    def query(self, promql: str, *, at_s: float | None = None) -> list[Sample] | list[Series]:
        """Evaluate ``promql`` at ``at_s`` (epoch seconds; default: the server's now).

        Returns ``list[Sample]`` for an instant vector or a scalar (a scalar is one sample with
        no labels) and ``list[Series]`` when the expression is a range selector (``x[5m]``).
        Raises ``SourceTemporaryError`` / ``SourcePermanentError`` (module doc).
        """
        form = {"query": promql, "timeout": f"{self.timeout_s:g}s"}
        if at_s is not None:
            form["time"] = f"{at_s:.3f}"
        data = self._post("/api/v1/query", form, promql)
        kind, result = data.get("resultType"), data.get("result")
        if kind == "vector" and isinstance(result, list):
            return [self._sample(item, promql) for item in result]
        if kind == "scalar" and isinstance(result, list):
            t, v = self._point(result, promql)
            return [Sample(labels={}, value=v, timestamp_s=t)]
        if kind == "matrix" and isinstance(result, list):
            return [self._series(item, promql) for item in result]
        raise self._garbage(f"unexpected result type {kind!r}", promql)

    def query_vector(self, promql: str, *, at_s: float | None = None) -> list[Sample]:
        """Like :meth:`query` for expressions that give an instant vector or a scalar; raises
        ``SourcePermanentError`` when the expression gives a range (a bug in the query)."""
        result = self.query(promql, at_s=at_s)
        if result and isinstance(result[0], Series):
            raise SourcePermanentError(
                self.source, f"query {promql!r} returned a range, an instant vector was expected"
            )
        return [r for r in result if isinstance(r, Sample)]

    def query_range(
        self, promql: str, *, start_s: float, end_s: float, step_s: float
    ) -> list[Series]:
        """Evaluate ``promql`` every ``step_s`` seconds from ``start_s`` to ``end_s`` (epoch s).

        Raises ``ValueError`` for an empty or too finely stepped window (more than 11,000
        points, Prometheus' own limit) and ``SourceError`` as :meth:`query`.
        """
        if step_s <= 0 or end_s < start_s:
            raise ValueError(f"bad range: start {start_s}, end {end_s}, step {step_s}")
        if (end_s - start_s) / step_s + 1 > MAX_POINTS_PER_SERIES:
            raise ValueError(
                f"range {end_s - start_s:.0f} s at step {step_s:g} s exceeds "
                f"{MAX_POINTS_PER_SERIES} points; use a larger step"
            )
        form = {
            "query": promql,
            "start": f"{start_s:.3f}",
            "end": f"{end_s:.3f}",
            "step": f"{step_s:g}",
            "timeout": f"{self.timeout_s:g}s",
        }
        data = self._post("/api/v1/query_range", form, promql)
        result = data.get("result")
        if data.get("resultType") != "matrix" or not isinstance(result, list):
            raise self._garbage(f"unexpected result type {data.get('resultType')!r}", promql)
        return [self._series(item, promql) for item in result]

    def ready(self) -> bool:
        """True when the server answers ``/-/ready`` with 200; never raises."""
        try:
            return self._http.get("/-/ready").status_code == 200
        except httpx.HTTPError:
            return False

    # --- plumbing ----------------------------------------------------------------------------

    def _post(self, path: str, form: dict[str, str], promql: str) -> dict[str, Any]:
        data = self._request("POST", path, data=form, what=promql)
        if not isinstance(data, dict):
            raise self._garbage("'data' is not an object", promql)
        return data

    def _request(
        self,
        method: str,
        path: str,
        *,
        what: str,
        data: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
    ) -> Any:
        url = f"{self.base_url}{path}"
        try:
            response = self._http.request(method, path, data=data, params=params)
        except httpx.TimeoutException:
            raise SourceTemporaryError(
                self.source, f"{url} did not answer within {self.timeout_s:g} s"
            ) from None
        except httpx.TransportError as exc:
            raise SourceTemporaryError(self.source, f"cannot reach {url}: {exc}") from None
        try:
            body = response.json()
        except ValueError:
            body = None
        status = response.status_code
        if isinstance(body, dict) and body.get("status") == "error":
            error_type = str(body.get("errorType", ""))
            message = f"{error_type or 'error'}: {body.get('error', '')} (HTTP {status})"
            if status == 400 or error_type == "bad_data":
                raise SourcePermanentError(self.source, f"bad query {what!r}: {message}")
            if error_type in _TEMPORARY_ERROR_TYPES or status >= 500 or status in (422, 429):
                raise SourceTemporaryError(self.source, f"query {what!r} failed: {message}")
            raise SourcePermanentError(self.source, f"query {what!r} failed: {message}")
        if status in (401, 403):
            raise SourcePermanentError(
                self.source, f"{url}: HTTP {status}, check the bearer token or headers"
            )
        if status == 429 or status >= 500:
            raise SourceTemporaryError(self.source, f"{url}: HTTP {status}")
        if status != 200 or not isinstance(body, dict) or body.get("status") != "success":
            raise SourcePermanentError(
                self.source,
                f"{url}: HTTP {status} and not a Prometheus API answer; check the base URL "
                f"(it should be the server root, e.g. http://prometheus:9090)",
            )
        return body.get("data")

    def _garbage(self, why: str, what: str) -> SourcePermanentError:
        return SourcePermanentError(self.source, f"query {what!r}: malformed answer: {why}")

    def _point(self, pair: Any, what: str) -> tuple[float, float]:
        if not isinstance(pair, list) or len(pair) != 2:
            raise self._garbage(f"a point is not a [time, value] pair: {pair!r}", what)
        try:
            return float(pair[0]), _value(pair[1])
        except (TypeError, ValueError):
            raise self._garbage(f"a point is not numeric: {pair!r}", what) from None

    def _labels(self, item: Any, what: str) -> dict[str, str]:
        labels = item.get("metric") if isinstance(item, dict) else None
        if not isinstance(labels, dict):
            raise self._garbage("a result has no 'metric' object", what)
        return {str(k): str(v) for k, v in labels.items()}

    def _sample(self, item: Any, what: str) -> Sample:
        labels = self._labels(item, what)
        t, v = self._point(item.get("value"), what)
        return Sample(labels=labels, value=v, timestamp_s=t)

    def _series(self, item: Any, what: str) -> Series:
        labels = self._labels(item, what)
        values = item.get("values")
        if not isinstance(values, list):
            raise self._garbage("a series has no 'values' list", what)
        return Series(labels=labels, points=tuple(self._point(p, what) for p in values))


def _value(text: Any) -> float:
    """A Prometheus sample value (a string: ``"1.5"``, ``"NaN"``, ``"+Inf"``) as a float."""
    if not isinstance(text, str):
        raise TypeError("sample values are strings in the Prometheus API")
    return float(text)  # float() understands "NaN", "+Inf", "-Inf"


def quote(value: str) -> str:
    """``value`` as a PromQL string literal (double quotes, backslash escapes)."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def regex_escape(value: str) -> str:
    """``value`` escaped for use inside a PromQL (RE2) regex matcher (before :func:`quote`)."""
    special = set(r".+*?()|[]{}^$\\")
    return "".join(f"\\{c}" if c in special else c for c in value)
