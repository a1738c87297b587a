#!/bin/sh
# PostgreSQL for the compose path: a cluster made once per volume as the native path makes it
# (bench/stack/components.py: initdb with scram-sha-256 over TCP, db/postgresql.conf, the `bench` role
# and database, the seed rows), then the postmaster in the foreground as `postgres`.
set -eu
: "${DB_PASSWORD:?DB_PASSWORD must be set}"
bin=$(ls -d /usr/lib/postgresql/*/bin | tail -n 1)
data=/var/lib/postgresql/bench
mkdir -p /var/run/postgresql "$data"
chown postgres:postgres /var/run/postgresql "$data"
as_pg() { su postgres -s /bin/sh -c "$*"; }
if [ ! -s "$data/PG_VERSION" ]; then
  as_pg "$bin/initdb -D $data -U postgres --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --no-locale" >/dev/null
  cat /opt/bench/db/postgresql.conf >> "$data/postgresql.conf"
  # pgbouncer comes over the compose network, not a unix socket.
  echo "listen_addresses = '*'" >> "$data/postgresql.conf"
  echo "host all all 0.0.0.0/0 scram-sha-256" >> "$data/pg_hba.conf"
  as_pg "$bin/pg_ctl -D $data -w -o \"-c listen_addresses=''\" start" >/dev/null
  as_pg "psql -X -q -v ON_ERROR_STOP=1 -d postgres -c 'CREATE ROLE bench LOGIN'"
  as_pg "psql -X -q -v ON_ERROR_STOP=1 -d postgres -c 'CREATE DATABASE bench OWNER bench'"
  as_pg "psql -X -q -v ON_ERROR_STOP=1 -U bench -d bench -f /opt/bench/seed.sql" >/dev/null
  as_pg "$bin/pg_ctl -D $data -w stop" >/dev/null
fi
# The password is the one of this `up` (DB_PASSWORD), set on every start, never in a file.
as_pg "$bin/pg_ctl -D $data -w -o \"-c listen_addresses=''\" start" >/dev/null
printf "ALTER ROLE bench PASSWORD '%s'\n" "$DB_PASSWORD" | as_pg "psql -X -q -v ON_ERROR_STOP=1 -d postgres"
as_pg "$bin/pg_ctl -D $data -w stop" >/dev/null
exec su postgres -s /bin/sh -c "exec $bin/postgres -D $data"
