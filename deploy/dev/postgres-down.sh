#!/usr/bin/env bash
# Stop the PostgreSQL started by postgres-up.sh (pg_ctl stop -m fast, by its data directory).
#   PURGE=1   also delete its data directory (the next start runs initdb again)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"
: "${PURGE:=0}"
PG_DIR=$STACK_ROOT/postgres
PG_DATA=$PG_DIR/data
t=$(now_s)
pg_bin=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)

as_pg() {
  if ((EUID == 0)); then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

if [[ -n $pg_bin && -s $PG_DATA/PG_VERSION ]] &&
  as_pg "$pg_bin/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1; then
  as_pg "$pg_bin/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 stop >/dev/null ||
    die "pg_ctl stop failed (see $PG_DIR/postgres.log)"
  log "postgres stopped"
fi
if [[ $PURGE == 1 ]]; then
  rm -rf "$PG_DIR"
  log "purged $PG_DIR"
fi
log "postgres-down done in $(elapsed "$t")s"
