"""CPU time of the ``planner`` command's start: ``planner version``, ``planner --help`` and each
command's ``--help``, against an interpreter that does nothing (``python -c pass``) in the same
run.

Each command runs as its own process (``python -m planner ...``, the interpreter of this run) and
its CPU time is the child's user + system time from ``os.wait4``, so the other processes of a busy
machine do not count. The commands run round-robin, ``--repeat`` rounds, so a change of load
touches every command alike; the table gives the median and the minimum over the rounds, the
median's ratio to ``python -c pass``'s median, and the modules the command imports (one more run
under ``-X importtime``). ``python -c 'import typer'`` is the floor of a typer command line.
Targets: ``planner predict --help`` under 0.3 CPU-s, ``planner version`` under 0.25 CPU-s.
``planner predict EXAMPLE`` predicts ``deploy/examples/llama3-8b-h100.yaml``: a command's whole
run, which loads the model (numpy, pydantic, YAML) but not the calibration models (scikit-learn,
SciPy), which only ``--calibration`` needs. The last row is ``planner predict --help`` in typer's
rich layout (boxes; it loads rich, markdown-it and pygments), which ``planner.cli`` turns off for
this reason.

    python -m benchmarks.cli_startup                 # the table
    python -m benchmarks.cli_startup --write         # also writes results/cli_startup.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = Path(__file__).resolve().parent / "results" / "cli_startup.md"

BASELINE = ("-c", "pass")
TYPER = ("-c", "import typer")
"""The floor of a typer command line: the interpreter and typer (with the click it vendors)."""
EXAMPLE = ROOT / "deploy" / "examples" / "llama3-8b-h100.yaml"
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("version",),
    ("--help",),
    ("predict", "--help"),
    ("explore", "--help"),
    ("recommend", "--help"),
    ("stragglers", "--help"),
    ("review", "--help"),
    ("describe", "--help"),
    ("eta", "replay", "--help"),
    ("serve", "--help"),
    ("predict", str(EXAMPLE)),
)
TARGETS_S = {("predict", "--help"): 0.3, ("version",): 0.25}
RICH_HELP = (
    "-c",
    "import sys, planner.cli as c; c.app.rich_markup_mode = 'rich'; "
    "sys.argv = ['planner', 'predict', '--help']; c.main()",
)
"""``planner predict --help`` in typer's rich layout, which the command does not use: what the
plain layout saves."""


def cpu_seconds(args: tuple[str, ...], src: Path) -> float:
    """User + system CPU seconds of one ``python ARGS`` process run in ``src`` (output
    discarded); raises ``RuntimeError`` when it exits non-zero."""
    proc = subprocess.Popen(
        [sys.executable, *args], cwd=src, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"python {' '.join(args)} exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime


def modules_imported(args: tuple[str, ...], src: Path) -> int:
    """Modules ``python ARGS`` imports in ``src`` (the lines of ``-X importtime``)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=src,
        capture_output=True,
        text=True,
        check=True,
    )
    return sum(line.startswith("import time:") for line in done.stderr.splitlines()) - 1


RUNS: tuple[tuple[str, ...], ...] = (
    BASELINE,
    TYPER,
    *(("-m", "planner", *c) for c in COMMANDS),
    RICH_HELP,
)


def measure(repeat: int, sources: list[Path]) -> list[list[dict[str, object]]]:
    """Per checkout of ``sources`` (``python -m`` imports from the working directory first),
    one row per command, the baseline first: median and min CPU seconds over ``repeat``
    round-robin rounds (every command of every checkout in each round), the median over the
    baseline's, modules imported, target and verdict."""
    samples: dict[tuple[Path, tuple[str, ...]], list[float]] = {
        (src, args): [] for src in sources for args in RUNS
    }
    for _ in range(repeat):
        for (src, args), seconds in samples.items():
            seconds.append(cpu_seconds(args, src))
    tables = []
    for src in sources:
        base = statistics.median(samples[src, BASELINE])
        rows: list[dict[str, object]] = []
        for args in RUNS:
            command = args[2:] if args[:2] == ("-m", "planner") else None
            median = statistics.median(samples[src, args])
            target = TARGETS_S.get(command) if command is not None else None
            rows.append(
                {
                    "command": (
                        f"planner {' '.join(command)}".replace(f"{ROOT}/", "")
                        if command
                        else "python -c pass"
                        if args == BASELINE
                        else "python -c 'import typer'"
                        if args == TYPER
                        else "planner predict --help, in typer's rich layout"
                    ),
                    "median_s": median,
                    "min_s": min(samples[src, args]),
                    "ratio": median / base,
                    "modules": modules_imported(args, src),
                    "target_s": target,
                    "met": None if target is None else median < target,
                }
            )
        tables.append(rows)
    return tables


def table(rows: list[dict[str, object]]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "| command | CPU s, median | CPU s, min | x `python -c pass` | modules imported | target |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        target = row["target_s"]
        verdict = "" if target is None else f"< {target} s: {'met' if row['met'] else 'MISSED'}"
        lines.append(
            f"| `{row['command']}` | {row['median_s']:.3f} | {row['min_s']:.3f} | "
            f"{row['ratio']:.1f} | {row['modules']} | {verdict} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9, help="rounds of every command")
    parser.add_argument("--write", action="store_true", help=f"also write {RESULT.name}")
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="DIR",
        help="also measure the planner of another checkout in the same rounds (e.g. an older "
        "commit: git archive COMMIT planner adapters | tar -x -C DIR)",
    )
    args = parser.parse_args(argv)
    sources = [ROOT] if args.compare is None else [ROOT, args.compare.resolve()]
    tables = measure(max(args.repeat, 1), sources)
    rows = tables[0]
    text = table(rows)
    if args.compare is not None:
        text += (
            f"\n\nThe same commands, in the same rounds, run from `{args.compare}` "
            "(`--compare`):\n\n" + table(tables[1])
        )
    print(text)
    if args.write:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        RESULT.write_text(
            "# Start of the `planner` command (CPU seconds)\n\n"
            f"`python -m benchmarks.cli_startup {' '.join(argv or sys.argv[1:])}`\n\n"
            f"{text}\n\n"
            f"Python {platform.python_version()} on {platform.machine()}, "
            f"{os.cpu_count()} CPUs, load average at the end {load}. CPU time is the child's user "
            "+ system time (`os.wait4`), so other processes on the machine count only through "
            "shared caches; `x python -c pass` divides by the bare interpreter's median of the "
            "same run. Modules imported: the lines of `python -X importtime` minus one.\n",
            encoding="utf-8",
        )
    return 0 if all(row["met"] is not False for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
