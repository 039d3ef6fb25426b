#!/usr/bin/env bash
# start_old_writer (rollback): restart the old pipeline's writer of CUTOVER_TABLE at the offsets
# cutover gives (CUTOVER_OFFSETS, {"topic": {"partition": offset}}), written where the writer
# reads its start positions from.
set -euo pipefail
. "$(dirname "$0")/_units.sh"
offsets_file=${OLD_WRITER_OFFSETS_DIR:-/etc/old-writer}/"${CUTOVER_TABLE:?}".offsets.json
mkdir -p "$(dirname "$offsets_file")"
printf '%s\n' "${CUTOVER_OFFSETS:?}" > "$offsets_file.tmp.$$"
mv -f "$offsets_file.tmp.$$" "$offsets_file"
$SYSTEMCTL start "old-writer@${CUTOVER_TABLE}.service"
