#!/usr/bin/env bash
# A font that draws Chinese, for the notebooks' plots, the class report's charts and the browser test's
# screenshot: Debian's fonts-wqy-microhei (WenQuanYi Micro Hei, 5 MB; fonts-noto-cjk would do as well at
# twenty times the size). Installed with the system's package manager where it allows it (apt-get as root
# or with password-less sudo); elsewhere this says so once, and the notebooks and the report say so too
# (their plots fall back to English labels, never to boxes). SKIP_FONT=1 leaves it out. Idempotent.
set -euo pipefail

FONT_PACKAGE=${FONT_PACKAGE:-fonts-wqy-microhei}

if [ -n "${SKIP_FONT:-}" ] || ! command -v dpkg-query >/dev/null 2>&1; then
  exit 0
fi
if dpkg-query -W -f='${Status}' "$FONT_PACKAGE" 2>/dev/null | grep -q "ok installed"; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] && ! sudo -n true 2>/dev/null; then
  echo "install-font: $FONT_PACKAGE is missing and installing it needs root: plots will use English labels" >&2
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
if ! { apt_get update -qq && apt_get install -y -qq --no-install-recommends "$FONT_PACKAGE"; } >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  echo "install-font: could not install $FONT_PACKAGE: plots will use English labels" >&2
  exit 0
fi
rm -f "$log"
# matplotlib caches the fonts it found: a new one is seen once the cache is rebuilt.
rm -rf "${MPLCONFIGDIR:-$HOME/.config/matplotlib}"/fontlist-*.json "$HOME/.cache/matplotlib"/fontlist-*.json 2>/dev/null || true
