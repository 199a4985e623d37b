#!/usr/bin/env bash
# The project's whole test command, runnable on a fresh Debian machine as root:
#   1. Debian packages of the dev stack (Slurm, munge, MariaDB for sacct)   deploy/dev/install-deps.sh
#   2. a virtual environment .venv with the project, its dev tools and the CPU build of PyTorch
#      (the tiny training job of the end-to-end test); meanwhile, in the background, `npm ci` of
#      the dashboard type-check tools (deploy/grafana), awaited before the unit tests (one runs tsc)
#   3. ruff (lint + format); then, side by side: mypy --strict (planner/, adapters/) and
#      import-linter (layer rules), then once `npm ci` has ended the unit, property and golden
#      tests on every core (pytest-xdist), and beside them, in the background, the integration
#      tests that do not use the dev Slurm (real Prometheus, Alertmanager, Chromium, buildah,
#      Ray, `planner serve` processes) on two workers, a file on one, then those of the shared
#      PostgreSQL (marked `postgres` by tests/conftest.py) one at a time
#   4. once all of step 3 has ended, with nothing beside them, the integration tests of the
#      shared dev Slurm one at a time (marked `dev_slurm` by tests/conftest.py: a real Slurm
#      cluster on loopback, real PyTorch DDP jobs under it): a DDP job's ranks sharing the two
#      cores with other tests changed the straggler what-if's accuracy beyond its 10 % bound
#      (one CI run, 2026-12-04)
# Extra arguments go to one pytest run instead (e.g. `deploy/dev/test.sh -m "not integration"`).
set -euo pipefail
cd "$(dirname "$0")/../.."
t0=$SECONDS
# Bytecode caches are written (__pycache__, git-ignored) even where the environment says not to:
# without them each pytest process rewrites the asserts of every test module again (about 10 of
# the 20 CPU-s it takes to collect the suite).
unset PYTHONDONTWRITEBYTECODE
# This is the command CI runs, whether or not the CI machine sets CI: property tests on the fixed
# seed sequence of tests/conftest.py's "ci" profile (a verdict never depends on the draw), and
# the integration tests print the tail of their service's log.
export CI="${CI:-true}"
step() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - t0)); }
logs=$(mktemp -d)
# Background steps still running when this script ends (a failed step) are stopped.
cleanup() {
  local running
  running=$(jobs -p)
  # shellcheck disable=SC2086 # one pid a word
  [[ -z $running ]] || kill $running 2>/dev/null || true
  rm -rf "$logs"
}
trap cleanup EXIT

# npm fetches over the network while the steps below work the CPUs; its log is shown when it
# ends (wait_npm), before the dashboard type-check test needs its tools.
npm_pid=
if command -v npm >/dev/null; then
  (cd deploy/grafana && exec npm ci --no-audit --no-fund --silent) >"$logs/npm.log" 2>&1 &
  npm_pid=$!
fi
wait_npm() {
  step "dashboard type-check tools (npm ci in deploy/grafana, started at 0 s)"
  if [[ -z $npm_pid ]]; then
    echo "npm not found: the dashboard type-check test will skip"
    return
  fi
  local rc=0
  wait "$npm_pid" || rc=$?
  cat "$logs/npm.log"
  ((rc == 0)) || echo "npm ci failed (exit $rc)"
  return "$rc"
}

step "system packages"
bash deploy/dev/install-deps.sh

