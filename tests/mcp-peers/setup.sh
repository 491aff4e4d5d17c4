#!/usr/bin/env bash
# Install the real MCP test peers into tests/mcp-peers/ (node_modules/ and .venv/).
#
#   tests/mcp-peers/setup.sh        # as root in CI; idempotent; silent on success
#   tests/mcp-peers/setup.sh --npm-only   # the npm servers only (what the demo calls)
#
# - node + npm and python3-venv come from apt, only when missing.
# - npm packages: exact versions from package.json / package-lock.json. `npm ci`
#   first; if it refuses the lock, `npm install --no-save` (same exact top-level
#   pins, lock left untouched). Why it can refuse: a lock written against this
#   registry can lack entries for other platforms' optional binaries that the
#   registry did not serve at lock time; `npm ci` then fails its sync check with
#   "Missing: <pkg>@ from lock file" (seen in examples/js-guest).
# - Python packages: requirements.txt into .venv/.
# - Fast path: a stamp file holds a hash of the inputs (package.json, lock,
#   requirements.txt, node and venv-python versions); when it matches and the
#   entry points exist, the script exits at once.
# On failure it prints the failing command and its output, and exits non-zero.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
stamp="$here/.setup-stamp"
export FASTMCP_CHECK_FOR_UPDATES=off

entry_points_present() {
    [ -f "$here/node_modules/@modelcontextprotocol/server-everything/dist/index.js" ] &&
        [ -f "$here/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js" ] &&
        [ -f "$here/node_modules/@modelcontextprotocol/inspector-cli/build/index.js" ] &&
        [ -x "$here/.venv/bin/python" ]
}

fingerprint() {
    {
        cat "$here/package.json" "$here/package-lock.json" "$here/requirements.txt"
        node --version 2>/dev/null || echo no-node
        "$here/.venv/bin/python" --version 2>/dev/null || echo no-venv
    } | sha256sum | cut -d' ' -f1
}

# --- fast path -----------------------------------------------------------------
if [ -f "$stamp" ] && entry_points_present && [ "$(cat "$stamp")" = "$(fingerprint)" ]; then
    exit 0
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Run a command quietly; on failure show what failed and its output, then exit.
quietly() {
    if ! "$@" >"$log" 2>&1; then
        echo "tests/mcp-peers/setup.sh: FAILED: $*" >&2
        cat "$log" >&2
        exit 1
    fi
}

# One setup at a time (parallel CI jobs, two shells).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$here/.setup.lock"
    flock 9
    # Someone else may have finished the work while we waited.
    if [ -f "$stamp" ] && entry_points_present && [ "$(cat "$stamp")" = "$(fingerprint)" ]; then
        exit 0
    fi
fi

apt_updated=""
apt_install() {
    if [ "$(id -u)" != 0 ]; then
        echo "tests/mcp-peers/setup.sh: need apt packages ($*) but not running as root" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    if [ -z "$apt_updated" ]; then
        quietly apt-get update
        apt_updated=1
    fi
    quietly apt-get install -y --no-install-recommends "$@"
}

# --- system packages, only when missing -------------------------------------------
missing=""
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
command -v python3 >/dev/null 2>&1 || missing="$missing python3"
if [ -n "$missing" ]; then
    # shellcheck disable=SC2086
    apt_install $missing
fi
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    apt_install python3-venv
fi

# --- npm packages -------------------------------------------------------------------
npm_flags="--no-audit --no-fund --loglevel=error"
if [ ! -f "$here/node_modules/.package-lock.json" ] ||
    ! cmp -s "$here/package-lock.json" "$here/node_modules/.weft-lock-installed" ||
    ! entry_points_present; then
    # shellcheck disable=SC2086
    if ! (cd "$here" && npm ci $npm_flags) >"$log" 2>&1; then
        # shellcheck disable=SC2086
        (cd "$here" && quietly npm install --no-save $npm_flags)
    fi
    cp "$here/package-lock.json" "$here/node_modules/.weft-lock-installed"
fi

# `--npm-only` (the demo: its tool steps call server-everything): no Python peers.
if [ "${1:-}" = "--npm-only" ]; then
    exit 0
fi

# --- Python venv ----------------------------------------------------------------------
venv="$here/.venv"
if ! "$venv/bin/python" -c 'import sys' >/dev/null 2>&1; then
    rm -rf "$venv"
    if ! python3 -m venv "$venv" >"$log" 2>&1; then
        # Debian's python3 without python3-venv fails here (no ensurepip).
        rm -rf "$venv"
        apt_install python3-venv
        quietly python3 -m venv "$venv"
    fi
fi
if ! cmp -s "$here/requirements.txt" "$venv/.weft-requirements-installed"; then
    quietly "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q -r "$here/requirements.txt"
    cp "$here/requirements.txt" "$venv/.weft-requirements-installed"
fi

# --- verify what the tests rely on -------------------------------------------------------
quietly "$venv/bin/python" - "$here" <<'PY'
import importlib.metadata as md, json, pathlib, re, sys
here = pathlib.Path(sys.argv[1])
want = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (here / "requirements.txt").read_text(), re.M))
for name in ("mcp", "fastmcp"):
    got = md.version(name)
    assert got == want[name], f"{name}: installed {got}, pinned {want[name]}"
pins = json.loads((here / "package.json").read_text())["dependencies"]
for name, pin in pins.items():
    got = json.loads((here / "node_modules" / name / "package.json").read_text())["version"]
    assert got == pin, f"{name}: installed {got}, pinned {pin}"
import mcp, fastmcp  # noqa: F401,E401  (imports work)
PY

fingerprint >"$stamp"
