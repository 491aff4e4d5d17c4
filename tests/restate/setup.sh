#!/usr/bin/env bash
# Install Restate (restate-server 1.7.12, its SDK 1.17.2; exact versions from
# package.json and package-lock.json) into tests/restate/node_modules, for
# `scripts/beside-restate.sh` and its test. Idempotent; silent on success.
#
# - Install scripts are not run (--ignore-scripts): restate-server's only one
#   is @scarf/scarf's, which reports the install.
# - Fast path: a stamp holds a hash of the lock and node's version; when it
#   matches and the server's binary is there, the script exits at once.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
stamp="$here/.setup-stamp"
bin="$here/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server"
export SCARF_ANALYTICS=false DO_NOT_TRACK=1

fingerprint() {
    { cat "$here/package.json" "$here/package-lock.json"; node --version 2>/dev/null || echo no-node; } |
        sha256sum | cut -d' ' -f1
}
if [ -f "$stamp" ] && [ -x "$bin" ] && [ "$(cat "$stamp")" = "$(fingerprint)" ]; then
    exit 0
fi
# node and npm come with the MCP peers' set-up; curl (the script's admin
# calls) and ip (loopback up in the script's network namespace) from apt.
"$here/../mcp-peers/setup.sh" --npm-only
if ! command -v curl >/dev/null || ! command -v ip >/dev/null; then
    apt-get update -q >/dev/null && apt-get install -y -q curl iproute2 >/dev/null
fi
if command -v flock >/dev/null 2>&1; then
    exec 9>"$here/.setup.lock"
    flock 9
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! (cd "$here" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >"$log" 2>&1; then
    echo "tests/restate/setup.sh: FAILED: npm ci" >&2
    cat "$log" >&2
    exit 1
fi
"$bin" --version >"$log" 2>&1 || { echo "tests/restate/setup.sh: restate-server does not run:" >&2; cat "$log" >&2; exit 1; }
fingerprint >"$stamp"
