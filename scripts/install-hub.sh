#!/usr/bin/env bash
# What tests/service/test_hub.py needs besides JupyterHub itself (a dependency in pyproject.toml, installed
# into .venv by scripts/setup.sh): JupyterHub's proxy, configurable-http-proxy, from npm into .hub/ (git
# ignores it; the test runs .hub/node_modules/.bin/configurable-http-proxy). It needs Node.js and npm: where
# they are missing they come from Debian (apt-get as root or with password-less sudo); elsewhere this says
# so and the Hub tests fail saying to run scripts/setup.sh. A deployment installs the proxy as JupyterHub's
# documentation says (npm install -g configurable-http-proxy). Idempotent and quiet: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

CHP_VERSION=${CHP_VERSION:-5}
PROXY=.hub/node_modules/.bin/configurable-http-proxy

if [ -x "$PROXY" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  . scripts/apt.sh
  if ! apt_can_install; then
    echo "install-hub: npm (Node.js) is missing and installing it needs root: the JupyterHub tests will fail" >&2
    exit 0
  fi
  if ! apt_install nodejs npm; then
    echo "install-hub: could not install nodejs and npm" >&2
    exit 1
  fi
fi
log=$(mktemp)
if ! npm install --prefix .hub --no-audit --no-fund --no-update-notifier --loglevel=error \
     "configurable-http-proxy@$CHP_VERSION" >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  echo "install-hub: could not install configurable-http-proxy from npm" >&2
  exit 1
fi
rm -f "$log"
