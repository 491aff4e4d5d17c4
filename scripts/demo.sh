#!/usr/bin/env bash
# The demo: build weft (release) and run code steps — the bundled plugins and
# the example guests in four languages — in a throwaway data directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/scripts/setup.sh" --demo
cargo build --release --quiet -p weft
weft="$root/target/release/weft"
WEFT="$weft" "$root/examples/build-all.sh"
export WEFT_DATA_DIR=${WEFT_DATA_DIR:-$(mktemp -d)/weft}

say() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }

say "bundled plugins (no set-up)"
"$weft" plugin list

say "regex-extract: pull order numbers out of a message"
"$weft" step run regex-extract --input '{"text": "Orders 1042-A and 1043-B shipped", "pattern": "(?P<order>\\d+)-(?P<kind>[A-Z])"}'

say "text-template: render a message"
"$weft" step run text-template --input '{"template": "Hello {{user.name}}, {{count}} orders shipped.", "values": {"user": {"name": "Ada"}, "count": 2}}'

say "a Rust guest built with the SDK (examples/rust-guest)"
cargo build --quiet -p weft-example-rust-guest --target wasm32-wasip2 --profile guest
"$weft" step run target/wasm32-wasip2/guest/weft_example_rust_guest.wasm --input '{"text": "the cat and the hat and the bat", "top": 2}'

say "a JavaScript guest on the JS SDK (weft guest build: esbuild + componentize-js)"
"$weft" step run examples/js-guest/build/slugify.wasm --input '{"text": "Héllo, Wörld!"}'

say "a Python guest on the Python SDK (weft guest build: componentize-py)"
"$weft" step run examples/python-guest/build/stats.wasm --input '{"numbers": [2, 4, 4, 4, 5, 5, 7, 9]}'

say "a C WASI-command guest"
"$weft" step run examples/c-guest/build/guest.wasm --input '{"text": "stressed"}'

say "a guest given too little fuel is stopped with fuel_exhausted (exit code 1 is expected)"
"$weft" step run examples/c-guest/build/guest.wasm --input '{"text": "x"}' --fuel 1 || true

say "a workflow: parallel branches, a when, a retry, a failure handler and a for_each (examples/workflows/order-digest.json)"
"$weft" run examples/workflows/order-digest.json --input '{"csv": "id,customer,amount\nA-1,ada,12.5\nA-2,bob,7", "notes": "see ORD-100 and ORD-205", "highlight": true}'
"$weft" runs list

say "tool steps: two calls to an MCP server (server-everything) feed a code step (examples/tools)"
"$weft" --config examples/tools/weft.toml tools list everything | head -4
"$weft" --config examples/tools/weft.toml run examples/tools/sum-and-report.json --input '{"a": 20, "b": 22, "city": "Chicago"}'

say "done: data in $WEFT_DATA_DIR"
