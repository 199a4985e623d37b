#!/usr/bin/env bash
# Start a real Prometheus 2.42 (+ Alertmanager 0.25) from Debian on 127.0.0.1, for the dev stack
# and the tests. Idempotent: what already runs (by pid file) is reloaded, not started twice.
#
#   STACK_ROOT                  configs, TSDB, logs and pid files (default /tmp/planner-dev-stack)
#   PROM_PORT                   Prometheus HTTP port (default 9090)
#   PROM_SCRAPE_INTERVAL        scrape and rule evaluation interval (default 5s)
#   PROM_SCRAPE_JOBS            "job=host:port,host:port;job2=host:port" scraped with honor_labels
#                               (default "planner=127.0.0.1:8080", the planner's /metrics)
#   PROM_RULES_GLOB             rule files, checked with promtool first (e.g. deploy/prometheus/rules/*.yml)
#   PROM_BACKFILL_OPENMETRICS   OpenMetrics file imported with promtool before start
#   WITH_ALERTMANAGER           1 = start Alertmanager first and send alerts to it (default 0)
#   ALERTMANAGER_PORT           default 9093
#   ALERTMANAGER_WEBHOOK_URL    where Alertmanager posts notifications (default http://127.0.0.1:9105/alerts)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../dev/common.sh
source "$here/../dev/common.sh"

: "${PROM_PORT:=9090}"
: "${PROM_SCRAPE_INTERVAL:=5s}"
: "${PROM_SCRAPE_JOBS:=planner=127.0.0.1:8080}"
: "${PROM_RULES_GLOB:=}"
: "${PROM_BACKFILL_OPENMETRICS:=}"
: "${PROM_RETENTION:=3650d}"          # longer than any backfilled span (15d default would drop it)
: "${PROM_ALERT_RESEND_DELAY:=5s}"    # default 1m delays the first delivered alert by ~1 min
: "${WITH_ALERTMANAGER:=0}"
: "${ALERTMANAGER_PORT:=9093}"
: "${ALERTMANAGER_WEBHOOK_URL:=http://127.0.0.1:9105/alerts}"
PROM_DIR=$STACK_ROOT/prometheus

for b in prometheus promtool; do
  command -v "$b" >/dev/null || die "$b not installed: run deploy/dev/install-deps.sh"
done
t_all=$(now_s)
mkdir -p "$PROM_DIR/data" "$PROM_DIR/am-data"
cfg=$PROM_DIR/prometheus.yml

{
  echo "global:"
  echo "  scrape_interval: $PROM_SCRAPE_INTERVAL"
  echo "  evaluation_interval: $PROM_SCRAPE_INTERVAL"
  if [[ -n $PROM_RULES_GLOB ]]; then
    echo "rule_files:"
    echo "  - \"$PROM_RULES_GLOB\""
  fi
  if [[ $WITH_ALERTMANAGER == 1 ]]; then
    echo "alerting:"
    echo "  alertmanagers:"
    echo "    - static_configs:"
    echo "        - targets: [\"127.0.0.1:$ALERTMANAGER_PORT\"]"
  fi
  echo "scrape_configs:"
  IFS=';' read -r -a jobs <<<"$PROM_SCRAPE_JOBS"
  for j in "${jobs[@]}"; do
    [[ -n $j ]] || continue
    name=${j%%=*}
    targets=$(echo "${j#*=}" | tr ',' '\n' | sed '/^$/d; s/.*/"&"/' | paste -sd, -)
    echo "  - job_name: \"$name\""
    echo "    honor_labels: true   # keep the exporter's own labels (else renamed exported_*)"
    echo "    static_configs:"
    echo "      - targets: [$targets]"
  done
} >"$cfg"
promtool check config "$cfg" >"$LOG_DIR/promtool-check-config.log" 2>&1 ||
  { cat "$LOG_DIR/promtool-check-config.log" >&2; die "invalid Prometheus config $cfg"; }

