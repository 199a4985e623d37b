"""The ``planner`` command table loads typer and the command modules only: each command imports
what it uses when it runs, so ``planner --help`` and ``planner version`` stay fast (measured by
``benchmarks/cli_startup.py``), and ``planner --help`` still lists every command."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import typer
from typer.core import TyperGroup
from typer.testing import CliRunner

from planner.cli import app

ROOT = Path(__file__).resolve().parents[1]

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
    """Names of the modules ``python -m planner ARGV`` has loaded when it exits (status 0)."""
    code = (
        "import atexit, sys, runpy\n"
        "atexit.register(lambda: sys.stderr.write('\\n' + '\\n'.join(sys.modules)))\n"
        f"sys.argv = ['planner', *{list(argv)!r}]\n"
        "runpy.run_module('planner', run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(done.stderr.split())


def test_version_and_help_load_no_model_web_or_database_library() -> None:
    for argv in (("version",), ("--help",), ("predict", "--help")):
        loaded = _loaded(*argv)
        assert "typer" in loaded  # the probe sees the modules
        heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))
        assert heavy == [], (argv, heavy)


def test_predict_without_a_calibration_loads_no_calibration_model() -> None:
    """The calibration models (scikit-learn, SciPy: over a CPU-second to import) load only for
    ``--calibration``."""
    loaded = _loaded("predict", str(ROOT / "deploy" / "examples" / "llama3-8b-h100.yaml"))
    assert "planner.scenario" in loaded  # the probe sees the modules
    heavy = sorted(m for m in loaded if m.split(".")[0] in ("sklearn", "scipy"))
    assert heavy == [], heavy


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    listed = {line.split()[0] for line in result.output.splitlines() if line.startswith("  ")}
    assert set(COMMANDS) <= listed, set(COMMANDS) - listed


def test_help_lists_each_commands_whole_first_paragraph() -> None:
    """Click's plain layout cuts a command's summary at its first sentence or the line's end;
    ``planner --help`` and ``planner calibrate --help`` list the whole first paragraph."""
    root = typer.main.get_group(app)
    calibrate = root.commands["calibrate"]
    assert isinstance(calibrate, TyperGroup)
    for argv, group in ((["--help"], root), (["calibrate", "--help"], calibrate)):
        result = CliRunner().invoke(app, argv, terminal_width=100)
        assert result.exit_code == 0, result.output
        # words as printed; a word wrapped after its hyphen joined again
        listed = re.sub(r"(\w)- (\w)", r"\1-\2", " ".join(result.output.split()))
        for name, command in group.commands.items():
            paragraph = " ".join((command.help or "").split("\n\n")[0].split())
            assert f"{name} {paragraph}" in listed, (argv, name)
