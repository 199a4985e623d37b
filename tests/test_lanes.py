"""The mark that splits the integration tests into the test command's two lanes
(tests/conftest.py, deploy/dev/test.sh): every test that uses the shared dev Slurm (the
``slurm_stack`` fixture, directly or through another fixture) is ``dev_slurm``, no other is."""

from __future__ import annotations

from pathlib import Path

from tests.pytest_probe import run_pytest

CONFTEST = """\
import pytest

from tests.conftest import pytest_collection_modifyitems


@pytest.fixture
def slurm_stack():
    return "cluster"


@pytest.fixture
def service(slurm_stack):
    return slurm_stack
"""

PROBES = """\
import pytest

pytestmark = pytest.mark.integration


def test_direct(slurm_stack):
    pass


def test_through_another_fixture(service):
    pass


def test_without_slurm(tmp_path):
    pass
"""


def collected(tmp_path: Path, expression: str) -> list[str]:
    result = run_pytest(tmp_path, "--co", "-m", expression)  # no plugin takes part in marking
    return sorted(line.split("::")[1] for line in result.stdout.splitlines() if "::" in line)


def test_the_dev_slurm_lane_holds_every_test_of_the_shared_cluster(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\naddopts = --strict-markers\nmarkers =\n    integration: probe\n"
        "    dev_slurm: probe\n"
    )
    (tmp_path / "test_probes.py").write_text(PROBES)
    assert collected(tmp_path, "integration and dev_slurm") == [
        "test_direct",
        "test_through_another_fixture",
    ]
    assert collected(tmp_path, "integration and not dev_slurm") == ["test_without_slurm"]
