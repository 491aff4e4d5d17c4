#!/bin/sh
# Builds guest.c into build/guest.wasm, a WASI preview 1 command module.
# Needs Debian's clang-19, lld-19, wasi-libc and libclang-rt-19-dev-wasm32
# (examples/setup.sh installs them). Exits 77 when the toolchain is missing.
set -eu
cd "$(dirname "$0")"
CC=${CC:-clang-19}
SYSROOT=${WASI_SYSROOT:-/usr}
out=build/guest.wasm

if ! command -v "$CC" >/dev/null 2>&1; then
    echo "c-guest: $CC not found (apt-get install clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32)" >&2
    exit 77
fi
if [ ! -f "$SYSROOT/lib/wasm32-wasi/libc.a" ]; then
    echo "c-guest: wasi-libc not found under $SYSROOT (apt-get install wasi-libc)" >&2
    exit 77
fi

# Up to date: nothing to do.
if [ -f "$out" ] && [ "$out" -nt guest.c ] && [ "$out" -nt build.sh ]; then
    exit 0
fi

mkdir -p build
"$CC" --target=wasm32-wasi --sysroot="$SYSROOT" -std=c11 -O2 -Wall -Wextra -Werror \
    -Wl,--strip-all -o "$out.tmp.$$" guest.c
# Atomic, and a name of its own: builds in parallel processes do not race.
mv "$out.tmp.$$" "$out"
