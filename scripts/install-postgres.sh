#!/usr/bin/env bash
# PostgreSQL's server, for the grading service's tests against a real PostgreSQL (they start a server of
# their own in a temporary folder: nothing listens on TCP, nothing is left running) and for deployments
# (autograder serve --database postgresql+psycopg://...). Debian's postgresql package, installed with the
# system's package manager where it allows it (apt-get as root or with password-less sudo); elsewhere this
# says so once. SKIP_POSTGRES=1 leaves it out. Idempotent.
set -euo pipefail

if [ -n "${SKIP_POSTGRES:-}" ] || ! command -v dpkg-query >/dev/null 2>&1; then
  exit 0
fi
if ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  exit 0
fi
. "$(dirname "$0")/apt.sh"
if ! apt_can_install; then
  echo "install-postgres: PostgreSQL's server is missing and installing it needs root: the service's" \
       "PostgreSQL tests will say so" >&2
  exit 0
fi
if ! apt_install postgresql; then
  echo "install-postgres: could not install postgresql" >&2
  exit 1
fi
