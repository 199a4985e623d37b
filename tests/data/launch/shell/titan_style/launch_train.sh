#!/usr/bin/env bash
set -euo pipefail
# Defaults a caller may override through the environment.
NGPU=${NGPU:-"8"}
export RANK_LOG=${RANK_LOG:-0}
TRAIN_CFG=${TRAIN_CFG:-"./configs/tiny.toml"}
ENTRY=${ENTRY:-"toytrain.main"}

torchrun --nproc_per_node=${NGPU} --rdzv_backend c10d --rdzv_endpoint="localhost:0" \
  --local-ranks-filter ${RANK_LOG} --role rank --tee 3 \
  -m ${ENTRY} --job.config ${TRAIN_CFG} "$@"
