#!/usr/bin/env bash
# Install what the web view's browser tests use: Debian's Chromium (apt,
# when missing), playwright-core and axe-core (npm, the exact versions of
# package-lock.json) into tests/web/node_modules. Idempotent; silent when
# everything is there.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -x /usr/bin/chromium ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q chromium >/dev/null
fi
if [ ! -f "$here/node_modules/playwright-core/package.json" ] || [ ! -f "$here/node_modules/axe-core/axe.min.js" ]; then
    (cd "$here" && npm ci --no-audit --no-fund --silent)
fi
