#!/bin/sh
# What `coordinator launch --observe` needs from the system: Prometheus and the Redis and
# PostgreSQL exporters (Debian packages of the same names). Nothing else uses them, so neither
# `make setup` nor `make demo` installs them. As root with apt-get they are installed (Debian
# then starts each as a system service where a service manager runs); otherwise the line says
# what to install, and the exit code is 1.
set -eu
missing=""
for bin in prometheus prometheus-redis-exporter prometheus-postgres-exporter; do
  command -v "$bin" >/dev/null 2>&1 || missing="$missing $bin"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing with apt-get:$missing" >&2
  apt-get update -qq
  # shellcheck disable=SC2086  # one word per package
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
  exit 0
fi
echo "--observe needs:$missing. On Debian: sudo apt-get install$missing" >&2
exit 1
