#!/bin/sh
# Builds the JavaScript, Python and C example guests. The JavaScript and
# Python ones are built with `weft guest build` (their SDKs are
# guest-sdk/js and guest-sdk/python; the first build installs the pinned
# toolchain into weft's cache), which prints where the component is; the C
# one with its build script into c-guest/build/guest.wasm (skipped when up
# to date). examples/rust-guest is a workspace crate: cargo builds it.
# `weft` is $WEFT when set, else `cargo run -p weft`. Run examples/setup.sh
# first on a fresh machine.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${WEFT:-}" ]; then
    weft() { "$WEFT" "$@"; }
else
    weft() { cargo run --quiet --manifest-path "$here/../Cargo.toml" -p weft -- "$@"; }
fi
status=0
build() {
    name=$1
    shift
    rc=0
    out=$("$@") || rc=$?
    case $rc in
    0) echo "$name: ${out:-$here/$name/build/guest.wasm}" ;;
    77) echo "$name: skipped (toolchain missing, see above)"; status=1 ;;
    *) echo "$name: FAILED (exit $rc)"; status=1 ;;
    esac
}
build js-guest weft guest build "$here/js-guest"
build python-guest weft guest build "$here/python-guest"
build c-guest "$here/c-guest/build.sh"
exit $status
