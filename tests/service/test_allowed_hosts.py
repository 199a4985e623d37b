"""Every request's ``Host`` is checked against ``allowed_hosts`` (``planner.service.api.hosts``).

Probe of the finding: no Host-header check on a server that serves anonymous reads, so a page
that rebinds its own name to 127.0.0.1 (DNS rebinding) could read ``/v1/jobs`` from a browser
on the planner's machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from adapters.logs import LogTailer
from planner.service.api.hosts import host_allowed, host_of
from planner.service.main import create_app
from planner.service.settings import Settings
from planner.service.store.sql import SqlStore

from .asgi_probe import send_request
from .conftest import Clock, ScriptedSource


def _client(db_url: str, source: ScriptedSource, clock: Clock, **settings: object) -> TestClient:
    app = create_app(
        Settings(database_url=db_url, **settings),  # type: ignore[arg-type]
        store=SqlStore(db_url),
        sources=[source],
        reader=LogTailer(),
        clock=clock,
        start_loops=False,
    )
    return TestClient(app, base_url="http://localhost")


def test_a_dns_rebinding_host_is_refused_on_every_route(
    db_url: str, source: ScriptedSource, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PLANNER_ALLOWED_HOSTS")  # the default: loopback names
    with _client(db_url, source, clock) as client:
        app = client.app

        async def get(path: str, host: str | None) -> tuple[int | None, dict[str, object]]:
            headers = {} if host is None else {"host": host}
            answer = await send_request(app, "GET", path, headers=headers)
            return answer.status, json.loads(answer.body or b"{}")

        for path in ("/v1/jobs", "/healthz", "/metrics", "/openapi.json"):
            status, body = client.portal.call(get, path, "evil.example:8080")  # type: ignore[union-attr]
            assert status == 421, (path, status)
            assert str(body["error"]).startswith("host: 'evil.example' is not one of allowed_hosts")
        for host in (
            "localhost:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
            "10.1.2.3:8080",
            "LOCALHOST.",
        ):
            status, _ = client.portal.call(get, "/v1/jobs", host)  # type: ignore[union-attr]
            assert status == 200, host
        spec = client.get("/openapi.json").json()
    assert "421" in spec["paths"]["/v1/jobs"]["get"]["responses"]


def test_allowed_hosts_is_a_setting(
    db_url: str, source: ScriptedSource, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PLANNER_ALLOWED_HOSTS")
    assert Settings().allowed_hosts == ["localhost", "127.0.0.1", "::1"]
    monkeypatch.setenv("PLANNER_ALLOWED_HOSTS", '["planner.example.org", "*.svc.cluster.local"]')
    assert Settings().allowed_hosts == ["planner.example.org", "*.svc.cluster.local"]
    with _client(db_url, source, clock) as client:

        async def status(host: str) -> int | None:
            return (
                await send_request(client.app, "GET", "/healthz", headers={"host": host})
            ).status

        call = client.portal.call  # type: ignore[union-attr]
        assert call(status, "planner.example.org") == 200
        assert call(status, "planner.planner.svc.cluster.local:8080") == 200
        assert call(status, "localhost") == 421  # no longer listed
        assert call(status, "evil.svc.cluster.local.evil.example") == 421
    # the security page says how to list the names a proxy or an Ingress serves
    security = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    assert "PLANNER_ALLOWED_HOSTS='[\"planner.example.org\"]'" in security


def test_host_header_rules() -> None:
    assert host_of("Example.ORG:443") == "example.org"
    assert host_of("[::1]:8080") == "::1"
    assert host_of("::1") == "::1"
    assert not host_allowed("", ["*"])
    assert host_allowed("anything.example", ["*"])
    assert host_allowed("a.b.example", ["*.example"])
    assert not host_allowed("example", ["*.example"])
    assert host_allowed("192.0.2.7", [])  # an address is never a rebinding page's name
