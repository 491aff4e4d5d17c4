#!/bin/sh
# Installs what the example guests need to build, on Debian 12 as root.
# Idempotent and quiet on success; prints the failing step's output otherwise.
#
#   C:          clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32 (apt)
#   JavaScript: node + npm (apt if missing), then `npm ci` in js-guest
#               (@bytecodealliance/componentize-js, pinned in package-lock.json)
#   Python:     componentize-py from python-guest/requirements.txt; if it is
#               not already on PATH at that version, into python-guest/.venv
#               (Debian's python3 refuses a system-wide pip install).
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
# A venv is needed when componentize-py is not on PATH.
if ! command -v componentize-py >/dev/null 2>&1 && [ ! -x "$here/python-guest/.venv/bin/componentize-py" ] \
    && ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    missing="$missing python3-venv"
fi
if [ -n "$missing" ]; then
    export DEBIAN_FRONTEND=noninteractive
    quietly apt-get update -q
    # shellcheck disable=SC2086
    quietly apt-get install -y -q --no-install-recommends $missing
fi

# --- JavaScript: componentize-js ---
js="$here/js-guest"
if [ ! -f "$js/node_modules/.package-lock.json" ] || [ "$js/package-lock.json" -nt "$js/node_modules/.package-lock.json" ]; then
    # `npm ci` refuses a lock file that lacks other platforms' optional
    # binaries (the registry mirror used to write it did not have them);
    # `npm install --no-save` then installs the same locked versions.
    (cd "$js" && { npm ci --no-audit --no-fund >/dev/null 2>&1 || quietly npm install --no-save --no-audit --no-fund; })
fi

# --- Python: componentize-py ---
py="$here/python-guest"
pin=$(sed -n 's/^componentize-py==//p' "$py/requirements.txt")
if command -v componentize-py >/dev/null 2>&1 && [ "$(componentize-py --version | awk '{print $2}')" = "$pin" ]; then
    :
elif [ -x "$py/.venv/bin/componentize-py" ] && [ "$("$py/.venv/bin/componentize-py" --version | awk '{print $2}')" = "$pin" ]; then
    :
else
    [ -x "$py/.venv/bin/pip" ] || quietly python3 -m venv "$py/.venv"
    quietly "$py/.venv/bin/pip" install -q -r "$py/requirements.txt"
fi
