"""Fixtures shared by every test package, the hypothesis profile of CI runs, and the per-test
time limit of unit tests."""

import json
import os

import pytest
from hypothesis import settings

from tests.slurm_stack import slurm_jobs, slurm_stack

# CI runs property tests on a fixed seed sequence so that a verdict never depends on the draw;
# local runs keep exploring new examples.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

UNIT_TEST_TIMEOUT_S = 10
"""A unit test (no ``integration`` marker) that runs longer than this fails: unit tests are
fast by contract (STYLE.md), so a hang or a slow path shows at once instead of stalling CI.
Tests that start real components carry ``integration`` and keep the global 600 s limit."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("integration") is None and (
            item.get_closest_marker("timeout") is None
        ):
            item.add_marker(pytest.mark.timeout(UNIT_TEST_TIMEOUT_S))


@pytest.fixture(autouse=True)
def test_client_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starlette's ``TestClient`` sends ``Host: testserver``: the service's tests allow that
    name besides the default loopback names (``allowed_hosts``), as Django's test runner adds
    it to ``ALLOWED_HOSTS``. Tests of the check itself set ``allowed_hosts`` themselves."""
    monkeypatch.setenv(
        "PLANNER_ALLOWED_HOSTS", json.dumps(["localhost", "127.0.0.1", "::1", "testserver"])
    )


__all__ = ["slurm_jobs", "slurm_stack"]
