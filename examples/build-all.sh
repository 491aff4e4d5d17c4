#!/bin/sh
# Builds the JavaScript, Python and C example guests into
# examples/*/build/guest.wasm. Each build skips work when its output is newer
# than its sources. (examples/rust-guest is a workspace crate: cargo builds
# it.) Run examples/setup.sh first on a fresh machine.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
status=0
build() {
    name=$1
    shift
    rc=0
    "$@" || rc=$?
    case $rc in
    0) echo "$name: $here/$name/build/guest.wasm" ;;
    77) echo "$name: skipped (toolchain missing, see above)"; status=1 ;;
    *) echo "$name: FAILED (exit $rc)"; status=1 ;;
    esac
}
if command -v node >/dev/null 2>&1; then
    build js-guest node "$here/js-guest/build.mjs"
else
    echo "js-guest: node not found" >&2
    build js-guest sh -c 'exit 77'
fi
build python-guest "$here/python-guest/build.sh"
build c-guest "$here/c-guest/build.sh"
exit $status
