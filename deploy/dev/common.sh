# shellcheck shell=bash
# Settings and helpers shared by the dev Slurm stack scripts (sourced, not run).
# Every setting is an environment variable with a default; everything binds to 127.0.0.1.
# (Variables set here are used by the scripts that source this file.)
# shellcheck disable=SC2034
#
#   STACK_ROOT   where configs, state, logs and pid files live (default /tmp/planner-dev-stack).
#                Every parent directory must be traversable (o+x) by the munge user.
#   SLURM_CLUSTER, SLURM_NODES, SLURM_NODE_CPUS, SLURM_NODE_MEM_MB, SLURM_NODE_GPUS, SLURM_GPU_TYPE
#   SLURMCTLD_PORT, SLURMD_BASE_PORT (node i uses base + 10*(i-1)), SLURMDBD_PORT, MARIADB_PORT
#   WITH_SLURMDBD  1 = MariaDB + slurmdbd (sacct works), 0 = accounting_storage/none

: "${STACK_ROOT:=/tmp/planner-dev-stack}"
: "${SLURM_CLUSTER:=devcluster}"
: "${SLURM_NODES:=2}"
: "${SLURM_NODE_CPUS:=64}"
: "${SLURM_NODE_SOCKETS:=2}"
: "${SLURM_NODE_MEM_MB:=512000}"
: "${SLURM_NODE_GPUS:=8}"
: "${SLURM_GPU_TYPE:=h100}"
: "${SLURM_DEF_MEM_PER_CPU:=1024}"
: "${SLURM_ACCOUNT:=planners}"
: "${SLURMCTLD_PORT:=6817}"
: "${SLURMD_BASE_PORT:=6818}"
: "${SLURMDBD_PORT:=6819}"
: "${MARIADB_PORT:=13306}"
: "${WITH_SLURMDBD:=1}"

SLURM_DIR=$STACK_ROOT/slurm
ETC_DIR=$SLURM_DIR/etc
RUN_DIR=$STACK_ROOT/run
LOG_DIR=$STACK_ROOT/log
MUNGE_DIR=$STACK_ROOT/munge
MUNGE_SOCK=$MUNGE_DIR/munge.socket
DB_DIR=$STACK_ROOT/mariadb
DB_SOCK=$DB_DIR/run/mysqld.sock
export STACK_ROOT SLURM_CONF=$ETC_DIR/slurm.conf

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

now_s() { date +%s.%N; }
# elapsed START: seconds since START (from now_s), one decimal
elapsed() { awk -v a="$1" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }'; }

# pid_of NAME: the pid recorded in $RUN_DIR/NAME.pid, or nothing
pid_of() {
  local f=$RUN_DIR/$1.pid pid
  [[ -s $f ]] || return 1
  pid=$(<"$f")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  printf '%s\n' "$pid"
}

# is_running PID: the process exists and is not a zombie
is_running() {
  local state
  state=$(sed -n 's/^.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $state && $state != Z ]]
}

# pid_alive NAME PROGRAM: NAME.pid names a running process whose command line contains PROGRAM
pid_alive() {
  local pid
  pid=$(pid_of "$1") || return 1
  is_running "$pid" || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$2"
}

# stop_pid NAME PROGRAM [TIMEOUT_S]: SIGTERM the process of NAME.pid (only if it is PROGRAM),
# wait up to TIMEOUT_S, then SIGKILL. Never matches processes by name.
stop_pid() {
  local name=$1 program=$2 timeout_s=${3:-20} pid i
  if pid_alive "$name" "$program"; then
    pid=$(pid_of "$name")
    log "stopping $name (pid $pid)"
    kill "$pid" 2>/dev/null || true
    for ((i = 0; i < timeout_s * 10; i++)); do
      is_running "$pid" || break
      sleep 0.1
    done
    if is_running "$pid"; then
      log "$name still running after ${timeout_s}s: SIGKILL"
      kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$RUN_DIR/$name.pid"
}

# wait_for WHAT DEADLINE_S CMD...: retry CMD (each try capped at 10 s) until it succeeds or the
# deadline passes; shell functions are called directly.
wait_for() {
  local what=$1 deadline=$((SECONDS + $2))
  shift 2
  while ((SECONDS < deadline)); do
    if declare -F "$1" >/dev/null; then
      "$@" >/dev/null 2>&1 && return 0
    elif timeout 10 "$@" >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.2
  done
  log "timed out after $((SECONDS - deadline + $2))s waiting for $what"
  return 1
}

node_names() {
  local i
  for ((i = 1; i <= SLURM_NODES; i++)); do printf 'node%d\n' "$i"; done
}

node_hostlist() {
  if ((SLURM_NODES == 1)); then echo node1; else echo "node[1-$SLURM_NODES]"; fi
}

# start_slurmctld: start slurmctld unless running, wait until it answers `scontrol ping`
start_slurmctld() {
  if pid_alive slurmctld slurmctld; then
    return 0
  fi
  rm -f "$RUN_DIR/slurmctld.pid"
  /usr/sbin/slurmctld -f "$SLURM_CONF"
  wait_for "slurmctld to answer ping" 60 bash -c 'scontrol ping | grep -q "is UP"' ||
    { tail -n 20 "$SLURM_DIR/log/slurmctld.log" >&2; die "slurmctld did not come up"; }
  wait_for "slurmctld pid file" 10 test -s "$RUN_DIR/slurmctld.pid"
  log "slurmctld up (pid $(pid_of slurmctld))"
}

mkdir -p "$RUN_DIR" "$LOG_DIR"
