#!/usr/bin/bash
# Starts a torchtitan training run the way torchtitan's own run_train.sh does: torchrun with one
# process per GPU runs the `torchtitan.train` module on a TOML job config; extra arguments are
# `--section.key value` overrides of that config. Environment variables are local overrides:
#   NGPU=2 CONFIG_FILE=./train_configs/debug_model.toml ./run_train.sh --training.steps 20
# Written for the planner's dev stack (deploy/dev/launch_styles/torchtitan/README.md): run from
# this directory, `python -m torchtitan.train` finds the CPU stand-in in ./torchtitan.

set -ex

NGPU=${NGPU:-"8"}
export LOG_RANK=${LOG_RANK:-0}
CONFIG_FILE=${CONFIG_FILE:-"./train_configs/debug_model.toml"}
TRAIN_FILE=${TRAIN_FILE:-"torchtitan.train"}

# rendezvous on a free local port, so that several jobs can share a host; only LOG_RANK's output
# is shown, each line prefixed with its rank
torchrun --nproc_per_node=${NGPU} --rdzv_backend c10d --rdzv_endpoint="localhost:0" \
    --local-ranks-filter ${LOG_RANK} --role rank --tee 3 \
    -m ${TRAIN_FILE} --job.config_file ${CONFIG_FILE} "$@"
