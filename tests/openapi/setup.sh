#!/usr/bin/env bash
# Install the OpenAPI client generators the API test uses: openapi-python-client
# (pinned with its dependencies in requirements.txt) into tests/openapi/.venv, and
# @hey-api/openapi-ts with typescript (exact versions of ts/package-lock.json)
# into tests/openapi/ts/node_modules. Idempotent; silent when all is there.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -x "$here/ts/node_modules/.bin/openapi-ts" ] || [ ! -x "$here/ts/node_modules/.bin/tsc" ]; then
    (cd "$here/ts" && npm ci --no-audit --no-fund --silent)
fi
stamp="$here/.venv/.requirements-sha256"
want=$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)
if [ -x "$here/.venv/bin/openapi-python-client" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    exit 0
fi
python3 -m venv "$here/.venv"
if ! out=$("$here/.venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt" 2>&1); then
    echo "tests/openapi/setup.sh: pip install -r requirements.txt failed:" >&2
    echo "$out" >&2
    exit 1
fi
echo "$want" > "$stamp"
