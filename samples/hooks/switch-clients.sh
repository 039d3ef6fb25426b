#!/usr/bin/env bash
# switch_clients: point the clients at the cluster they should use now (CUTOVER_ACTIVE), while
# they are stopped. Written atomically: a crash leaves the old file or the new one, never half.
set -euo pipefail
. "$(dirname "$0")/_units.sh"
case "${CUTOVER_ACTIVE:?}" in
  old) servers=${CUTOVER_OLD_BOOTSTRAP:?} ;;
  new) servers=${CUTOVER_NEW_BOOTSTRAP:?} ;;
  *) echo "switch-clients: unknown CUTOVER_ACTIVE '$CUTOVER_ACTIVE'" >&2; exit 2 ;;
esac
mkdir -p "$(dirname "$CLIENT_ENV_FILE")"
tmp="$CLIENT_ENV_FILE.tmp.$$"
printf 'KAFKA_BOOTSTRAP_SERVERS=%s\n' "$servers" > "$tmp"
sync "$tmp" 2>/dev/null || true
mv -f "$tmp" "$CLIENT_ENV_FILE"
