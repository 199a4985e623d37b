#!/usr/bin/env bash
# Start slurmctld of the dev stack again after slurmctld-stop.sh (the rest must be up: slurm-up.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"
[[ -s $SLURM_CONF ]] || die "no $SLURM_CONF: run slurm-up.sh first"
t=$(now_s)
start_slurmctld
log "slurmctld-start done in $(elapsed "$t")s"
