"""Who may call the API: bearer tokens, roles, read-only mode and cross-origin writes.

Roles (each includes the ones before it): ``reader`` (jobs, calibrations, predict, explore,
recommend, trace analyses), ``operator`` (uploads a new operator calibration), ``admin``
(replaces an existing calibration). Health, readiness, ``/metrics`` and the API docs are open
(probes and scrapers; keep them behind the chart's NetworkPolicy).

Authorizers (``auth.mode``):

* :class:`TokenAuthorizer` (``token``): static bearer tokens from a file of
  ``ROLE NAME TOKEN`` lines; ``TOKEN`` is the token itself or ``sha256:<hex digest>`` of it, so
  the file need not hold a usable secret. Presented tokens are hashed and compared with
  ``hmac.compare_digest`` against every entry (constant time, no early exit).
* :class:`ReviewAuthorizer` (``kubernetes``): the token is checked by the cluster (a
  TokenReview) and the role by a SubjectAccessReview: may the user ``use`` the resource
  ``roles`` of API group ``auth.kubernetes_group`` named ``reader``/``operator``/``admin``.
  Answers are cached ``auth.review_cache_s`` seconds. The reviews themselves are the
  Kubernetes adapter's (``adapters.kubernetes.auth``), passed in by the composition root.
* :class:`OpenAuthorizer` (``none``): everyone is admin.

Failures: 401 (no or unknown token, with ``WWW-Authenticate: Bearer``), 403 (the role is too
low, a cross-origin write, or read-only mode). Tokens are never logged or echoed.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Protocol

from planner.errors import PlannerError, SpecError
from planner.service.lru import Lru

#: Realm of the ``WWW-Authenticate`` challenge.
REALM = "llm-capacity-planner"
SHA256_PREFIX = "sha256:"


class Role(IntEnum):
    """API roles, least to most privileged."""

    READER = 1
    OPERATOR = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        """``reader``, ``operator`` or ``admin``."""
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Role:
        """The role named ``text``; raises ``SpecError``."""
        try:
            return cls[text.upper()]
        except KeyError:
            raise SpecError("role", f"{text!r}: use reader, operator or admin") from None


@dataclass(frozen=True, slots=True)
class Principal:
    """Who made a request: ``name`` (token name or Kubernetes user) and ``role``."""

    name: str
    role: Role


ANONYMOUS = Principal("anonymous", Role.READER)


class AuthError(Exception):
    """Refused: ``status`` 401 (who are you?) or 403 (not allowed); ``message`` says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Authorizer(Protocol):
    """Turns a bearer token into a principal allowed ``role`` (raises :class:`AuthError`)."""

    #: True when ``authorize`` does network I/O (it is then run off the event loop).
    blocking: bool

    def authorize(self, token: str, role: Role) -> Principal:
        """The principal of ``token``; raises ``AuthError`` (401 unknown, 403 too low)."""
        ...


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


@dataclass(frozen=True, slots=True)
class TokenEntry:
    """One line of a token file: the token's SHA-256 digest, its name and its role."""

    digest: bytes
    name: str
    role: Role


def parse_token_file(text: str, *, source: str = "token file") -> list[TokenEntry]:
    """Entries of a token file (``ROLE NAME TOKEN`` per line; ``#`` comments and blank lines
    skipped). Raises ``SpecError`` naming the line (never its token)."""
    entries: list[TokenEntry] = []
    names: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        parts = stripped.split()
        where = f"{source}:{number}"
        if len(parts) != 3:
            raise SpecError(where, "expected 'ROLE NAME TOKEN' (three words)")
        role, name, token = parts
        if name in names:
            raise SpecError(where, f"token name {name!r} appears twice")
        names.add(name)
        if token.startswith(SHA256_PREFIX):
            hexdigest = token[len(SHA256_PREFIX) :]
            try:
                digest = bytes.fromhex(hexdigest)
            except ValueError:
                digest = b""
            if len(digest) != 32:
                raise SpecError(where, "sha256: must be followed by 64 hex digits")
        elif len(token) < 16:
            raise SpecError(where, "tokens must be at least 16 characters long")
        else:
            digest = _digest(token)
        entries.append(TokenEntry(digest=digest, name=name, role=Role.parse(role)))
    return entries


def read_token_file(path: str) -> list[TokenEntry]:
    """:func:`parse_token_file` of the file at ``path``; raises ``SpecError``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SpecError("auth.token_file", f"cannot read {path}: {reason}") from None
    return parse_token_file(text, source=path)


def _check_role(principal: Principal, role: Role) -> Principal:
    if principal.role < role:
        raise AuthError(
            403, f"{principal.name} has role {principal.role.label}; this needs {role.label}"
        )
    return principal


class TokenAuthorizer:
    """Static bearer tokens (see the module docstring)."""

    blocking = False

    def __init__(self, entries: list[TokenEntry]) -> None:
        self.entries = list(entries)

    def authorize(self, token: str, role: Role) -> Principal:
        """The entry whose digest matches ``token`` (every entry compared), checked for
        ``role``."""
        digest = _digest(token)
        found: TokenEntry | None = None
        for entry in self.entries:
            if hmac.compare_digest(entry.digest, digest):
                found = entry
        if found is None:
            raise AuthError(401, "unknown bearer token")
        return _check_role(Principal(found.name, found.role), role)


class OpenAuthorizer:
    """``auth.mode: none``: every request is an admin's."""

    blocking = False

    def authorize(self, token: str, role: Role) -> Principal:
        """Always the anonymous admin."""
        return Principal("anonymous", Role.ADMIN)


#: ``review(token) -> (user, groups)``, or None when the cluster does not know the token.
TokenReview = Callable[[str], "tuple[str, list[str]] | None"]
#: ``allowed(user, groups, role_name) -> bool`` (a SubjectAccessReview).
AccessReview = Callable[[str, list[str], str], bool]


class ReviewAuthorizer:
    """Kubernetes TokenReview + SubjectAccessReview, cached (see the module docstring)."""

    blocking = True

    def __init__(
        self,
        review: TokenReview,
        allowed: AccessReview,
        *,
        cache_s: float = 60.0,
        max_entries: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._review = review
        self._allowed = allowed
        self._cache_s = cache_s
        self._clock = clock
        #: (token digest, role) -> (when reviewed, its answer)
        self._cache: Lru[tuple[bytes, Role], tuple[float, Principal | AuthError]] = Lru(
            max_entries=max_entries
        )

    def authorize(self, token: str, role: Role) -> Principal:
        """The reviewed principal of ``token`` when the cluster grants ``role``; 503 (not
        cached) when the API server cannot be asked."""
        key = (_digest(token), role)
        now = self._clock()
        hit = self._cache.get(key)
        if hit is not None and now - hit[0] < self._cache_s:
            answer = hit[1]
            if isinstance(answer, AuthError):
                raise answer
            return answer
        try:
            answer = self._decide(token, role)
        except PlannerError as exc:
            raise AuthError(503, f"cannot check the token with the Kubernetes API: {exc}") from None
        self._cache.put(key, (now, answer))
        if isinstance(answer, AuthError):
            raise answer
        return answer

    def _decide(self, token: str, role: Role) -> Principal | AuthError:
        who = self._review(token)
        if who is None:
            return AuthError(401, "the cluster does not accept this bearer token")
        user, groups = who
        if self._allowed(user, groups, role.label):
            return Principal(user, role)
        return AuthError(403, f"{user} may not use the planner's {role.label} role")
