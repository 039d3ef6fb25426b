#!/usr/bin/env bash
# stop_new_writer (rollback): stop cutover's writer of CUTOVER_TABLE.
set -euo pipefail
. "$(dirname "$0")/_units.sh"
$SYSTEMCTL stop "cutover-shadow@${CUTOVER_TABLE:?}.service"