step "python environment"
PY=${PYTHON:-python3}
[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
pipq() { .venv/bin/pip install -q --disable-pip-version-check "$@" 2> >(grep -v 'is ignored: it is neither' >&2); }
# pip resolves every requirement and rebuilds the editable install on each run (about 110 s on
# a quiet 2-core machine) even when nothing changed: the environment keeps a stamp of what it
# was installed from (pyproject.toml, the torch pin, the interpreter, this checkout), and pip is
# skipped while the stamp matches, this checkout's planner is the one imported and `pip check`
# finds every installed requirement met.
torch_pin="torch==2.13.0+cpu"
stamp=.venv/.installed-from
want=$({ cat pyproject.toml; echo "$torch_pin -e .[dev,ray] $PWD"; .venv/bin/python -VV; } | sha256sum)
if [[ -f $stamp && $(<"$stamp") == "$want" ]] &&
  .venv/bin/python -c 'import pathlib, sys, planner
sys.exit(pathlib.Path(planner.__file__).resolve().parents[1] != pathlib.Path.cwd().resolve())' &&
  .venv/bin/pip check -q --disable-pip-version-check >/dev/null; then
  echo "unchanged since its install ($stamp): pip not run"
else
  rm -f "$stamp"
  if ! .venv/bin/python -c 'import torch' 2>/dev/null; then
    # The CPU wheel of torch 2.13.0 ships on these machines (PIP_FIND_LINKS, /opt/wheels);
    # pinning the +cpu local version keeps pip from ever fetching the multi-GB CUDA build.
    # Installed before the dev extra, whose accelerate needs torch: pip then keeps this one.
    pipq --find-links "${PIP_FIND_LINKS:-/opt/wheels}" "$torch_pin" numpy
  fi
  pipq -e '.[dev,ray]'
  echo "$want" >"$stamp"
fi

step "ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .

# Every step from here runs whatever the others give, so one run shows every failure; the
# first failure's exit status is the script's.
status=0
failed() { # failed RC WHAT: note a failed step
  step "$2 failed (exit $1)"
  ((status)) || status=$1
}

# The integration tests off the dev Slurm mostly wait (on a server, a browser, an image build):
# they run from here on, beside the type checks and the unit tests, their log printed once the
# unit tests have ended.
others_pid=
if ((!$#)); then
  step "pytest: integration tests off the dev Slurm (2 workers, a file on one) start in the background"
  # then those of the shared PostgreSQL one at a time (two files start and stop one server)
  (
    rc=0
    .venv/bin/python -m pytest -m "integration and not dev_slurm and not postgres" -n 2 \
      --dist loadfile --durations=25 || rc=$?
    .venv/bin/python -m pytest -m "integration and postgres" || rc=$((rc ? rc : $?))
    exit "$rc"
  ) >"$logs/others.log" 2>&1 &
  others_pid=$!
  others_started=$((SECONDS - t0))
fi

# mypy and import-linter each work one core: side by side, their logs printed in order.
step "mypy --strict planner adapters, and import-linter beside it"
.venv/bin/lint-imports >"$logs/lint-imports.log" 2>&1 &
lint_pid=$!
rc=0
.venv/bin/mypy || rc=$?
((rc == 0)) || failed "$rc" mypy
rc=0
wait "$lint_pid" || rc=$?
step "import-linter"
cat "$logs/lint-imports.log"
((rc == 0)) || failed "$rc" import-linter

if (($#)); then
  ((status == 0)) || exit "$status"
  wait_npm || exit
  step "pytest $*"
  .venv/bin/python -m pytest "$@"
else
  rc=0
  wait_npm || rc=$? # the type-check test runs `npm ci` again
  ((rc == 0)) || failed "$rc" "npm ci"
  step "pytest: unit tests (-n auto)"
  rc=0
  .venv/bin/python -m pytest -m "not integration" -n auto || rc=$?
  ((rc == 0)) || failed "$rc" "pytest (unit tests)"
  rc=0
  wait "$others_pid" || rc=$?
  step "pytest: integration tests off the dev Slurm (started at ${others_started} s; their output)"
  cat "$logs/others.log"
  ((rc == 0)) || failed "$rc" "pytest (integration tests off the dev Slurm)"
  step "pytest: integration tests of the dev Slurm (one at a time, nothing beside them)"
  rc=0
  .venv/bin/python -m pytest -m "integration and dev_slurm" --durations=25 || rc=$?
  ((rc == 0)) || failed "$rc" "pytest (integration tests of the dev Slurm)"
fi
((status == 0)) || { step "failed (exit $status)"; exit "$status"; }
step "done"
