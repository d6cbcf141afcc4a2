# Sourced by the install-*.sh scripts: Debian packages through apt-get, as root or with password-less sudo.
#   apt_can_install        true when this user may install (root, or sudo without a password)
#   apt_install PKG...     update and install quietly; apt's chatter is shown only when it fails (status 1)
apt_get() {
  if [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get "$@"
  else
    sudo -n env DEBIAN_FRONTEND=noninteractive apt-get "$@"
  fi
}

apt_can_install() {
  [ "$(id -u)" -eq 0 ] || sudo -n true 2>/dev/null
}

apt_install() {
  local log
  log=$(mktemp)
  if ! { apt_get update -qq && apt_get install -y -qq --no-install-recommends "$@"; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}
