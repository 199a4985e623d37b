"""FastAPI side of ``planner.service.auth``: the dependency each route declares, CORS, and
the ``bearer`` security scheme published in ``/openapi.json``.

``Access.require(role)`` guards a read or a computation (anonymous when ``anonymous_read``);
``Access.require(role, writes=True)`` guards a state-changing request: refused with 403 in
read-only mode and when a browser sends it from another origin (``Origin`` not this host and
not in ``auth.cors_origins``), and never anonymous: a cross-origin form post carries no bearer
header, so it cannot change anything.

``/openapi.json`` says which: the dependency of a requirement that a caller without a token
passes (:meth:`Access.anonymous`) declares the scheme ``bearer-or-anonymous``, the others
``bearer``; :func:`document_access` publishes the first as ``bearer`` with ``{}`` (no token)
among the alternatives, so the schema follows the rule each route declares.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
from fastapi import FastAPI, HTTPException, Request, Security
from fastapi.middleware.cors import CORSMiddleware
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from planner.service.api.errors import openapi_operations
from planner.service.auth import (
    ANONYMOUS,
    REALM,
    AuthError,
    Authorizer,
    OpenAuthorizer,
    Principal,
    Role,
)

_BEARER = (
    "A token of auth.token_file (mode token) or a Kubernetes service-account token (mode "
    "kubernetes); see docs/security.md."
)
bearer = HTTPBearer(auto_error=False, scheme_name="bearer", description=_BEARER)
#: The same scheme where a caller without a token passes too (renamed by document_access).
_OPTIONAL = "bearer-or-anonymous"
_bearer_or_anonymous = HTTPBearer(auto_error=False, scheme_name=_OPTIONAL, description=_BEARER)
_CHALLENGE = {"WWW-Authenticate": f'Bearer realm="{REALM}"'}

Credentials = Annotated[HTTPAuthorizationCredentials | None, Security(bearer)]
OptionalCredentials = Annotated[HTTPAuthorizationCredentials | None, Security(_bearer_or_anonymous)]


class Access:
    """The access rules of one app (see the module docstring)."""

    def __init__(
        self,
        authorizer: Authorizer,
        *,
        anonymous_read: bool,
        read_only: bool,
        cors_origins: list[str],
    ) -> None:
        self.authorizer = authorizer
        self.anonymous_read = anonymous_read
        self.read_only = read_only
        self.cors_origins = list(cors_origins)
        self._limiter = anyio.CapacityLimiter(4)

    def install(self, app: FastAPI) -> None:
        """Add CORS to ``app`` when origins are configured (off by default)."""
        if self.cors_origins:
            app.add_middleware(
                CORSMiddleware,
                allow_origins=self.cors_origins,
                allow_methods=["GET", "POST"],
                allow_headers=["Authorization", "Content-Type"],
                allow_credentials=False,
            )

    def _cross_origin(self, request: Request) -> str | None:
        origin = request.headers.get("origin")
        if not origin or origin in self.cors_origins:
            return None
        if urlsplit(origin).netloc == request.headers.get("host", ""):
            return None
        return origin

    def anonymous(self, role: Role, *, writes: bool = False) -> bool:
        """Whether a caller without a token may make a request that needs ``role``: a read
        or a computation (role reader) with ``anonymous_read``, or anything when the
        authorizer lets everyone in (``auth.mode: none``)."""
        if isinstance(self.authorizer, OpenAuthorizer):
            return True
        return role == Role.READER and not writes and self.anonymous_read

    def require(
        self, role: Role, *, writes: bool = False
    ) -> Callable[[Request, HTTPAuthorizationCredentials | None], Awaitable[Principal]]:
        """A dependency that returns the caller's :class:`Principal` or raises 401/403."""

        async def check(
            request: Request, credentials: HTTPAuthorizationCredentials | None
        ) -> Principal:
            if writes and self.read_only:
                raise HTTPException(
                    403,
                    "read_only: the planner runs read-only (--read-only / PLANNER_READ_ONLY); "
                    "state-changing requests are refused",
                )
            if writes and (origin := self._cross_origin(request)) is not None:
                raise HTTPException(
                    403,
                    f"origin: writes from {origin} are refused (cross-origin); add it to "
                    "auth.cors_origins if it is a trusted client",
                )
            principal = await self._principal(credentials, role, writes=writes)
            request.state.principal = principal
            return principal

        if self.anonymous(role, writes=writes):

            async def token_or_none(
                request: Request, credentials: OptionalCredentials = None
            ) -> Principal:
                return await check(request, credentials)

            return token_or_none

        async def token(request: Request, credentials: Credentials = None) -> Principal:
            return await check(request, credentials)

        return token

    async def _principal(
        self, credentials: HTTPAuthorizationCredentials | None, role: Role, *, writes: bool
    ) -> Principal:
        if isinstance(self.authorizer, OpenAuthorizer):
            return self.authorizer.authorize("", role)
        if credentials is None or not credentials.credentials:
            if self.anonymous(role, writes=writes):
                return ANONYMOUS
            what = "state-changing requests need" if writes else "this request needs"
            raise HTTPException(
                401,
                f"authorization: {what} a bearer token with role {role.label} "
                "(Authorization: Bearer <token>; see auth.token_file)",
                headers=_CHALLENGE,
            )
        token = credentials.credentials
        try:
            if self.authorizer.blocking:
                return await anyio.to_thread.run_sync(
                    self.authorizer.authorize, token, role, limiter=self._limiter
                )
            return self.authorizer.authorize(token, role)
        except AuthError as exc:
            headers = _CHALLENGE if exc.status == 401 else None
            raise HTTPException(exc.status, f"authorization: {exc.message}", headers) from None


def open_access() -> Access:
    """Everyone may do everything (a router built without the app's access rules, in tests)."""
    return Access(OpenAuthorizer(), anonymous_read=True, read_only=False, cors_origins=[])


def document_access(spec: dict[str, object]) -> None:
    """Publish in the OpenAPI document ``spec`` (amended in place) who may call each
    operation, from the dependencies its route declares (:meth:`Access.require`): ``bearer``
    alone where one of them needs a token, ``bearer`` or no token (``{}``) where every one lets
    a caller without a token pass."""
    components = spec.get("components")
    schemes = components.get("securitySchemes") if isinstance(components, dict) else None
    optional = schemes.pop(_OPTIONAL, None) if isinstance(schemes, dict) else None
    if isinstance(schemes, dict) and optional is not None:
        schemes.setdefault(bearer.scheme_name, optional)
    for operation in openapi_operations(spec):
        alternatives = operation.get("security")
        if not isinstance(alternatives, list) or not alternatives:
            continue
        needed = [a for a in alternatives if not (isinstance(a, dict) and _OPTIONAL in a)]
        operation["security"] = needed or [{bearer.scheme_name: []}, {}]
