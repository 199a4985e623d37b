#!/usr/bin/env bash
# The planner's first run, from a fresh clone on Debian:
#   bash deploy/dev/demo.sh
# As root it runs as it is (root containers have no sudo); as another user it runs itself again
# through sudo (the local Slurm's daemons switch users), and says so.
# 1. the Debian packages of the local Slurm (munge, Slurm, MariaDB)    install-deps.sh --demo
# 2. a virtual environment .venv with the planner and the CPU build of PyTorch (each skipped when
#    already there: a second run goes straight to the demo)
# 3. `planner demo`: the local Slurm, a real PyTorch DDP job with evaluation pauses and a
#    slowed rank, the planner watching it; it cleans up after itself (planner/demo_cli.py).
# Each step prints how long it took. Extra arguments go to `planner demo` (e.g. --port 0).
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
if ((EUID != 0)); then
  if command -v sudo >/dev/null 2>&1; then
    echo "demo: the local Slurm needs root; running again through sudo" >&2
    exec sudo -E bash "$self" "$@"
  fi
  echo "demo: run it as root (the local Slurm's daemons switch users); sudo is not installed" >&2
  exit 2
fi
step() { # name, command...: run a setup step and print how long it took
  local name=$1 t=$SECONDS
  shift
  "$@"
  echo "demo: $name done in $((SECONDS - t)) s" >&2
}
step "packages (install-deps.sh --demo)" bash deploy/dev/install-deps.sh --demo
PY=${PYTHON:-python3}
[[ -x .venv/bin/python ]] || step "virtual environment" "$PY" -m venv .venv
# The planner is installed once per version of pyproject.toml (an editable install follows the
# sources by itself).
stamp=.venv/.planner-demo-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]] || ! .venv/bin/python -c 'import planner' 2>/dev/null; then
  step "planner (pip install -e .)" .venv/bin/pip install -q --disable-pip-version-check -e .
  echo "$want" >"$stamp"
fi
if ! .venv/bin/python -c 'import torch' 2>/dev/null; then
  if [[ -d ${PIP_FIND_LINKS:-/opt/wheels} ]]; then # a local wheel house (no network)
    step "PyTorch (local wheels)" .venv/bin/pip install -q --find-links "${PIP_FIND_LINKS:-/opt/wheels}" "torch==2.13.0+cpu" numpy
  else # the CPU build: no multi-GB CUDA download
    step "PyTorch (CPU build)" .venv/bin/pip install -q torch numpy --index-url https://download.pytorch.org/whl/cpu
  fi
fi
exec .venv/bin/planner demo "$@"
