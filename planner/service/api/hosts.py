"""The ``Host`` header check of every request (``allowed_hosts``): a defence against DNS
rebinding.

A web page on ``evil.example`` can make the browser of someone on the planner's machine (or
network) resolve ``evil.example`` to the planner's address and then read its anonymous
endpoints (``/v1/jobs``) as same-origin requests; the browser still sends ``Host:
evil.example``. :class:`AllowedHostsMiddleware` answers such a request with **421** (Misdirected
Request, the API's error shape naming the setting) before any route runs, and a request
without a ``Host`` header with **400**.

A host is allowed when it is an entry of ``allowed_hosts`` (case-insensitive, port and a
trailing dot ignored), matches an entry ``*.suffix`` (any name under ``suffix``), when an entry
is ``*`` (no check: behind a proxy that checks it), or when it is an IP address literal: the
page of a rebinding attack is always served under a name it controls, never under the
planner's own address, and Kubernetes probes and Prometheus scrapes use the pod's address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from planner.service.api.errors import error_response, openapi_operations

__all__ = ["AllowedHostsMiddleware", "document_hosts", "host_allowed", "host_of"]


def host_of(header: str) -> str:
    """The host name or address of a ``Host`` header value, lower case, without its port,
    brackets or trailing dot."""
    value = header.strip().lower()
    if value.startswith("["):  # [v6]:port
        return value[1 : value.find("]")] if "]" in value else value
    name, sep, port = value.rpartition(":")
    if sep and port.isdigit() and ":" not in name:
        value = name
    return value.rstrip(".")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def host_allowed(host: str, allowed: Sequence[str]) -> bool:
    """Whether ``host`` (from :func:`host_of`) passes ``allowed`` (module docstring)."""
    if not host:
        return False
    for listed in allowed:
        entry = listed.strip().lower().rstrip(".")
        if entry in ("*", host):
            return True
        if entry.startswith("*.") and host.endswith(entry[1:]):
            return True
    return _is_ip(host)


class AllowedHostsMiddleware:
    """Refuses requests whose ``Host`` is not allowed (module docstring; pure ASGI)."""

    def __init__(self, app: ASGIApp, allowed_hosts: Sequence[str]) -> None:
        self.app = app
        self.allowed = tuple(allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        header = Headers(scope=scope).get("host")
        if header is None or not header.strip():
            response = error_response("host: the request has no Host header", 400)
            await response(scope, receive, send)
            return
        host = host_of(header)
        if not host_allowed(host, self.allowed):
            shown = host if len(host) <= 100 else host[:100] + "..."
            message = (
                f"host: {shown!r} is not one of allowed_hosts ({', '.join(self.allowed)}); "
                "if the planner is reached under that name, add it (PLANNER_ALLOWED_HOSTS)"
            )
            await error_response(message, 421)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def document_hosts(spec: dict[str, object]) -> None:
    """Publish in the OpenAPI document ``spec`` (amended in place) that every operation may
    answer 400 (no ``Host``) and 421 (a ``Host`` not allowed), with the API's error shape."""
    error = {"$ref": "#/components/schemas/ErrorResponse"}
    answers = {
        "400": "Malformed request (no Host header)",
        "421": "The Host header is not one of allowed_hosts (DNS rebinding defence)",
    }
    for operation in openapi_operations(spec):
        responses = operation.get("responses")
        if not isinstance(responses, dict):
            continue
        for code, text in answers.items():
            responses.setdefault(
                code, {"description": text, "content": {"application/json": {"schema": error}}}
            )
