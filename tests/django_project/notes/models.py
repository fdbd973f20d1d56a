from django.db import models


class Note(models.Model):
    text = models.CharField(max_length=200)
    # Filled in by the job that handles the note, from the ORM, in a worker thread.
    seen_by_job = models.BigIntegerField(null=True)
