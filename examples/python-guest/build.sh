#!/bin/sh
# Builds src/app.py into build/guest.wasm, a component of the `step` world, with
# componentize-py (pinned in requirements.txt; examples/setup.sh installs it).
# Also writes the generated bindings to build/bindings for editors and type
# checkers. Exits 77 when componentize-py is missing.
set -eu
cd "$(dirname "$0")"
wit=../../wit
out=build/guest.wasm

if [ -n "${COMPONENTIZE_PY:-}" ]; then
    cpy=$COMPONENTIZE_PY
elif [ -x .venv/bin/componentize-py ]; then
    cpy=.venv/bin/componentize-py
elif command -v componentize-py >/dev/null 2>&1; then
    cpy=componentize-py
else
    echo "python-guest: componentize-py not found (run examples/setup.sh or pip install -r examples/python-guest/requirements.txt)" >&2
    exit 77
fi

# Up to date: nothing to do.
if [ -f "$out" ] && [ "$out" -nt src/app.py ] && [ "$out" -nt build.sh ] \
    && [ "$out" -nt requirements.txt ] && [ "$out" -nt "$wit/step.wit" ]; then
    exit 0
fi

want=$(sed -n 's/^componentize-py==//p' requirements.txt)
have=$("$cpy" --version 2>/dev/null | awk '{print $2}')
if [ "$have" != "$want" ]; then
    echo "python-guest: warning: componentize-py $have, tested with $want" >&2
fi

mkdir -p build
rm -rf build/bindings
"$cpy" -d "$wit" -w step bindings build/bindings >/dev/null
"$cpy" -d "$wit" -w step componentize app -p src -o "$out.tmp" >/dev/null
mv "$out.tmp" "$out"
