"""Fixtures for the service tests: a scripted scheduler source and a clock under test control."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from planner.errors import SourceError
from planner.specs.job import ClusterSnapshot, JobState
from tests.service.openapi_check import check_response


class ScriptedSource:
    """A ``SchedulerSource`` whose next answer the test sets: a snapshot or an error.

    It stands in for the scheduler in unit tests of the service; the real Slurm adapter is
    exercised against a real slurmctld in tests/integration.
    """

    scheduler = "slurm"
    name = "slurm"

    def __init__(self) -> None:
        self.answer: ClusterSnapshot | Exception = ClusterSnapshot(
            scheduler="slurm", cluster="test", taken_at_s=0.0
        )
        self.calls = 0

    def snapshot(self) -> ClusterSnapshot:
        self.calls += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def read_text_file(
        self, path: str, max_bytes: int, *, job: object = None, head: bool = False
    ) -> str:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise SourceError("file", f"{path}: {exc.strerror}") from None
        return data[:max_bytes].decode()

    def set_jobs(self, *jobs: JobState, taken_at_s: float = 0.0) -> None:
        self.answer = ClusterSnapshot(
            scheduler="slurm", cluster="test", taken_at_s=taken_at_s, jobs=tuple(jobs)
        )


class Clock:
    """A settable clock (epoch seconds)."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


#: Bearer tokens of the service tests (the token file ``token_file`` writes).
ADMIN_TOKEN = "test-admin-token-0123456789"
OPERATOR_TOKEN = "test-operator-token-0123456789"
READER_TOKEN = "test-reader-token-0123456789"


def bearer(token: str) -> dict[str, str]:
    """The Authorization header of ``token``."""
    return {"Authorization": f"Bearer {token}"}


def write_token_file(path: Path) -> Path:
    """A token file with one token per role (the operator's stored as its SHA-256)."""
    import hashlib

    digest = hashlib.sha256(OPERATOR_TOKEN.encode()).hexdigest()
    path.write_text(
        "# role name token\n"
        f"admin ci-admin {ADMIN_TOKEN}\n"
        f"operator ci-operator sha256:{digest}\n"
        f"reader grafana {READER_TOKEN}\n"
    )
    return path


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    return write_token_file(tmp_path / "tokens")


@pytest.fixture
def source() -> ScriptedSource:
    return ScriptedSource()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'planner.db'}"


JobFactory = Callable[..., JobState]


@pytest.fixture
def make_job() -> JobFactory:
    def make(**kw: object) -> JobState:
        base: dict[str, object] = {
            "scheduler": "slurm",
            "cluster": "test",
            "job_id": "42",
            "name": "train",
            "user": "alice",
            "num_gpus": 2,
            "gpus_allocated": True,
            "gpu_type": "h100",
        }
        base.update(kw)
        return JobState(**base)  # type: ignore[arg-type]

    return make


@pytest.fixture(autouse=True)
def responses_match_the_published_schema(
    monkeypatch: pytest.MonkeyPatch,
) -> list[int]:
    """Every response a service test gets through a ``TestClient`` is checked against the
    app's ``/openapi.json`` (documented status, JSON body valid); yields ``[how many were]``."""
    checked = [0]
    original = TestClient.request

    def request(self: TestClient, method: str, url: Any, **kw: Any) -> httpx.Response:
        response = original(self, method, url, **kw)
        check_response(self.app, response)
        checked[0] += 1
        return response

    monkeypatch.setattr(TestClient, "request", request)
    return checked


@pytest.fixture
def cluster_root() -> Iterator[Path]:
    """A directory every user may search: the fake cluster's users are not users of this host,
    so the planner reads their files only when they are world-readable (``adapters.files``);
    pytest's own temporary directories are private to their owner."""
    root = Path(tempfile.mkdtemp(prefix="planner-load-test-", dir="/tmp"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def tmp_path(cluster_root: Path) -> Path:
    """The service tests' temporary directory is one every user may search, as a cluster's
    shared file system is: the service reads a job's log and other files as the job's user
    (``alice``, not a user of this host) may see them (``adapters.files``), and pytest's own
    temporary directories are private to their owner. ``app_for`` allows it as a file root."""
    return cluster_root
