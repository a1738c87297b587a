#!/bin/sh
# nginx for the compose path: proxy/site.conf.template (the native path's site) with only its
# own ${NAME}s filled from the environment, then nginx in the foreground.
set -eu
vars='${LISTEN} ${APP_SERVER} ${UPSTREAM_CONNECTION} ${PROXY_CONNECT_TIMEOUT} ${PROXY_READ_TIMEOUT} ${ACCESS_LOG}'
mkdir -p /etc/nginx/conf.d
envsubst "$vars" < /etc/nginx/bench-site.conf.template > /etc/nginx/conf.d/default.conf
exec nginx -g 'daemon off;'
