#!/bin/sh
# Runs once at initdb (postgres image: /docker-entrypoint-initdb.d): the native path's settings
# (db/postgresql.conf), then what differs in a container: pgbouncer comes over the network.
set -eu
cat >> "$PGDATA/postgresql.conf" <<CONF
include '/etc/postgresql/bench.conf'
listen_addresses = '*'
CONF
