#!/usr/bin/env bash
# start_new_writer (promote): start cutover's writer of the canonical table on the new cluster,
# a unit running `cutover shadow --plan PLAN --table TABLE --canonical --follow`.
set -euo pipefail
. "$(dirname "$0")/_units.sh"
$SYSTEMCTL start "cutover-shadow@${CUTOVER_TABLE:?}.service"
