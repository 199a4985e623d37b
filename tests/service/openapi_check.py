"""Checks an HTTP response of the planner's app against the app's own ``/openapi.json``.

Used by the autouse fixture of ``tests/service/conftest.py``: every request the service tests
make through a ``TestClient`` has its status documented and its JSON body validated (JSON
Schema 2020-12, the dialect of OpenAPI 3.1, with the ``jsonschema`` library).
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import jsonschema
from starlette.types import ASGIApp


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
    spec = app.openapi()  # type: ignore[attr-defined]
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
