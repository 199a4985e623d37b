#!/usr/bin/env bash
# Start a private PostgreSQL for the planner's shared store (Debian's postgresql package) on
# 127.0.0.1:$PG_PORT, with its data, socket and log under $STACK_ROOT/postgres. Idempotent: an
# existing cluster is reused, a running one left alone; the role and database are created once.
# Run as root (the server then runs as the `postgres` user) or as any other non-root user.
#   PG_PORT (15432)  PG_DB (planner)  PG_USER (planner)  PG_PASSWORD (planner)
#   PG_DURABLE=0     fsync off (a dev/test database: much faster; set 1 for crash safety)
# When it returns:  source "$STACK_ROOT/postgres/env.sh"   (exports PLANNER_DATABASE_URL)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"
: "${PG_PORT:=15432}"
: "${PG_DB:=planner}"
: "${PG_USER:=planner}"
: "${PG_PASSWORD:=planner}"
: "${PG_DURABLE:=0}"
PG_DIR=$STACK_ROOT/postgres
PG_DATA=$PG_DIR/data
PG_SOCK_DIR=$PG_DIR/run

[[ $PG_DB =~ ^[a-z_][a-z0-9_]*$ && $PG_USER =~ ^[a-z_][a-z0-9_]*$ ]] ||
  die "PG_DB and PG_USER must be plain lower-case SQL identifiers"
[[ $PG_PASSWORD != *"'"* ]] || die "PG_PASSWORD must not contain a single quote"
pg_bin=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)
[[ -n $pg_bin && -x $pg_bin/initdb ]] || die "PostgreSQL server binaries missing: run install-deps.sh"
t=$(now_s)

# as_pg CMD...: run CMD as the database owner (postgres when we are root, else ourselves)
as_pg() {
  if ((EUID == 0)); then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

mkdir -p "$PG_DIR" "$PG_SOCK_DIR"
if ((EUID == 0)); then
  chmod 755 "$STACK_ROOT"
  d=$STACK_ROOT
  while [[ $d != / ]]; do
    (((8#$(stat -c %a "$d") & 1) == 1)) || die "$d is not o+x; the postgres user cannot reach $PG_DIR"
    d=$(dirname "$d")
  done
  chown postgres:postgres "$PG_DIR" "$PG_SOCK_DIR"
fi
chmod 700 "$PG_DIR"
chmod 755 "$PG_SOCK_DIR"
((EUID != 0)) || chmod 711 "$PG_DIR"

if [[ ! -s $PG_DATA/PG_VERSION ]]; then
  as_pg "$pg_bin/initdb" -D "$PG_DATA" -U postgres -E UTF8 --no-locale --auth-local=peer \
    --auth-host=scram-sha-256 >"$PG_DIR/initdb.log" 2>&1 ||
    { tail -n 20 "$PG_DIR/initdb.log" >&2; die "initdb failed"; }
  log "initdb: new cluster in $PG_DATA"
fi

fsync=off
[[ $PG_DURABLE == 1 ]] && fsync=on
if as_pg "$pg_bin/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1; then
  log "postgres already running (pid $(head -n 1 "$PG_DATA/postmaster.pid"))"
else
  as_pg "$pg_bin/pg_ctl" -D "$PG_DATA" -l "$PG_DIR/postgres.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -c unix_socket_directories=$PG_SOCK_DIR -c fsync=$fsync -c full_page_writes=$fsync -c synchronous_commit=$fsync" \
    start >/dev/null || { tail -n 20 "$PG_DIR/postgres.log" >&2; die "postgres did not start"; }
  log "postgres up on 127.0.0.1:$PG_PORT (pid $(head -n 1 "$PG_DATA/postmaster.pid"))"
fi
wait_for "postgres to accept connections" 60 "$pg_bin/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" ||
  die "postgres does not accept connections on 127.0.0.1:$PG_PORT"

psql_su() { as_pg "$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$PG_SOCK_DIR" -p "$PG_PORT" -U postgres -d postgres "$@"; }
if [[ -z $(psql_su -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$PG_USER'") ]]; then
  # CREATEDB: tests create a throw-away database each
  psql_su -c "CREATE ROLE $PG_USER LOGIN CREATEDB PASSWORD '$PG_PASSWORD'"
  log "created role $PG_USER"
fi
if [[ -z $(psql_su -tAc "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'") ]]; then
  psql_su -c "CREATE DATABASE $PG_DB OWNER $PG_USER"
  log "created database $PG_DB"
fi

url="postgresql+psycopg://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/$PG_DB"
printf 'export PLANNER_DATABASE_URL=%q\n' "$url" >"$PG_DIR/env.sh"
chmod 644 "$PG_DIR/env.sh"
log "postgres-up done in $(elapsed "$t")s; source $PG_DIR/env.sh (PLANNER_DATABASE_URL=$url)"
