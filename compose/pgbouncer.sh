#!/bin/sh
# pgbouncer for the compose path: db/pgbouncer.ini with the container's addresses filled in.
# The password comes from the environment (DB_PASSWORD, made per `make compose-up`), never a file
# in the repository.
set -eu
: "${DB_PASSWORD:?DB_PASSWORD must be set}"
umask 077
printf '"bench" "%s"\n' "$DB_PASSWORD" > /tmp/userlist.txt
sed -e 's/{pg_socket_dir}/postgres/' -e 's/{pg_port}/5432/' -e 's/{port}/6432/' \
    -e 's#{auth_file}#/tmp/userlist.txt#' -e "s/{pool_size}/${POOL_SIZE:-20}/" \
    -e 's/^listen_addr = .*/listen_addr = 0.0.0.0/' \
    /etc/pgbouncer/pgbouncer.ini.template > /tmp/pgbouncer.ini
exec pgbouncer /tmp/pgbouncer.ini
