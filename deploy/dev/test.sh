#!/usr/bin/env bash
# The project's whole test command, runnable on a fresh Debian machine as root:
#   1. Debian packages of the dev stack (Slurm, munge, MariaDB for sacct)   deploy/dev/install-deps.sh
#   2. a virtual environment .venv with the project, its dev tools and the CPU build of PyTorch
#      (the tiny training job of the end-to-end test); meanwhile, in the background, `npm ci` of
#      the dashboard type-check tools (deploy/grafana), awaited before the unit tests (one runs tsc)
#   3. ruff (lint + format), then mypy --strict (planner/, adapters/) and import-linter (layer
#      rules) side by side
#   4. pytest: once `npm ci` has ended, the unit, property and golden tests on every core
#      (pytest-xdist), then, one at a time, the integration tests: those of the shared dev Slurm
#      (marked `dev_slurm` by tests/conftest.py: a real Slurm cluster on loopback, real PyTorch
#      DDP jobs under it) and the others (real Prometheus, Alertmanager, PostgreSQL, Chromium,
#      buildah, Ray, `planner serve` processes). They do not run beside each other: a DDP job's
#      ranks sharing the two cores with another lane changed the straggler what-if's accuracy
#      beyond its 10 % bound (one CI run, 2026-12-04).
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
# --no-compile: pip would byte-compile every module of every package (torch and ray alone hold
# thousands) at install; Python compiles the ones the tests import when they first import
# them (about 15 s of the step on a clean checkout, about 1 s back at first import).
pipq() { .venv/bin/pip install -q --no-compile --disable-pip-version-check "$@" 2> >(grep -v 'is ignored: it is neither' >&2); }
if ! .venv/bin/python -c 'import torch' 2>/dev/null; then
  # The CPU wheel of torch 2.13.0 ships on these machines (PIP_FIND_LINKS, /opt/wheels); pinning
  # the +cpu local version keeps pip from ever fetching the multi-GB CUDA build. Installed before
  # the dev extra, whose accelerate needs torch: pip then keeps this one.
  pipq --find-links "${PIP_FIND_LINKS:-/opt/wheels}" "torch==2.13.0+cpu" numpy
fi
pipq -e '.[dev,ray]'

step "ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# mypy and import-linter each work one core: side by side, their logs printed in order.
step "mypy --strict planner adapters, and import-linter beside it"
.venv/bin/lint-imports >"$logs/lint-imports.log" 2>&1 &
lint_pid=$!
mypy_rc=0
.venv/bin/mypy || mypy_rc=$?
lint_rc=0
wait "$lint_pid" || lint_rc=$?
step "import-linter"
cat "$logs/lint-imports.log"
((mypy_rc == 0)) || { step "mypy failed (exit $mypy_rc)"; exit "$mypy_rc"; }
((lint_rc == 0)) || { step "import-linter failed (exit $lint_rc)"; exit "$lint_rc"; }

if (($#)); then
  wait_npm || exit
  step "pytest $*"
  .venv/bin/python -m pytest "$@"
else
  # Both parts run whatever the first gives, so one run shows every failure.
  status=0
  wait_npm || status=$? # the type-check test runs `npm ci` again
  step "pytest: unit tests (-n auto)"
  .venv/bin/python -m pytest -m "not integration" -n auto || status=$?
  step "pytest: integration tests (serial)"
  .venv/bin/python -m pytest -m integration --durations=25 || status=$((status ? status : $?))
  ((status == 0)) || { step "pytest failed (exit $status)"; exit "$status"; }
fi
step "done"
