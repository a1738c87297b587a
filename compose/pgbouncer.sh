#!/bin/sh
# pgbouncer for the compose path: db/pgbouncer.ini with the container's addresses filled in.
# The password comes from the environment (DB_PASSWORD, made per `make compose-up`), never a file
# in the repository. PGBOUNCER_TEMPLATE and PGBOUNCER_RUN_DIR exist for tests/compose only.
set -eu
: "${DB_PASSWORD:?DB_PASSWORD must be set}"
template=${PGBOUNCER_TEMPLATE:-/etc/pgbouncer/pgbouncer.ini.template}
run=${PGBOUNCER_RUN_DIR:-/tmp}
case ${POOL_SIZE:-20} in
  *[!0-9]*) echo "POOL_SIZE=${POOL_SIZE}: must be a positive integer" >&2; exit 2 ;;
esac
umask 077
printf '"bench" "%s"\n' "$DB_PASSWORD" > "$run/userlist.txt"
# {pg_socket_dir}: the native path's unix socket dir becomes the postgres service's host name.
sed -e 's/{pg_socket_dir}/postgres/' -e 's/{pg_port}/5432/' -e 's/{port}/6432/' \
    -e "s#{auth_file}#$run/userlist.txt#" -e "s/{pool_size}/${POOL_SIZE:-20}/" \
    -e 's/^listen_addr = .*/listen_addr = 0.0.0.0/' \
    "$template" > "$run/pgbouncer.ini"
exec pgbouncer "$run/pgbouncer.ini"
