#!/usr/bin/env bash
# stop_old_writer (promote): stop the old pipeline's writer of CUTOVER_TABLE. cutover then reads
# the table's stamped position and hands the table to the new writer exactly there.
set -euo pipefail
. "$(dirname "$0")/_units.sh"
$SYSTEMCTL stop "old-writer@${CUTOVER_TABLE:?}.service"
