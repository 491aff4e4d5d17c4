#!/usr/bin/env bash
# Stops and removes a cluster start.sh made: stop.sh DIR (default
# $WEFT_TEST_PG_DIR).
set -eu
dir=${1:-${WEFT_TEST_PG_DIR:-}}
[ -n "$dir" ] && [ -d "$dir/data" ] || exit 0
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as=()
[ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
"${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
rm -rf "$dir"
