"""Settings of authentication, bounded work, the store's faults and retention.

They are fields of :class:`planner.service.settings.Settings` (``auth``, ``limits``,
``retention``, ``read_only``, ``shutdown_grace_s``); docs/security.md says why
each default is what it is.

* ``auth.mode``: ``token`` (default; static bearer tokens from ``auth.token_file``),
  ``kubernetes`` (TokenReview + SubjectAccessReview against the cluster the planner runs in) or
  ``none`` (no authentication at all: only behind an authenticating proxy). A planner bound to
  a non-loopback address refuses to start in ``token`` mode without a token file: set one,
  choose ``kubernetes``, or say ``none`` on purpose.
* ``limits``: request body sizes per kind of route, the worker pool that runs CPU-heavy
  requests (size and queue; a full pool answers 429 with ``Retry-After``), the candidate and
  time budgets of explore and recommend, the budgets of capacity reviews (``review_*``) and
  calibration uploads (``calibration_*``; 422 naming the budget), the text kept of what a
  scheduler reports about a job (``job_text_chars``) and the memory of one trace
  (``trace_memory_bytes``).
* ``retention``: how much ETA history and how many step samples the store keeps per job.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.errors import SpecError

log = logging.getLogger("planner.service")

#: Roles, least to most privileged (each includes the ones before it).
ROLES = ("reader", "operator", "admin")


class AuthSettings(BaseModel):
    """Who may call the API (see the module docstring and docs/security.md)."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["token", "kubernetes", "none"] = Field(
        default="token",
        description="token: bearer tokens from token_file; kubernetes: TokenReview and "
        "SubjectAccessReview; none: no authentication (only behind an authenticating proxy).",
    )
    token_file: str | None = Field(
        default=None,
        description="File of 'ROLE NAME TOKEN' lines (TOKEN may be sha256:<hex digest>); "
        "read at start. Without it, token mode lets nobody write.",
    )
    anonymous_read: bool | None = Field(
        default=None,
        description="Reads and predictions without a token; default: only when bound to a "
        "loopback address.",
    )
    cors_origins: list[str] = Field(
        default_factory=list,
        description="Browser origins allowed to call the API (CORS); empty: CORS off and "
        "cross-origin writes refused.",
    )
    review_cache_s: float = Field(
        default=60.0,
        ge=0,
        le=3600,
        description="kubernetes mode: how long a TokenReview/SubjectAccessReview answer is kept.",
    )
    kubernetes_group: str = Field(
        default="planner.llm",
        description="kubernetes mode: API group of the 'roles' resource whose 'use' verb on "
        "resourceName reader/operator/admin grants the role.",
    )


