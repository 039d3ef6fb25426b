#!/usr/bin/env bash
# freeze_producers: stop every write to the cluster being left (CUTOVER_CLUSTER).
set -euo pipefail
. "$(dirname "$0")/_units.sh"
# shellcheck disable=SC2086
$SYSTEMCTL stop $PRODUCER_UNITS
