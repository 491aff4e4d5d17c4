#!/usr/bin/env bash
# Install what the PostgreSQL tests use: Debian's PostgreSQL server (apt,
# when missing). The tests start their own cluster (initdb + pg_ctl in a
# temporary folder, as a non-root user, on a free port): see start.sh.
# Idempotent; silent when everything is there.
set -eu
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q postgresql >/dev/null
fi
