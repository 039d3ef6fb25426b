#!/usr/bin/env bash
# resume: producers and consumers go on, on the cluster switch-clients chose.
set -euo pipefail
. "$(dirname "$0")/_units.sh"
# shellcheck disable=SC2086
$SYSTEMCTL start $PRODUCER_UNITS $CONSUMER_UNITS
