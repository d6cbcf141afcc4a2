#!/usr/bin/env bash
# Install what the browser tests (tests/features/test_browser.py, test_service_browser.py, test_service_a11y.py) need:
# Debian's Chromium (/usr/bin/chromium), and the playwright and axe-playwright-python Python packages in .venv
# (the CJK font the screenshots need comes with every set-up: scripts/install-font.sh). Idempotent and quiet:
# a second run only checks.
# Playwright drives the system Chromium (executable_path), so `playwright install`,
# which downloads a browser of its own, is never run.
# apt-get needs root (or password-less sudo); without either this says so, leaves Chromium
# out and the browser test skips with that reason.
set -euo pipefail
cd "$(dirname "$0")/.."

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

. scripts/apt.sh

missing=()
[ -x "$CHROMIUM" ] || missing+=(chromium)

if [ ${#missing[@]} -gt 0 ]; then
  if ! apt_can_install; then
    echo "install-browser: ${missing[*]} missing and installing needs root; the browser test will skip without chromium" >&2
  else
    apt_install "${missing[@]}"        # (apt's chatter is shown only when it fails)
  fi
fi

# axe-playwright-python: axe-core (its own copy, in the wheel) for the service pages' accessibility audit
# (tests/features/test_service_a11y.py). The versions: pyproject.toml's `browser` extra, pinned by constraints.txt.
if [ -x .venv/bin/python ] && ! .venv/bin/python -c "import playwright.sync_api, axe_playwright_python" 2>/dev/null; then
  .venv/bin/python -m pip install -q -c constraints.txt "playwright>=1.40" "axe-playwright-python>=0.1.8"
fi
