"""Checks an HTTP response of the planner's app against the app's own ``/openapi.json``.

Used by the autouse fixture of ``tests/service/conftest.py``: every request the service tests
make through a ``TestClient`` has its status documented and its JSON body validated (JSON
Schema 2020-12, the dialect of OpenAPI 3.1, with the ``jsonschema`` library).
"""

from __future__ import annotations

import re
import weakref
from typing import Any

import fastapi.routing
import httpx
import jsonschema
from starlette.types import ASGIApp

_SPECS: dict[tuple[object, ...], dict[str, Any]] = {}
"""Each route table's OpenAPI document, built once per test process: an app builds its
document in about 0.6 CPU-s (pydantic's schema of every model), and the service tests build a
fresh app per test from the same routers."""


def _routes(app: ASGIApp) -> list[Any]:
    """Every route of ``app``, those of included routers too: newer FastAPI releases include a
    router lazily, as one route that ``fastapi.routing.iter_route_contexts`` opens (as their
    OpenAPI builder does); older ones copy its routes into ``app.routes``."""
    routes = list(getattr(app, "routes", ()))
    flatten = getattr(fastapi.routing, "iter_route_contexts", None)
    return list(flatten(routes)) if flatten is not None else routes


def _route_table(app: ASGIApp) -> tuple[object, ...] | None:
    """What decides the part of ``app``'s OpenAPI document this check reads (paths, methods,
    statuses, response schemas): per route its path, methods, endpoint, response model,
    status code, response class, declared responses and whether it is documented. Two apps
    with the same table publish the same responses. None when a route has no path (a kind of
    route this function cannot see into): that app's document is not shared."""
    table: list[object] = [type(app)]
    for route in _routes(app):
        path = getattr(route, "path", None)
        if path is None:
            return None
        endpoint = getattr(route, "endpoint", None)
        response_class = getattr(route, "response_class", None)
        responses = getattr(route, "responses", None) or {}
        table.append(
            (
                path,
                tuple(sorted(getattr(route, "methods", None) or ())),
                getattr(endpoint, "__module__", None),
                getattr(endpoint, "__qualname__", None),
                repr(getattr(route, "response_model", None)),
                getattr(route, "status_code", None),
                repr(getattr(response_class, "value", response_class)),
                tuple(
                    sorted(
                        (str(code), repr(answer.get("model")), tuple(answer.get("content", {})))
                        for code, answer in responses.items()
                    )
                ),
                getattr(route, "include_in_schema", None),
            )
        )
    return tuple(table)


_TABLES: weakref.WeakKeyDictionary[Any, tuple[tuple[int, ...], tuple[object, ...] | None]] = (
    weakref.WeakKeyDictionary()
)
"""Each app's route table (``_route_table``: about 5 ms of CPU, its routes opened one by one)
with the identities of the app's top-level routes it was read from: a service test makes
several requests to each app it builds."""


def _table_of(app: ASGIApp) -> tuple[object, ...] | None:
    """``_route_table(app)``, read again only when the app's top-level routes changed."""
    top = tuple(map(id, getattr(app, "routes", ())))
    kept = _TABLES.get(app)
    if kept is not None and kept[0] == top:
        return kept[1]
    table = _route_table(app)
    _TABLES[app] = (top, table)
    return table


def published_spec(app: ASGIApp) -> dict[str, Any]:
    """``app.openapi()``, shared by every app with the same route table (``_route_table``)."""
    key = _table_of(app)
    if key is None:
        return app.openapi()  # type: ignore[attr-defined,no-any-return]
    spec = _SPECS.get(key)
    if spec is None:
        spec = _SPECS[key] = app.openapi()  # type: ignore[attr-defined]
    return spec


def _template(spec: dict[str, Any], method: str, path: str) -> str | None:
    """The documented path template that serves ``path`` (the most literal one wins, as in the
    app's routing: ``/v1/jobs/{job_id}/stragglers`` before ``/v1/jobs/{job_id}``; parameters
    may hold slashes, as Kubernetes job ids do)."""
    best: tuple[int, str] | None = None
    for template, item in spec["paths"].items():
        if method.lower() not in item:
            continue
        pattern = "".join(
            ".+" if part.startswith("{") else re.escape(part)
            for part in re.split(r"(\{[^}]+\})", template)
        )
        if re.fullmatch(pattern, path):
            literal = len(re.sub(r"\{[^}]+\}", "", template))
            if best is None or literal > best[0]:
                best = (literal, template)
    return None if best is None else best[1]


def check_response(app: ASGIApp, response: httpx.Response) -> None:
    """Raise ``AssertionError`` when ``response`` (from ``app``) breaks the published schema:
    an undocumented status, or a JSON body that does not validate."""
    request = response.request
    spec = published_spec(app)
    template = _template(spec, request.method, request.url.path)
    if template is None:
        return  # docs pages, static files, the schema itself
    operation = spec["paths"][template][request.method.lower()]
    responses = operation["responses"]
    documented = responses.get(str(response.status_code)) or responses.get("default")
    assert documented is not None, (
        f"{request.method} {template}: status {response.status_code} is not in the "
        f"OpenAPI document ({sorted(responses)})"
    )
    content_type = response.headers.get("content-type", "").split(";")[0]
    if content_type != "application/json":
        assert content_type in documented.get("content", {}) or content_type in {
            c for r in responses.values() for c in r.get("content", {})
        }, f"{request.method} {template}: {content_type} is not documented"
        return
    schema = documented.get("content", {}).get("application/json", {}).get("schema")
    assert schema, f"{request.method} {template}: no JSON schema for {response.status_code}"
    root = {**schema, "components": spec.get("components", {})}
    try:
        jsonschema.validate(response.json(), root, cls=jsonschema.Draft202012Validator)
    except jsonschema.ValidationError as exc:
        raise AssertionError(
            f"{request.method} {template} {response.status_code}: the body does not "
            f"match the published schema: {exc.message} at {list(exc.absolute_path)}"
        ) from None
