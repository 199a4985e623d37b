#!/usr/bin/env bash
# Stop what prometheus-up.sh started, by pid file only (never by process name).
#   PURGE=1   also delete the TSDB and Alertmanager state (Alertmanager's notification log would
#             otherwise suppress the same alert group for repeat_interval after a restart)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../dev/common.sh
source "$here/../dev/common.sh"
: "${PURGE:=0}"
stop_pid alertmanager alertmanager 15
stop_pid prometheus prometheus 30
if [[ $PURGE == 1 ]]; then
  rm -rf "$STACK_ROOT/prometheus/data" "$STACK_ROOT/prometheus/am-data"
  log "purged the Prometheus TSDB and Alertmanager state"
fi
log "prometheus-down done"
