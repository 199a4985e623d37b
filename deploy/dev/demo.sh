#!/usr/bin/env bash
# The planner's first run, from a fresh clone on Debian, as root:
#   sudo bash deploy/dev/demo.sh
# 1. the Debian packages of the local Slurm (munge, Slurm, MariaDB)    install-deps.sh --demo
# 2. a virtual environment .venv with the planner and the CPU build of PyTorch
# 3. `planner demo`: the local Slurm, a real PyTorch DDP job with an evaluation pause and a
#    slowed rank, the planner watching it; it cleans up after itself (planner/demo_cli.py).
# Extra arguments go to `planner demo` (e.g. --port 0 --train-iters 400).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash deploy/dev/install-deps.sh --demo
PY=${PYTHON:-python3}
[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e .
if ! .venv/bin/python -c 'import torch' 2>/dev/null; then
  if [[ -d ${PIP_FIND_LINKS:-/opt/wheels} ]]; then  # a local wheel house (no network)
    .venv/bin/pip install -q --find-links "${PIP_FIND_LINKS:-/opt/wheels}" "torch==2.13.0+cpu" numpy
  else  # the CPU build: no multi-GB CUDA download
    .venv/bin/pip install -q torch numpy --index-url https://download.pytorch.org/whl/cpu
  fi
fi
exec .venv/bin/planner demo "$@"
