#!/usr/bin/env bash
# Stop the dev Slurm stack started by slurm-up.sh, by pid file only (never by process name), in
# reverse order; running jobs are cancelled first so no job processes outlive their slurmd.
#   PURGE=1   also delete Slurm state/spool/logs and the MariaDB datadir (next start is cold)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"
: "${PURGE:=0}"
t=$(now_s)

if pid_alive slurmctld slurmctld; then
  scancel --full --user=root >/dev/null 2>&1 || true
  for _ in $(seq 1 50); do
    [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break
    sleep 0.2
  done
fi
for f in "$RUN_DIR"/slurmd-*.pid; do
  [[ -e $f ]] || continue
  stop_pid "$(basename "$f" .pid)" slurmd 20
done
stop_pid slurmctld slurmctld 20
stop_pid slurmdbd slurmdbd 20
stop_pid mariadbd mariadbd 60
stop_pid munged munged 10

if [[ $PURGE == 1 ]]; then
  rm -rf "$SLURM_DIR/state" "$SLURM_DIR/spool" "$SLURM_DIR/log" "$DB_DIR"
  log "purged Slurm state, spool, logs and the MariaDB datadir"
fi
log "slurm-down done in $(elapsed "$t")s"
