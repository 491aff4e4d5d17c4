#!/bin/sh
# Installs what the example guests need to build, on Debian 12 as root.
# Idempotent and quiet on success; prints the failing step's output otherwise.
#
#   C:          clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32 (apt)
#   JavaScript: node + npm (apt if missing), then `npm ci` in guest-sdk/js
#               (zod, pinned in package-lock.json)
#   Python:     python3 with venv (apt if missing)
# The build toolchains themselves (esbuild + componentize-js, pinned in
# guest-sdk/js/toolchain; componentize-py, pinned in
# guest-sdk/python/toolchain.txt) are installed by the first
# `weft guest build` into weft's cache.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

quietly() {
    if ! "$@" >"$log" 2>&1; then
        echo "setup.sh: failed: $*" >&2
        cat "$log" >&2
        exit 1
    fi
}

# --- apt packages ---
want="clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32"
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || want="$want nodejs npm"
command -v python3 >/dev/null 2>&1 || want="$want python3"
missing=""
for pkg in $want; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
done
# `weft guest build` makes a virtual environment for componentize-py.
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    missing="$missing python3-venv"
fi
if [ -n "$missing" ]; then
    export DEBIAN_FRONTEND=noninteractive
    quietly apt-get update -q
    # shellcheck disable=SC2086
    quietly apt-get install -y -q --no-install-recommends $missing
fi

# --- JavaScript: the SDK's dependencies (its native tests import zod) ---
js="$here/../guest-sdk/js"
if [ ! -f "$js/node_modules/.package-lock.json" ] || [ "$js/package-lock.json" -nt "$js/node_modules/.package-lock.json" ]; then
    (cd "$js" && quietly npm ci --no-audit --no-fund)
fi
