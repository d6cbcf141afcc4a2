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
. "$(dirname "$0")/apt.sh"
if ! apt_can_install; then
  echo "install-font: $FONT_PACKAGE is missing and installing it needs root: plots will use English labels" >&2
  exit 0
fi
if ! apt_install "$FONT_PACKAGE"; then
  echo "install-font: could not install $FONT_PACKAGE: plots will use English labels" >&2
  exit 0
fi
# matplotlib caches the fonts it found: a new one is seen once the cache is rebuilt.
rm -rf "${MPLCONFIGDIR:-$HOME/.config/matplotlib}"/fontlist-*.json "$HOME/.cache/matplotlib"/fontlist-*.json 2>/dev/null || true
