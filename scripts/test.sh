#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set-up, then every test of
# every crate (unit, integration, end-to-end through the real `weft` binary,
# guests compiled from source), then the doc tests.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/scripts/setup.sh"
# Restate (from npm), for the test of `scripts/beside-restate.sh`.
"$root/tests/restate/setup.sh"
# Lint first: formatting, clippy -D warnings, rustdoc, the docs' checks.
"$root/scripts/lint.sh"
# The JS, Python and C example guests are built by their own tests; building
# them here first keeps the tests' time honest and the output readable.
"$root/examples/build-all.sh"
# A throw-away PostgreSQL cluster (initdb + pg_ctl in a temporary folder, a
# non-root user, a free port) for the PostgreSQL store's tests, removed at
# the end; the tests make a fresh database each.
eval "$("$root/tests/postgres/start.sh")"
trap '"$root/tests/postgres/stop.sh" "$WEFT_TEST_PG_DIR"' EXIT
# Doc tests first (nextest does not run them), so the suite closes on
# nextest's summary line.
cargo test --workspace --doc --quiet
cargo nextest run --workspace --no-fail-fast "$@"
