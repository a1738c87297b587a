# PYTHON=<name> (issue 33): the interpreter bench/python-build.sh built here, FROM the base built
# here (bench/host/images.py), for the server images on it (compose/Dockerfile FROM this one).
# Built by `make images SERVER=<id> PYTHON=<name>`; the context is a tar on stdin holding this
# file as Dockerfile and the build's prefix under python/ (without the standard library's test
# suite): the prefix lives under .bench/tools, which a worktree links to its main checkout,
# outside any directory context. The host and the base are both Debian bookworm: the binary
# built on the one runs on the other (the RUN below checks it does).
# The legacy builder (no BuildKit): ARG before FROM for the base.
ARG BASE=pywebbench/base:missing
FROM ${BASE}
# The prefix the interpreter was configured with (compiled into its sysconfig): the same path
# as on the host, so that it is the same installation.
ARG PREFIX
COPY python/ ${PREFIX}/
# It runs here, with the modules the servers need (ssl, zlib, ctypes) and the libpq that pure
# psycopg loads (the base's libpq5); it says its version and build.
RUN test -n "${PREFIX}" && "${PREFIX}/bin/python3" -c \
    "import ctypes.util, ssl, sys, sysconfig, zlib; assert ctypes.util.find_library('pq'), 'no libpq'; print(sys.version, 'free-threaded' if sysconfig.get_config_var('Py_GIL_DISABLED') else 'with the GIL')"
