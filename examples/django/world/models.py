"""The harness's `world` table (db/schema.sql): 10,000 rows, created and seeded by the harness,
so Django never migrates it (managed = False)."""

from django.db import models


class World(models.Model):
    id = models.IntegerField(primary_key=True)
    randomnumber = models.IntegerField()

    class Meta:
        managed = False
        db_table = "world"
