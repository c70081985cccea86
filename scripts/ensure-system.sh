#!/bin/sh
# What the project needs from the system, checked before the virtualenv is made:
# - Python's venv support (Debian ships it apart: python3-venv);
# - PostgreSQL server binaries (initdb, postgres, pg_stat_statements) for the embedded stack.
# Nothing else: Prometheus and its exporters (only --observe uses them) are `make observe-deps`.
# On Debian as root missing pieces are installed with apt; otherwise we say what to install.
set -eu
. "$(dirname "$0")/apt-missing.sh"
python=${PYTHON:-python3}

missing=""
"$python" -c "import ensurepip, venv" 2>/dev/null || missing="$missing python3-venv"
found_pg=""
for dir in ${STAMPEDE_PG_BINDIR:-} /usr/lib/postgresql/*/bin; do
  if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ]; then
    found_pg=yes
  fi
done
[ -n "$found_pg" ] || missing="$missing postgresql"
# shellcheck disable=SC2086  # one word per package
install_missing "stampede-lab" $missing && exit 0
echo "(or point STAMPEDE_PG_BINDIR at the directory holding initdb and postgres)" >&2
exit 1
