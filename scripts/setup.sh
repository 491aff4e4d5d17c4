#!/usr/bin/env bash
# Installs everything weft's build, demo and tests need on a fresh Debian 12
# machine (run as root; idempotent; quiet when all is present):
#   - the Rust toolchain and wasm targets pinned in rust-toolchain.toml
#   - cargo-nextest (the test runner)
#   - the example guests' toolchains: clang-19 + wasi-libc (C), componentize-js
#     from npm (JavaScript), componentize-py from PyPI (Python) — examples/setup.sh
#   - the real MCP peers the tests use: server-everything, server-filesystem and
#     the Inspector from npm, the official Python `mcp` SDK and FastMCP from PyPI,
#     all pinned — tests/mcp-peers/setup.sh
#   - the web view's browser tests: Debian's chromium, playwright-core from npm
#     (pinned) — tests/web/setup.sh
#   - the PostgreSQL store's tests: Debian's postgresql server — tests/postgres/setup.sh
#   - the API's generated-client tests: openapi-python-client from PyPI and
#     @hey-api/openapi-ts + typescript from npm (pinned) — tests/openapi/setup.sh
#
# `scripts/setup.sh --demo` installs only what scripts/demo.sh needs: the
# toolchain, the example guests' toolchains and the npm MCP servers.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# rustup reads rust-toolchain.toml: this installs the pinned toolchain and
# its wasm32-wasip2 / wasm32-wasip1 targets when missing.
rustup toolchain install >/dev/null
rustup target list --installed | grep -q wasm32-wasip2 || rustup target add wasm32-wasip2 wasm32-wasip1

# The dependencies weft builds patched (vendor/, committed; made from
# patches/): checked, and made again if a patch changed.
"$root/scripts/patched-crates.sh"

"$root/examples/setup.sh"
if [ "${1:-}" = "--demo" ]; then
    # The demo's tool steps call server-everything (npm); the Python peers,
    # Chromium and PostgreSQL are the test suite's.
    "$root/tests/mcp-peers/setup.sh" --npm-only
    exit 0
fi
if ! cargo nextest --version >/dev/null 2>&1; then
    echo "setup: installing cargo-nextest (once)" >&2
    cargo install cargo-nextest --locked --quiet
fi
"$root/tests/mcp-peers/setup.sh"
"$root/tests/web/setup.sh"
"$root/tests/openapi/setup.sh"
"$root/tests/postgres/setup.sh"
