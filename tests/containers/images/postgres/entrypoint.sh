#!/bin/sh
# The official postgres image's entrypoint, as far as the compose file uses it: initdb a new data
# directory with POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB, run /docker-entrypoint-initdb.d/*
# on a server that listens on its socket only, then exec postgres with the given `-c` options.
set -eu
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
user=${POSTGRES_USER:-postgres} db=${POSTGRES_DB:-${POSTGRES_USER:-postgres}}
if [ "$(id -u)" = 0 ]; then  # fix the (volume) ownership, then run as postgres
    mkdir -p "$PGDATA" /var/run/postgresql
    chown -R postgres:postgres "$PGDATA" /var/run/postgresql && chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups sh "$0" "$@"
fi
[ "${1:-}" = postgres ] && shift
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp) && printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" -E UTF8 --auth-local=trust \
        --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile" && echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -w -o "-c listen_addresses='' $*" start >/dev/null
    [ "$db" = postgres ] || psql -q -v ON_ERROR_STOP=1 -U "$user" -d postgres -c "CREATE DATABASE \"$db\""
    for f in /docker-entrypoint-initdb.d/*; do
        case "$f" in
            *.sql) psql -q -v ON_ERROR_STOP=1 -U "$user" -d "$db" -f "$f" ;;
            *.sh) . "$f" ;;
        esac
    done
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
