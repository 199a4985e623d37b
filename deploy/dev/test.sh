#!/usr/bin/env bash
# The project's whole test command, runnable on a fresh Debian machine as root:
#   1. Debian packages of the dev stack (Slurm, munge, MariaDB for sacct)   deploy/dev/install-deps.sh
#   2. a virtual environment .venv with the project, its dev tools and the CPU build of PyTorch
#      (the tiny training job of the end-to-end test)
#   3. ruff (lint + format), mypy --strict (planner/, adapters/), import-linter (layer rules)
#   4. pytest: unit, property and golden tests on every core (pytest-xdist), then, one at a time,
#      the integration tests that start a real Slurm cluster on loopback and run a real PyTorch
#      DDP job under it (they share the dev Slurm, its fixed ports and the machine's CPUs).
# Extra arguments go to one pytest run instead (e.g. `deploy/dev/test.sh -m "not integration"`).
set -euo pipefail
cd "$(dirname "$0")/../.."
t0=$SECONDS
step() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - t0)); }

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

step "dashboard type-check tools (npm ci in deploy/grafana)"
if command -v npm >/dev/null; then
  (cd deploy/grafana && npm ci --no-audit --no-fund --silent)
else
  echo "npm not found: the dashboard type-check test will skip"
fi

step "ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
step "mypy --strict planner adapters"
.venv/bin/mypy
step "import-linter"
.venv/bin/lint-imports
if (($#)); then
  step "pytest $*"
  .venv/bin/python -m pytest "$@"
else
  # Both parts run whatever the first gives, so one run shows every failure.
  status=0
  step "pytest: unit tests (-n auto)"
  .venv/bin/python -m pytest -m "not integration" -n auto || status=$?
  step "pytest: integration tests (serial)"
  .venv/bin/python -m pytest -m integration || status=$((status ? status : $?))
  ((status == 0)) || { step "pytest failed (exit $status)"; exit "$status"; }
fi
step "done"
