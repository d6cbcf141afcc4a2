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
if [ "$(id -u)" -ne 0 ] && ! sudo -n true 2>/dev/null; then
  echo "install-postgres: PostgreSQL's server is missing and installing it needs root: the service's" \
       "PostgreSQL tests will say so" >&2
  exit 0
fi
apt_get() {
  if [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get "$@"
  else
    sudo -n env DEBIAN_FRONTEND=noninteractive apt-get "$@"
  fi
}
log=$(mktemp)
if ! { apt_get update -qq && apt_get install -y -qq --no-install-recommends postgresql; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "install-postgres: could not install postgresql" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
