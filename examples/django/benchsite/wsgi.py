"""WSGI entry point: APP=examples/django/benchsite/wsgi.py:application."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
os.environ["BENCHSITE_INTERFACE"] = "wsgi"

application = get_wsgi_application()
