#!/usr/bin/env bash
# Install the Debian packages the dev stack and the tests need (run as root). Idempotent: packages
# already installed are skipped, and `apt-get update` runs only when something is missing.
# apt output goes to $LOG_DIR/apt-install.log; this script prints what it did.
#   --demo   only what `planner demo` needs: munge, Slurm and MariaDB (for sacct)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"

pkgs=(munge slurm-wlm slurmctld slurmd slurm-client slurm-wlm-basic-plugins slurmdbd
  slurm-wlm-mysql-plugin mariadb-server mariadb-client curl jq
  prometheus prometheus-alertmanager  # Prometheus 2.42 + promtool, Alertmanager 0.25 (deploy tests)
  postgresql postgresql-client  # PostgreSQL 15: the HA store (postgres-up.sh, store tests)
  chromium  # headless browser: the capacity review's HTML report test (tests/capacity)
  # The image test (tests/deploy/test_image_build.py): buildah 1.28 builds and runs
  # deploy/Dockerfile with chroot isolation (no OCI runtime needed); debootstrap makes its
  # Debian bookworm base, checking the mirror's signatures with the archive keyring.
  buildah debootstrap debian-archive-keyring)
if [[ ${1:-} == --demo ]]; then
  pkgs=(munge slurm-wlm slurmctld slurmd slurm-client slurm-wlm-basic-plugins slurmdbd
    slurm-wlm-mysql-plugin mariadb-server mariadb-client)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#pkgs[@]} packages already installed, nothing to do"
  exit 0
fi

((EUID == 0)) || die "missing packages (${missing[*]}) and not root: cannot apt-get install"
t=$(now_s)
apt_log=$LOG_DIR/apt-install.log
echo "install-deps: missing ${missing[*]}; apt-get update + install (log: $apt_log)"
{
  apt-get update -q
  # Postinst scripts may try to start services; the stack scripts start their own daemons.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
} >"$apt_log" 2>&1 || { tail -n 20 "$apt_log" >&2; die "apt-get failed, see $apt_log"; }
echo "install-deps: installed ${missing[*]} in $(elapsed "$t")s"
