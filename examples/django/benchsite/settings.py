"""Settings of the Django example: the `world` table through the harness's pgbouncer.

Everything deployment-specific comes from the environment the harness gives the app
(README, "Benchmark your own app"): PGHOST/PGPORT/PGUSER/PGPASSWORD/PGDATABASE point at
pgbouncer, APP_SECRET_KEY is generated per run. No secret lives in this repository.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.management.utils import get_random_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent

# Never DEBUG under load: DEBUG keeps every SQL query in memory and serves tracebacks.
DEBUG = False
# Generated per run by the harness (APP_SECRET_KEY). Without it (a manual run) a random key
# per process: nothing in this example signs data that must survive a restart.
SECRET_KEY = os.environ.get("APP_SECRET_KEY") or get_random_secret_key()
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = ["world"]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
]
ROOT_URLCONF = "benchsite.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,  # world/templates/; autoescaping is on by default
        "OPTIONS": {},
    }
]
WSGI_APPLICATION = "benchsite.wsgi.application"
ASGI_APPLICATION = "benchsite.asgi.application"

# Which entry point imported these settings (benchsite/asgi.py sets it before Django starts).
INTERFACE = os.environ.get("BENCHSITE_INTERFACE", "wsgi")

# CONN_MAX_AGE, chosen against pgbouncer's pool_mode = transaction (db/pgbouncer.ini):
# - Under WSGI, 60 s (persistent). A client connection to pgbouncer holds no PostgreSQL
#   backend between transactions, so keeping it open costs pgbouncer a socket, not a server
#   connection; closing it after every request (Django's default, 0) makes every request pay
#   a TCP connect plus pgbouncer's SCRAM login (this project measured a connection per
#   request 13.8x slower than a pool: the keepalive-timewait study). Persistent connections
#   are only safe in transaction mode because nothing below relies on session state:
#   DISABLE_SERVER_SIDE_CURSORS (a server-side cursor outlives the transaction it was
#   declared in, which transaction pooling hands to another client; Django's docs,
#   "Transaction pooling and server-side cursors") and prepare_threshold None (psycopg 3
#   prepares a statement after 5 runs by default; a prepared statement lives in one backend,
#   which pgbouncer does not keep for us between transactions). CONN_HEALTH_CHECKS re-checks
#   a reused connection once per request, so one dropped by pgbouncer is replaced.
# - Under ASGI, 0. Django's async docs ask to disable persistent connections in async mode:
#   sync ORM code runs in per-request executor threads there, and connections kept by
#   threads that are not reused pile up (until pgbouncer's client limit). The pooling is
#   pgbouncer's.
CONN_MAX_AGE = 0 if INTERFACE == "asgi" else 60

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("PGDATABASE", "bench"),
        "USER": os.environ.get("PGUSER", "bench"),
        "PASSWORD": os.environ.get("PGPASSWORD", ""),
        "HOST": os.environ.get("PGHOST", "127.0.0.1"),
        "PORT": os.environ.get("PGPORT", "6432"),
        "CONN_MAX_AGE": CONN_MAX_AGE,
        "CONN_HEALTH_CHECKS": CONN_MAX_AGE != 0,
        "DISABLE_SERVER_SIDE_CURSORS": True,
        # Passed to psycopg.connect(): no server-side prepared statements (see above).
        "OPTIONS": {"prepare_threshold": None},
    }
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
# Errors go to stderr (the server's log, which the harness keeps), never to the client.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"django": {"handlers": ["stderr"], "level": "WARNING"}},
}
