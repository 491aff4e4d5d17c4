#!/usr/bin/env bash
# Makes the crates weft builds with a patch of its own: each is the
# crates.io release (sha256-checked), unpacked into vendor/NAME and patched
# with patches/NAME-VERSION.patch; Cargo.toml's [patch.crates-io] points
# there. The result is committed (vendor/NAME, with its `.weft-patched`
# stamp), so a fresh clone builds with cargo alone; run this after changing
# a patch or a version, and commit vendor/ with it. scripts/setup.sh runs
# it too: a no-op while the stamp matches.
#
# Today: wasmtime 50.0.1, whose pooled-memory reset decommits a guest's
# whole heap on every call on Linux 6.18 (why: the patch's header).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# name version sha256-of-the-.crate (as crates.io's index lists it)
crates=(
    "wasmtime 50.0.1 fdfacce893df54d319b29720e79edb001cd1b48faaf78fdb3b9c608eaeeea29f"
)

if ! command -v patch >/dev/null || ! command -v curl >/dev/null; then
    echo "setup: installing patch and curl (Debian packages)" >&2
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends patch curl ca-certificates >/dev/null
fi

for entry in "${crates[@]}"; do
    read -r name version sum <<<"$entry"
    patch="$root/patches/$name-$version.patch"
    dest="$root/vendor/$name"
    want="$name $version $sum $(sha256sum "$patch" | cut -d' ' -f1)"
    if [ -f "$dest/.weft-patched" ] && [ "$(cat "$dest/.weft-patched")" = "$want" ]; then
        continue
    fi
    echo "setup: unpacking $name $version from crates.io and applying $(basename "$patch")" >&2
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    # cargo's own download of the release, when it has one; else crates.io.
    cached=$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/"$name-$version.crate" 2>/dev/null | head -1 || true)
    if [ -n "$cached" ]; then
        cp "$cached" "$work/crate.tar.gz"
    else
        curl -sSfL --retry 3 "https://static.crates.io/crates/$name/$name-$version.crate" -o "$work/crate.tar.gz"
    fi
    if [ "$(sha256sum "$work/crate.tar.gz" | cut -d' ' -f1)" != "$sum" ]; then
        echo "setup: $name-$version.crate does not have the sha256 scripts/patched-crates.sh expects ($sum); not using it" >&2
        exit 1
    fi
    mkdir "$work/src"
    tar -xzf "$work/crate.tar.gz" -C "$work/src" --strip-components=1
    patch --quiet --forward --batch -p1 -d "$work/src" <"$patch"
    # Fresh mtimes: cargo rebuilds a path dependency by the files' times.
    find "$work/src" -type f -exec touch {} +
    echo "$want" >"$work/src/.weft-patched"
    rm -rf "$dest"
    mkdir -p "$root/vendor"
    mv "$work/src" "$dest"
    rm -rf "$work"
    trap - EXIT
done
