#!/usr/bin/env bash
# weft served beside Restate on this machine, in the same minutes: W9's
# chain-40 and trivial-3 over MCP against the same workloads as a Restate
# service, three rounds, each round's ratios printed (`weft bench w9
# --peer-restate`; docs/performance.md, "Beside a peer").
#
#   scripts/beside-restate.sh [weft bench options, e.g. --rounds 20 --json FILE]
#
# WEFT_BIN names the weft binary (default: target/release/weft, built when
# missing). Restate 1.7.12 is installed into tests/restate/ on first use.
# restate-server asks GitHub for its latest release at every start and no
# option turns that off, so everything here runs in a network namespace of
# its own that has only loopback (`unshare`); where none can be made, the
# script says so and runs on the host's network (the ports below must be
# free). After the bench, Restate's own journal is asked how many steps each
# completed invocation made: 40 or 3, or the script fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
here="$root/tests/restate"

if [[ -z "${WEFT_BESIDE_IN_NETNS:-}" ]]; then
    "$here/setup.sh"
    bin=${WEFT_BIN:-$root/target/release/weft}
    if [[ -z "${WEFT_BIN:-}" && ! -x "$bin" ]]; then
        (cd "$root" && cargo build --release --quiet -p weft)
    fi
    [[ -x "$bin" ]] || { echo "beside-restate: no weft binary at $bin (set WEFT_BIN)" >&2; exit 1; }
    export WEFT_BIN=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
    userns=()
    [[ "$(id -u)" == 0 ]] || userns=(--map-root-user)
    if command -v ip >/dev/null && unshare --net "${userns[@]}" true 2>/dev/null; then
        exec unshare --net "${userns[@]}" env WEFT_BESIDE_IN_NETNS=1 \
            bash -c 'ip link set lo up && exec bash "$0" "$@"' "$0" "$@"
    fi
    echo "beside-restate: NOTE: cannot make a network namespace here; Restate runs on the host's network" >&2
    export WEFT_BESIDE_IN_NETNS=host
fi

admin=http://127.0.0.1:19070
ingress=http://127.0.0.1:18080
service_port=19080
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
fail() {
    echo "beside-restate: $1" >&2
    for log in "$work"/*.log; do echo "--- $log" >&2; tail -20 "$log" >&2; done
    exit 1
}
# Polls until `$@` succeeds, for up to 15 s.
await() {
    for _ in $(seq 150); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    return 1
}

server="$here/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server"
"$server" -c "$here/restate.toml" --base-dir "$work/data" --no-logo >"$work/server.log" 2>&1 &
pids+=($!)
await curl -sf "$admin/health" || fail "restate-server did not come up"
(cd "$here" && exec node service.mjs "$service_port") >"$work/service.log" 2>&1 &
pids+=($!)
await bash -c "exec 3<>/dev/tcp/127.0.0.1/$service_port" || fail "the Restate service did not listen"
curl -sf -X POST "$admin/deployments" -H 'content-type: application/json' \
    -d "{\"uri\": \"http://127.0.0.1:$service_port\"}" >"$work/register.log" || fail "registering the service failed"
await curl -sf -X POST "$ingress/Chain/trivial3" -H 'content-type: application/json' -d null ||
    fail "Restate's ingress does not serve Chain/trivial3"

echo "# restate-server $("$server" --version | awk '{print $2}'), sdk 1.17.2, node $(node --version), network ${WEFT_BESIDE_IN_NETNS/1/loopback only}"
WEFT_BENCH_PEER_PIDS="${pids[0]},${pids[1]}" "$WEFT_BIN" bench w9 --peer-restate "$ingress" "$@"

# Every completed invocation journaled one `ctx.run` per step.
query="SELECT i.target_handler_name AS handler, count(DISTINCT i.id) AS calls, count(j.id) AS steps
       FROM sys_invocation i LEFT JOIN sys_journal j ON j.id = i.id AND j.entry_type = 'Command: Run'
       WHERE i.status = 'completed' GROUP BY i.target_handler_name"
rows=$(curl -sf -X POST "$admin/query" -H 'content-type: application/json' -H 'accept: application/json' \
    -d "$(node -e 'console.log(JSON.stringify({query: process.argv[1]}))' "$query")") || fail "Restate's SQL query failed"
node -e '
const rows = JSON.parse(process.argv[1]).rows;
let ok = rows.length === 2;
for (const r of rows) {
  const want = (r.handler === "chain40" ? 40 : 3) * r.calls;
  ok &&= r.steps === want;
  console.log(`# check restate Chain/${r.handler}: ${r.calls} completed, ${r.steps} steps journaled, want ${want}`);
}
process.exit(ok ? 0 : 1);
' "$rows" || fail "Restate did not journal every step"
