#!/usr/bin/env bash
# The project's whole test command, runnable on a fresh Debian machine as root:
#   1. Debian packages of the dev stack (Slurm, munge, MariaDB for sacct)   deploy/dev/install-deps.sh
#   2. a virtual environment .venv with the project, its dev tools and the CPU build of PyTorch
#      (the tiny training job of the end-to-end test); meanwhile, in the background, `npm ci` of
#      the dashboard type-check tools (deploy/grafana), awaited before the unit tests (one runs tsc)
#   3. ruff (lint + format), then mypy --strict (planner/, adapters/) and import-linter (layer
#      rules) side by side
#   4. pytest, in two lanes at once: (a) the integration tests of the shared dev Slurm (marked
#      `dev_slurm` by tests/conftest.py: they start a real Slurm cluster on loopback and run real
#      PyTorch DDP jobs under it; they share its fixed ports and nodes), one at a time, from the
#      end of step 3; (b) once `npm ci` has ended, the unit, property and golden tests on every
#      core (pytest-xdist), then the other integration tests (real Prometheus, Alertmanager,
#      PostgreSQL, Chromium, buildah, Ray, `planner serve` processes), one at a time. Lane (a)'s
#      output is printed when both have ended.
# Extra arguments go to one pytest run instead (e.g. `deploy/dev/test.sh -m "not integration"`).
set -euo pipefail
cd "$(dirname "$0")/../.."
t0=$SECONDS
# Bytecode caches are written (__pycache__, git-ignored) even where the environment says not to:
# without them each pytest process rewrites the asserts of every test module again (about 10 of
# the 20 CPU-s it takes to collect the suite).
unset PYTHONDONTWRITEBYTECODE
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
  # Two lanes at once, every part run whatever the others give, so one run shows every failure.
  # Lane 1 (its output printed at the end): the tests of the shared dev Slurm, one at a time.
  # Lane 2 (here): the unit tests on every core, then the other integration tests one at a time.
  step "pytest: the dev Slurm's integration tests (-m dev_slurm) start in the background"
  .venv/bin/python -m pytest -m "integration and dev_slurm" >"$logs/dev_slurm.log" 2>&1 &
  slurm_pid=$!
  slurm_started=$((SECONDS - t0))
  status=0
  wait_npm || status=$? # the Slurm lane runs on; the type-check test runs `npm ci` again
  step "pytest: unit tests (-n auto)"
  .venv/bin/python -m pytest -m "not integration" -n auto || status=$?
  step "pytest: the other integration tests (-m 'integration and not dev_slurm')"
  .venv/bin/python -m pytest -m "integration and not dev_slurm" || status=$((status ? status : $?))
  slurm_rc=0
  wait "$slurm_pid" || slurm_rc=$?
  step "pytest: the dev Slurm's integration tests (started at ${slurm_started} s; their output)"
  cat "$logs/dev_slurm.log"
  ((slurm_rc == 0)) || status=$((status ? status : slurm_rc))
  ((status == 0)) || { step "pytest failed (exit $status)"; exit "$status"; }
fi
step "done"