class LimitSettings(BaseModel):
    """Bounds on the work one request can cause."""

    model_config = ConfigDict(extra="forbid")

    json_body_bytes: int = Field(
        default=2 * 1024 * 1024,
        gt=0,
        description="Largest JSON body (predict, explore, recommendations); larger: 413.",
    )
    upload_body_bytes: int = Field(
        default=64 * 1024 * 1024,
        gt=0,
        description="Largest upload (calibration samples, traces); larger: 413.",
    )
    workers: int = Field(
        default_factory=lambda: max(1, min(4, os.cpu_count() or 1)),
        ge=1,
        le=64,
        description="Threads running CPU-heavy requests (predict, explore, recommend, fits).",
    )
    queue: int = Field(
        default=16,
        ge=0,
        le=10_000,
        description="Requests waiting for a worker; beyond it: 429 with Retry-After.",
    )
    retry_after_s: int = Field(default=5, ge=1, le=3600)
    explore_time_budget_s: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="Longest explore/recommend request; past it: 422 naming this budget.",
    )
    explore_max_candidates: int = Field(
        default=50_000_000,
        gt=0,
        description="Largest design space one explore/recommend request may sweep.",
    )
    job_text_chars: int = Field(
        default=4096,
        ge=64,
        le=1024 * 1024,
        description="Longest text stored of each field a scheduler reports about a job "
        "(comment, command, partition, account, reason, ...; the name at most 256, the user "
        "128 characters: the store's columns); longer ones are cut, ending in '…[cut]'.",
    )
    trace_memory_bytes: int = Field(
        default=1024**3,
        ge=64 * 1024**2,
        description="The most memory reading and analysing one trace (a job's planner:trace= "
        "or an upload to /v1/stragglers) may add, bytes: larger files are refused before "
        "they are read (16 bytes per file byte), traces of more rows (1,000 bytes each) "
        "before they are analysed.",
    )
    calibration_max_rows: int = Field(
        default=20_000,
        gt=0,
        le=1_000_000,
        description="Most rows of each uploaded calibration CSV (a sampling run writes a few "
        "hundred to a few thousand); more: 422 naming this budget.",
    )
    calibration_time_budget_s: float = Field(
        default=120.0,
        gt=0,
        le=3600,
        description="CPU seconds one calibration upload's parse and fit may use; past it: 422 "
        "naming this budget.",
    )
    review_time_budget_s: float = Field(
        default=120.0,
        gt=0,
        le=3600,
        description="CPU seconds one POST /v1/reviews may use (its worker thread; waiting "
        "for another review does not count); past it: 422 naming this budget.",
    )
    review_max_horizon_days: float = Field(
        default=366.0,
        gt=0,
        le=100 * 366,
        description="Longest horizon (the fleet's horizon_days) a requested review may cover.",
    )
    review_max_jobs: int = Field(
        default=20_000,
        gt=0,
        description="Most jobs (planned plus today's queue) of a requested review.",
    )
    review_max_samples: int = Field(
        default=2000,
        gt=0,
        le=10_000,
        description="Most Monte Carlo samples (and sizing samples) of a requested review.",
    )
    review_max_pools: int = Field(
        default=64,
        gt=0,
        description="Most pools of a requested review (the fleet's plus what-ifs' new ones).",
    )
    review_max_what_ifs: int = Field(
        default=20,
        gt=0,
        description="Most what-if scenarios of a requested review.",
    )
    review_max_memory_bytes: int = Field(
        default=1024**3,
        gt=0,
        description="Largest estimated memory of a requested review "
        "(planner.capacity.budget.estimated_bytes: samples x jobs x scenarios and samples x "
        "pools x 6-hour bins), bytes.",
    )
    jobs_page: int = Field(
        default=100,
        ge=1,
        le=10_000,
        description="Jobs per page of GET /v1/jobs when the request names no limit (the "
        "answer's next_cursor, passed as ?cursor=, gives the next page).",
    )
    jobs_unpaged_max: int = Field(
        default=10_000,
        ge=1,
        le=1_000_000,
        description="Most jobs GET /v1/jobs?limit=0 (every job in one answer) may return; "
        "with more: 422 naming this limit (page with limit and cursor instead).",
    )


class RetentionSettings(BaseModel):
    """What the store keeps per job beyond its current state (pruned every ``interval_s``)."""

    model_config = ConfigDict(extra="forbid")

    eta_history_rows: int = Field(
        default=1000,
        ge=1,
        description="ETA estimates kept per job (the API shows the newest 50). The ETA keeps one "
        "per 0.2 % of progress or 6 h, so 1000 span a whole run: a finished job's outcome needs "
        "its ETAs from 10 % progress on.",
    )
    eta_history_max_age_s: float = Field(
        default=60 * 24 * 3600.0,
        gt=0,
        description="ETA estimates older than this are dropped (longer than the longest run "
        "whose outcome should teach the ETA).",
    )
    samples_per_job: int = Field(
        default=5000,
        ge=500,
        description="Step samples kept per job (the ETA uses the newest 500).",
    )
    audit_max_age_s: float = Field(
        default=30 * 24 * 3600.0,
        gt=0,
        description="Audit records of scheduler writes and uploads older than this are dropped.",
    )
    interval_s: float = Field(default=600.0, gt=0, description="Least time between two prunes.")


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, port: int, auth: AuthSettings) -> None:
    """Refuse to serve an API that anyone on the network could use unawares: bound to a
    non-loopback ``host``, ``auth.mode: token`` needs a token file (``kubernetes`` reviews
    tokens, ``none`` says so on purpose, and is logged). Raises ``SpecError``."""
    if is_loopback(host):
        return
    if auth.mode == "token" and not auth.token_file:
        raise SpecError(
            "auth.token_file",
            f"the planner would listen on {host} with no authentication: set "
            "PLANNER_AUTH__TOKEN_FILE (a file of 'ROLE NAME TOKEN' lines), or "
            "PLANNER_AUTH__MODE=kubernetes in a cluster, or PLANNER_AUTH__MODE=none to serve "
            "without authentication on purpose (behind an authenticating proxy)",
        )
    if auth.mode == "none":
        log.warning(
            "auth.mode=none: anyone who reaches %s:%d may read, compute and write", host, port
        )
