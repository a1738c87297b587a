# The rest of the stack for compose.yaml, FROM the same locally built base as the servers
# (bench/host/images.py; nothing is pulled): Debian's PostgreSQL 15, pgbouncer and nginx from
# deb.debian.org, the upstream stub (app_common/upstream.py, stdlib only) and the seed SQL the
# native path loads (bench/core/seed.py: the same rows). One image, one role per service (command).
#   docker build --network host -f compose/stack.Dockerfile --build-arg BASE=<base tag> \
#     -t pywebbench/stack:latest .
ARG BASE=pywebbench/base:missing
FROM ${BASE}
# No package may start a service at install time (as bench/setup.sh): each service is started
# by its own container's command.
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d \
    && apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
       postgresql-15 postgresql-client-15 pgbouncer nginx gettext-base curl >/dev/null \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
COPY db/ /opt/bench/db/
COPY bench/__init__.py /opt/bench/bench/
COPY bench/core/__init__.py bench/core/seed.py /opt/bench/bench/core/
RUN cd /opt/bench && python3 -c "from bench.core import seed; print(seed.seed_script(), end='')" \
    > /opt/bench/seed.sql
COPY app_common/__init__.py app_common/upstream.py /opt/bench/app_common/
COPY db/pgbouncer.ini /etc/pgbouncer/pgbouncer.ini.template
COPY proxy/site.conf.template /etc/nginx/bench-site.conf.template
COPY compose/nginx.conf /etc/nginx/nginx.conf
COPY compose/postgres.sh compose/pgbouncer.sh compose/nginx.sh /usr/local/bin/
ENV PYTHONPATH=/opt/bench PYTHONUNBUFFERED=1
