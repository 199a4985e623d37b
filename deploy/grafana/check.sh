#!/usr/bin/env bash
# Type-check the dashboards (*.json here, or the files given) against Grafana's published
# TypeScript types (@grafana/schema, pinned in package.json): each JSON is wrapped as
# `export const dashboard = (<json>) satisfies Dashboard;` and compiled with `tsc --strict`.
# No Grafana server is needed (none is installable on the CI machines).
#   bash deploy/grafana/check.sh [dash.json ...]     (runs `npm ci` first when node_modules is missing)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
if [[ ! -x node_modules/.bin/tsc || ! -d node_modules/@grafana/schema ]]; then
  npm ci --no-audit --no-fund --silent
fi
files=("$@")
((${#files[@]})) || files=("$here"/*.json)
rm -rf .check && mkdir .check
for f in "${files[@]}"; do
  case $(basename "$f") in package.json | package-lock.json) continue ;; esac
  b=$(basename "$f" .json | tr -c 'A-Za-z0-9_\n' '_')
  {
    echo "import type { Dashboard } from '@grafana/schema';"
    echo 'export const dashboard = ('
    cat "$f"
    echo ') satisfies Dashboard;'
  } >".check/$b.ts"
done
./node_modules/.bin/tsc --noEmit --strict --skipLibCheck --moduleResolution bundler \
  --module esnext --target es2020 .check/*.ts
n=$(find .check -name '*.ts' | wc -l)
rm -rf .check
echo "grafana check: OK ($n dashboards against @grafana/schema $(node -p 'require("./node_modules/@grafana/schema/package.json").version'))"