if [[ -n $PROM_BACKFILL_OPENMETRICS ]]; then
  pid_alive prometheus prometheus &&
    log "WARNING: prometheus already running; backfilled blocks appear after its next reload (<= ~1 min)"
  t=$(now_s)
  # --max-block-duration (accepted, not in --help): 24 h blocks instead of many 2 h ones
  promtool tsdb create-blocks-from openmetrics -q --max-block-duration=24h \
    "$PROM_BACKFILL_OPENMETRICS" "$PROM_DIR/data" >"$LOG_DIR/promtool-backfill.log" 2>&1 ||
    { tail -n 20 "$LOG_DIR/promtool-backfill.log" >&2; die "backfill of $PROM_BACKFILL_OPENMETRICS failed"; }
  log "backfilled $PROM_BACKFILL_OPENMETRICS in $(elapsed "$t")s"
fi

# Alertmanager first: Prometheus drops the alerts it sends before its Alertmanager list is
# populated and re-sends them only after --rules.alert.resend-delay.
if [[ $WITH_ALERTMANAGER == 1 ]]; then
  command -v prometheus-alertmanager >/dev/null ||
    die "prometheus-alertmanager not installed: run deploy/dev/install-deps.sh"
  cat >"$PROM_DIR/alertmanager.yml" <<AM
route:
  receiver: webhook
  group_by: ['alertname', 'scheduler', 'cluster', 'job_id']
  group_wait: 1s
  group_interval: 5s
  repeat_interval: 1h
receivers:
  - name: webhook
    webhook_configs:
      - url: "$ALERTMANAGER_WEBHOOK_URL"
        send_resolved: true
AM
  amtool check-config "$PROM_DIR/alertmanager.yml" >"$LOG_DIR/amtool-check-config.log" 2>&1 ||
    { cat "$LOG_DIR/amtool-check-config.log" >&2; die "invalid Alertmanager config"; }
  if ! pid_alive alertmanager alertmanager; then
    # --cluster.listen-address= turns the gossip mesh off (it would bind 0.0.0.0:9094)
    setsid prometheus-alertmanager --config.file="$PROM_DIR/alertmanager.yml" \
      --storage.path="$PROM_DIR/am-data" --web.listen-address="127.0.0.1:$ALERTMANAGER_PORT" \
      --cluster.listen-address= </dev/null >"$LOG_DIR/alertmanager.log" 2>&1 &
    echo $! >"$RUN_DIR/alertmanager.pid"
    wait_for alertmanager 30 curl -sf "http://127.0.0.1:$ALERTMANAGER_PORT/-/ready" ||
      { tail -n 20 "$LOG_DIR/alertmanager.log" >&2; die "alertmanager did not come up"; }
    log "alertmanager up (pid $(pid_of alertmanager)) on 127.0.0.1:$ALERTMANAGER_PORT"
  fi
fi

if ! pid_alive prometheus prometheus; then
  setsid prometheus --config.file="$cfg" --storage.tsdb.path="$PROM_DIR/data" \
    --storage.tsdb.retention.time="$PROM_RETENTION" --web.listen-address="127.0.0.1:$PROM_PORT" \
    --web.enable-lifecycle --rules.alert.resend-delay="$PROM_ALERT_RESEND_DELAY" \
    </dev/null >"$LOG_DIR/prometheus.log" 2>&1 &
  echo $! >"$RUN_DIR/prometheus.pid"
  wait_for prometheus 60 curl -sf "http://127.0.0.1:$PROM_PORT/-/ready" ||
    { tail -n 20 "$LOG_DIR/prometheus.log" >&2; die "prometheus did not come up"; }
  log "prometheus up (pid $(pid_of prometheus)) on 127.0.0.1:$PROM_PORT"
else
  curl -sf -X POST "http://127.0.0.1:$PROM_PORT/-/reload" >/dev/null
  log "prometheus already running: configuration reloaded"
fi
log "prometheus-up done in $(elapsed "$t_all")s"
