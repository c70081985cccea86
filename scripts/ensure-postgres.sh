#!/bin/sh
# Make sure PostgreSQL server binaries (initdb, postgres, pg_stat_statements) are present.
# On Debian as root they are installed with apt; otherwise we say exactly what to install.
set -eu
for dir in ${STAMPEDE_PG_BINDIR:-} /usr/lib/postgresql/*/bin; do
  if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ]; then
    exit 0
  fi
done
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "PostgreSQL server not found: installing it with apt-get (postgresql)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  exit 0
fi
echo "PostgreSQL server not found: install it (Debian: sudo apt-get install postgresql)," >&2
echo "or point STAMPEDE_PG_BINDIR at the directory holding initdb and postgres." >&2
exit 1
