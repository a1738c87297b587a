"""Routes of the Django example (examples/django/routes.toml lists what each must answer)."""

from django.urls import path
from world import views

urlpatterns = [
    path("json/", views.json_message),
    path("db/", views.one_row),
    path("rows/", views.rows_page),
    path("updates/", views.update_rows),
]
