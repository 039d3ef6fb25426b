#!/usr/bin/env bash
# stop_reader: stop the reader CUTOVER_READER (a Spark Structured Streaming query) cleanly, so its
# last batch is committed and cutover can move its checkpoint. Here: one systemd unit per reader,
# named after it, whose ExecStop stops the query (query.stop()) and waits for it.
set -euo pipefail
. "$(dirname "$0")/_units.sh"
$SYSTEMCTL stop "spark-${CUTOVER_READER}.service"
