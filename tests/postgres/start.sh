#!/usr/bin/env bash
# Starts a throw-away PostgreSQL cluster for the tests and prints the line
#   export WEFT_TEST_PG=postgres://weft@127.0.0.1:PORT/postgres
# (eval it). Debian's server binaries, a cluster made by initdb in a fresh
# temporary folder, owned and run by a non-root user (`postgres` when run
# as root: the server refuses root), on a free port of 127.0.0.1, trust
# authentication (loopback only). `stop.sh DIR` or the machine's end
# removes it. Tests also start one themselves when WEFT_TEST_PG is unset.
set -eu
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
[ -x "$bin/initdb" ] || { echo "start.sh: no PostgreSQL server (run tests/postgres/setup.sh)" >&2; exit 1; }
dir=$(mktemp -d /tmp/weft-pg.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
as=()
if [ "$(id -u)" = 0 ]; then
    chown postgres "$dir"
    as=(runuser -u postgres --)
fi
"${as[@]}" "$bin/initdb" -D "$dir/data" -U weft --auth=trust -E UTF8 --no-instructions >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
"${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -o \
    "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=400 -c fsync=off -c shared_buffers=128MB" \
    start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
echo "export WEFT_TEST_PG=postgres://weft@127.0.0.1:$port/postgres WEFT_TEST_PG_DIR=$dir"
