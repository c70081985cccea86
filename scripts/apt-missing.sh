# Sourced by the scripts that check what the project needs from the system:
# install_missing "WHAT" PACKAGE... installs the packages with apt-get as root (and only those),
# else says in one line what to install and returns 1.
install_missing() {
  what=$1
  shift
  [ $# -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing with apt-get: $*" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
    return 0
  fi
  echo "$what: missing $*. On Debian: sudo apt-get install $*" >&2
  return 1
}
