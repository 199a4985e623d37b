#!/usr/bin/env bash
# Stop only slurmctld of the dev stack (fault tests); slurmd, slurmdbd, munged keep running.
# Restart it with slurmctld-start.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"
stop_pid slurmctld slurmctld 20
