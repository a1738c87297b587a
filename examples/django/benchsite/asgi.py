"""ASGI entry point: APP=examples/django/benchsite/asgi.py:application."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
# Read by settings.py: persistent DB connections are off under ASGI (see CONN_MAX_AGE there).
os.environ["BENCHSITE_INTERFACE"] = "asgi"

application = get_asgi_application()
