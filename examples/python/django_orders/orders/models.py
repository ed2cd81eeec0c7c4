from clockflake.django import next_id
from django.db import models


class Order(models.Model):
    # A module-level function, so makemigrations can write it down; the generator behind it
    # is opened at the first insert, not when Django imports the models.
    id = models.BigIntegerField(primary_key=True, default=next_id, editable=False)
    item = models.CharField(max_length=100)

    class Meta:
        ordering = ["id"]  # noqa: RUF012 (Django reads it as is)  ids sort by creation time
