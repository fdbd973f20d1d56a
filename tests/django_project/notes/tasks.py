"""The project's tasks, found by autodiscovery (the `tasks` module of an installed app)."""

from django.db import transaction

from chronoq import JobContext
from chronoq.contrib.django import app

from .models import Note


@app.task(queue="notes")
def mark_note(ctx: JobContext, note_id: int) -> None:
    """Reads and writes the ORM in the worker's thread, and completes the job in the same
    transaction as its write."""
    with transaction.atomic():
        note = Note.objects.select_for_update().get(pk=note_id)
        note.seen_by_job = ctx.id
        note.save()
        ctx.complete_in(transaction.get_connection().connection)


@app.task(queue="notes")
async def add_note(text: str) -> None:
    """Writes through Django's async ORM, on the worker's event loop."""
    await Note.objects.acreate(text=text)


@app.task(queue="notes")
def note(text: str) -> None:
    """A job to enqueue in tests of transactions; no worker runs it."""
