#!/usr/bin/env bash
# stop_consumers: stop the selected groups' consumers, so their groups empty and their offsets
# can be moved exactly.
set -euo pipefail
. "$(dirname "$0")/_units.sh"
# shellcheck disable=SC2086
$SYSTEMCTL stop $CONSUMER_UNITS
