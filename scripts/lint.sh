#!/usr/bin/env bash
# The lints CI runs (scripts/test.sh calls this first): formatting, clippy
# with warnings as errors on every target, the API docs with warnings as
# errors, no import circles between a crate's files (scripts/check-circles.py),
# and the docs' honesty checks (scripts/check-docs.py). Fails on
# the first that does not pass, saying which.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
step() { printf 'lint: %s\n' "$*" >&2; }

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy --workspace --all-targets -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings
step "cargo doc (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
step "no import circles between a crate's files"
python3 "$root/scripts/check-circles.py" "$root"/host/src "$root"/host/*/src
step "docs: commands, links, and the .md files comments name"
cargo build --quiet -p weft
python3 "$root/scripts/check-docs.py" "$root/target/debug/weft"
