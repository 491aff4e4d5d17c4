#!/usr/bin/env bash
# What the guest SDKs cost: the JavaScript and Python examples built on the
# SDKs (examples/js-guest, examples/python-guest) beside the hand-written
# guests they replaced (taken from git at $HAND, default df08df7), same
# inputs, in one run of the sandbox's invoke bench (per-invocation cost and
# load from the compiled-artifact cache), so A and B share the same minutes.
# Then the cold path, where users meet the load: `weft step run PLUGIN` and
# `weft step run FILE` as new processes, the four guests in turn
# ($COLD_ROUNDS rounds, default 20), the median wall time of each (process
# start, engine, load, one call).
#
#   [WEFT=path/to/weft] scripts/bench-guest-sdk.sh [criterion filter]
#
# WEFT_BENCH_MORE adds guests to the same run (`name=path=input;...`, as
# WEFT_BENCH_GUESTS), such as builds on an earlier SDK.
#
# Needs node/npm and python3 (scripts/setup.sh); the SDK builds install the
# pinned toolchains on first use, and the hand-written builds use the same ones.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
hand=${HAND:-df08df7}
work="$root/target/bench-guest-sdk"
# `weft` is $WEFT when set, else a release build.
if [ -n "${WEFT:-}" ]; then weft() { "$WEFT" "$@"; }; else weft() { cargo run --quiet --release -p weft -- "$@"; }; fi

# The SDK builds (these also install the toolchains when missing).
js_sdk=$(weft guest build examples/js-guest)
py_sdk=$(weft guest build examples/python-guest)

# The hand-written guests, from git, built with the same toolchains.
toolchains=${WEFT_TOOLCHAIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/weft/toolchains}
js_tools=$(ls -td "$toolchains"/js-*/ | head -1)
py_tools=$(ls -td "$toolchains"/python-*/ | head -1)
rm -rf "$work" && mkdir -p "$work"
git archive "$hand" examples/js-guest examples/python-guest wit | tar -x -C "$work"
ln -s "$js_tools/node_modules" "$work/examples/js-guest/node_modules"
(cd "$work/examples/js-guest" && node build.mjs)
COMPONENTIZE_PY="$py_tools/bin/componentize-py" sh "$work/examples/python-guest/build.sh"
js_hand="$work/examples/js-guest/build/guest.wasm"
py_hand="$work/examples/python-guest/build/guest.wasm"
ls -l "$js_sdk" "$js_hand" "$py_sdk" "$py_hand" >&2

export WEFT_BENCH_GUESTS="js-hand=$js_hand={\"text\": \"Hello World\"};python-hand=$py_hand={\"numbers\": [1, 2, 3]}${WEFT_BENCH_MORE:+;$WEFT_BENCH_MORE}"
cargo bench -p weft-sandbox --bench invoke -- "${@:-(invoke|load-cached)/(js|python)}"

# The cold path: each guest added as a plugin (stored and compiled once),
# then run by name from new processes, interleaved; and by its file (the
# digest remembered by the file's stamp after the first run: not read again).
if [ -n "${WEFT:-}" ]; then exe=$WEFT; else cargo build --quiet --release -p weft && exe="$root/target/release/weft"; fi
data="$work/cold"
for g in js-hand="$js_hand" js-sdk="$js_sdk" python-hand="$py_hand" python-sdk="$py_sdk"; do
  "$exe" plugin add --data-dir "$data" --name "${g%%=*}" "${g#*=}" >/dev/null
done
python3 - "$exe" "$data" "${COLD_ROUNDS:-20}" "$js_hand" "$js_sdk" "$py_hand" "$py_sdk" <<'PY'
import statistics, subprocess, sys, time
exe, data, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = dict(zip(["js-hand", "js-sdk", "python-hand", "python-sdk"], sys.argv[4:8]))
inputs = {"js": '{"text": "Hello World"}', "python": '{"numbers": [1, 2, 3]}'}
guests = [g + kind for g in files for kind in ("", "-file")]
ms = {g: [] for g in guests}
for r in range(rounds + 1):
    for g in guests if r % 2 else guests[::-1]:
        what = files[g[:-5]] if g.endswith("-file") else g
        t = time.perf_counter()
        subprocess.run([exe, "step", "run", "--data-dir", data, "--input", inputs[g.split("-")[0]], what],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r:  # the first round warms the page cache (and remembers the files' digests)
            ms[g].append((time.perf_counter() - t) * 1e3)
med = {g: statistics.median(v) for g, v in ms.items()}
for g in guests:
    hand = med[g.replace("-sdk", "-hand")]
    print(f"cold/{g}: `weft step run` median {med[g]:.1f} ms over {rounds} (quartiles "
          f"{' / '.join(f'{q:.1f}' for q in statistics.quantiles(ms[g]))}), {100 * (med[g] / hand - 1):+.0f}% over hand-written")
PY
