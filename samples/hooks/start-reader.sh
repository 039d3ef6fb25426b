#!/usr/bin/env bash
# start_reader: start the reader CUTOVER_READER on the cluster CUTOVER_ACTIVE (old or new); its
# checkpoint already holds the positions translated to that cluster. The unit reads the bootstrap
# servers from CLIENT_ENV_FILE, which switch-clients.sh points at CUTOVER_ACTIVE.
set -euo pipefail
. "$(dirname "$0")/_units.sh"
$SYSTEMCTL start "spark-${CUTOVER_READER}.service"
