#!/usr/bin/env bash
# Install what tests/test_browser.py needs: Debian's Chromium (/usr/bin/chromium) and the playwright
# Python package in .venv (the CJK font its screenshot needs comes with every set-up:
# scripts/install-font.sh). Idempotent and quiet: a second run only checks.
# Playwright drives the system Chromium (executable_path), so `playwright install`,
# which downloads a browser of its own, is never run.
# apt-get needs root (or password-less sudo); without either this says so, leaves Chromium
# out and the browser test skips with that reason.
set -euo pipefail
cd "$(dirname "$0")/.."

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

apt_get() {
  if [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get "$@"
  else
    sudo -n env DEBIAN_FRONTEND=noninteractive apt-get "$@"
  fi
}

missing=()
[ -x "$CHROMIUM" ] || missing+=(chromium)

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] && ! sudo -n true 2>/dev/null; then
    echo "install-browser: ${missing[*]} missing and installing needs root; the browser test will skip without chromium" >&2
  else
    # apt's chatter only matters when it fails: show it then.
    log=$(mktemp)
    if ! { apt_get update -qq && apt_get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
      cat "$log" >&2
      rm -f "$log"
      exit 1
    fi
    rm -f "$log"
  fi
fi

if [ -x .venv/bin/python ] && ! .venv/bin/python -c "import playwright.sync_api" 2>/dev/null; then
  .venv/bin/python -m pip install -q "playwright>=1.40"
fi
