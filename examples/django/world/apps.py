from django.apps import AppConfig


class WorldConfig(AppConfig):
    name = "world"
    default_auto_field = "django.db.models.BigAutoField"
