"""The ``planner`` command table loads typer and the command modules only: each command imports
what it uses when it runs, so ``planner --help`` and ``planner version`` stay fast (measured by
``benchmarks/cli_startup.py``), and ``planner --help`` still lists every command."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from planner.cli import app

#: Libraries and packages that only a command's body may load.
HEAVY = (
    "numpy",
    "scipy",
    "yaml",
    "pydantic",
    "fastapi",
    "sqlalchemy",
    "httpx",
    "prometheus_client",
    "apscheduler",
    "kubernetes",
    "rich",
    "planner.scenario",
    "planner.perf",
    "planner.service",
    "adapters",
)
COMMANDS = (
    "predict",
    "explore",
    "recommend",
    "serve",
    "stragglers",
    "review",
    "describe",
    "demo",
    "version",
    "eta",
    "calibrate",
)


def _loaded(*argv: str) -> set[str]:
    """Top-level names of the modules ``python -m planner ARGV`` has loaded when it exits."""
    code = (
        "import atexit, sys, runpy\n"
        "atexit.register(lambda: sys.stderr.write('\\n'.join(sys.modules)))\n"
        f"sys.argv = ['planner', *{list(argv)!r}]\n"
        "runpy.run_module('planner', run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return set(done.stderr.split())


def test_version_and_help_load_no_model_web_or_database_library() -> None:
    for argv in (("version",), ("--help",), ("predict", "--help")):
        loaded = _loaded(*argv)
        assert "typer" in loaded  # the probe sees the modules
        heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))
        assert heavy == [], (argv, heavy)


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    listed = {line.split()[0] for line in result.output.splitlines() if line.startswith("  ")}
    assert set(COMMANDS) <= listed, set(COMMANDS) - listed
