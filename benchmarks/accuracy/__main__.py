"""Accuracy of the performance model on published training runs (issue 3).

    .venv/bin/python -m benchmarks.accuracy              # print the table
    .venv/bin/python -m benchmarks.accuracy --results    # ... and write benchmarks/RESULTS.md
    .venv/bin/python -m benchmarks.accuracy --rows       # ... plus every row, worst first
    .venv/bin/python -m benchmarks.accuracy --fit        # fit constants on the calibration subset
    .venv/bin/python -m benchmarks.accuracy --fit --write  # ... and store them in the model
    .venv/bin/python -m benchmarks.accuracy --fit --params NAME --fit-subset blackwell-dense
                                                         # ... one constant on a named subset
                                                         # of the calibration rows (FIT_SUBSETS)
    .venv/bin/python -m benchmarks.accuracy --learning   # ... plus the learning curve of the
                                                         # observed-runs calibration (minutes)
    .venv/bin/python -m benchmarks.accuracy --learning --results  # ... written to RESULTS.md
    .venv/bin/python -m benchmarks.accuracy --learning --rows     # ... and every target's
                                                                  # curve, worst at k = 3 first

With ``--fit`` the tables are computed with the fitted constants (held-out rows untouched by
the fit); ``--write`` stores them via ``planner.perf.constants.write_constants`` with their
provenance (subset rule, date, calibration error).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import planner
from benchmarks.accuracy.convert import CALIBRATION_EVERY, build_dataset
from benchmarks.accuracy.evaluate import evaluate
from benchmarks.accuracy.fit import (
    FIT_SUBSETS,
    default_parameters,
    efficiency_with,
    fit,
    write_fitted,
)
from benchmarks.accuracy.learning import (
    BRIDGE,
    LEARNING_MARKERS,
    cluster_table,
    learning_curve,
    learning_rows_table,
    learning_section,
    learning_table,
    time_split_table,
)
from benchmarks.accuracy.report import (
    RESULTS_FILE,
    accuracy_table,
    fit_table,
    memory_table,
    ranking_table,
    refusals_table,
    results_section,
    rows_table,
    source_gpu_table,
    time_stats,
    unusable_table,
    write_results,
    write_section,
)
from benchmarks.accuracy.runs import available_sources
from planner.perf import EfficiencyModel


def model_revision() -> str:
    """``git`` revision of the checkout holding the imported ``planner`` package, with
    ``+ uncommitted planner/ changes`` when its working tree differs."""
    root = Path(planner.__file__).resolve().parents[1]
    try:
        rev = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "planner"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"from {root} (not a git checkout)"
    return f"{rev} + uncommitted planner/ changes" if dirty else rev


def main(argv: list[str] | None = None) -> int:
    """Run the harness; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.accuracy", description=__doc__)
    parser.add_argument("--rows", action="store_true", help="print every row, worst first")
    parser.add_argument(
        "--fit", action="store_true", help="fit constants on the calibration subset"
    )
    parser.add_argument(
        "--params",
        help=f"comma-separated constants to fit (default: {','.join(default_parameters())})",
    )
    parser.add_argument(
        "--max-evaluations", type=int, default=600, help="with --fit: model evaluations (600)"
    )
    parser.add_argument(
        "--fit-subset",
        choices=sorted(FIT_SUBSETS),
        default="all",
        help="with --fit: the calibration rows the loss uses (default: all)",
    )
    parser.add_argument("--write", action="store_true", help="with --fit: store the fitted values")
    parser.add_argument(
        "--results", action="store_true", help=f"write the tables to {RESULTS_FILE}"
    )
    parser.add_argument(
        "--label", help="model version for RESULTS.md (default: git revision of planner/)"
    )
    parser.add_argument(
        "--learning",
        action="store_true",
        help="the learning curve: held-out error after k observed runs (benchmarks.accuracy."
        "learning)",
    )
    args = parser.parse_args(argv)
    if args.write and not args.fit:
        parser.error("--write needs --fit")
    if args.fit_subset != "all" and not args.fit:
        parser.error("--fit-subset needs --fit")

    dataset = build_dataset(available_sources())
    today = datetime.now(tz=UTC).date().isoformat()
    efficiency: EfficiencyModel | None = None
    constants_note = f"planner {args.label or model_revision()}, constants as shipped"
    if args.fit:
        names = args.params.split(",") if args.params else None
        result = fit(
            dataset.cases, names, max_evaluations=args.max_evaluations, subset=args.fit_subset
        )
        efficiency = efficiency_with(result.values)
        print(
            f"Fitted on {result.num_rows} calibration rows ({result.num_evaluations} evaluations): "
            f"mean |ln error| over sources {result.loss_before:.4f} -> {result.loss_after:.4f}"
        )
        for name, value in result.values.items():
            print(f"  {name}: {result.initial[name]:.6g} -> {value:.6g}")
        constants_note = f"planner {args.label or model_revision()}, fitted by --fit: " + ", ".join(
            f"{k}={v:.4g}" for k, v in result.values.items()
        )
        if args.write:
            calibrated = time_stats(
                o for o in evaluate(dataset.cases, efficiency) if o.case.calibration
            )
            if args.fit_subset == "all":
                provenance = (
                    f"fitted {today} by `python -m benchmarks.accuracy --fit --write` on the "
                    f"calibration subset (every {CALIBRATION_EVERY}rd usable configuration by "
                    f"config_id of each dense A100/H100 source and of the MoE H100 source, "
                    f"{result.num_rows} rows of "
                    f"tests/data/ground_truth/): mean |ln error| {result.loss_after:.4f}, "
                    f"calibration mean APE {100 * calibrated.mean_ape:.1f} %"
                )
            else:
                command = shlex.join(
                    [
                        "python",
                        "-m",
                        "benchmarks.accuracy",
                        "--fit",
                        "--params",
                        ",".join(result.values),
                        "--fit-subset",
                        args.fit_subset,
                        "--write",
                    ]
                )
                keep = FIT_SUBSETS[args.fit_subset][1]
                fitted_rows = Counter(
                    f"{c.source} {c.document['hardware']['gpu']}"
                    for c in dataset.cases
                    if c.calibration and keep(c)
                )
                provenance = (
                    f"fitted {today} by `{command}` on {FIT_SUBSETS[args.fit_subset][0]} "
                    f"({result.num_rows} rows: "
                    + ", ".join(f"{k} {n}" for k, n in sorted(fitted_rows.items()))
                    + f"; calibration subset: every {CALIBRATION_EVERY}rd "
                    f"usable configuration by config_id of each source with a declared split): "
                    f"mean |ln error| {result.loss_before:.4f} -> {result.loss_after:.4f}"
                )
            path = write_fitted(result.values, provenance, file_provenance=args.fit_subset == "all")
            print(f"wrote {path}")
            constants_note = f"planner {args.label or model_revision()}, fitted and written"

    outcomes = evaluate(dataset.cases, efficiency)
    memory = evaluate(dataset.memory_cases, efficiency)
    print(accuracy_table(outcomes))
    print()
    print(memory_table(memory))
    print()
    print(fit_table(outcomes))
    print()
    print(ranking_table(outcomes))
    print()
    print(unusable_table(dataset))
    print()
    print(refusals_table(dataset))
    if any(c.source == BRIDGE for c in dataset.cases):
        print()
        print(source_gpu_table(dataset, {o.case.key: o.time_error for o in outcomes}))
    if args.rows:
        print()
        print(rows_table(outcomes))
    learning = None
    if args.learning:
        learning = learning_curve(dataset)
        print()
        print(learning_table(learning))
        print()
        print(time_split_table(learning))
        print()
        print(cluster_table(learning))
        if args.rows:
            print()
            print(learning_rows_table(learning))
    if args.results:
        command = shlex.join(
            [
                ".venv/bin/python",
                "-m",
                "benchmarks.accuracy",
                *(sys.argv[1:] if argv is None else argv),
            ]
        )
        section = results_section(
            date=today,
            command=command.strip(),
            dataset=dataset,
            outcomes=outcomes,
            memory=memory,
            constants_note=constants_note,
            fitted=args.fit,
        )
        write_results(section, fitted=args.fit)
        if learning is not None:
            write_section(
                learning_section(
                    date=today,
                    command=command.strip(),
                    result=learning,
                    constants_note=constants_note,
                ),
                LEARNING_MARKERS,
            )
        print(f"\nwrote {RESULTS_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
