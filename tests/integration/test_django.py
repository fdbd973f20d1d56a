"""chronoq.contrib.django on a real Django project (tests/django_project) on PostgreSQL.

The project gets a fresh database for the test session. Enqueue joins Django's transaction:
a job exists if and only if the block that enqueued it commits. Handlers read and write the
ORM in a worker, from a thread (sync) and from the loop (async). `manage.py chronoq` runs the
CLI's commands with the project's App.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import _admin_dsn, _missing_service, _with_database

pytestmark = pytest.mark.postgres

PROJECT = Path(__file__).resolve().parent.parent / "django_project"
CONNECTION_NAME = "chronoq-django-tests"


class Boom(Exception):
    pass


def _create_database() -> tuple[str, str]:
    admin = _admin_dsn()
    name = f"chronoq_django_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    except psycopg.OperationalError as exc:
        _missing_service(f"PostgreSQL not reachable at CHRONOQ_TEST_PG_DSN: {exc}")
    return admin, name


@pytest.fixture(scope="module")
def project() -> Iterator[dict[str, str]]:
    """Django set up on the project, its models and chronoq's tables migrated; the environment
    a `manage.py` subprocess needs."""
    admin, name = _create_database()
    env = {
        "CHRONOQ_DJANGO_TEST_DB": _with_database(admin, name),
        "DJANGO_SETTINGS_MODULE": "project.settings",
    }
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    sys.path.insert(0, str(PROJECT))
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    call_command("chronoq", "migrate")
    try:
        yield env
    finally:
        from django.db import connections

        from chronoq.contrib.django import get_app

        get_app().close()
        connections.close_all()
        sys.path.remove(str(PROJECT))
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    psycopg.sql.Identifier(name)
                )
            )


@pytest.fixture
def app(project: dict[str, str]) -> Any:
    from django.db import connection

    from chronoq.contrib.django import get_app

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE chronoq_jobs, chronoq_processes, notes_note RESTART IDENTITY")
    return get_app()


@contextmanager
def rolled_back() -> Iterator[None]:
    """An atomic block that ends by raising, so Django rolls it back (or back to its
    savepoint, nested in another)."""
    from django.db import transaction

    with contextlib.suppress(Boom), transaction.atomic():
        yield
        raise Boom


def _job_ids(app: Any) -> set[int]:
    """The jobs that exist, seen from chronoq's own connections (another transaction)."""
    from chronoq.storage.base import JobListParams

    return {job.id for job in app.store.job_list(JobListParams(limit=100))}


def test_the_app_uses_djangos_database_and_the_projects_tasks(app: Any) -> None:
    from django.db import connection

    assert set(app.tasks) == {"mark_note", "add_note", "note"}
    assert connection.settings_dict["NAME"] in app.config.dsn
    assert "application_name=chronoq" in app.config.dsn


def test_a_job_enqueued_in_a_committed_block_exists(app: Any) -> None:
    from django.db import transaction
    from notes.tasks import note

    with transaction.atomic():
        enqueued = note.defer(text="kept")
        assert enqueued.id not in _job_ids(app)  # not committed yet: invisible to others
    assert enqueued.id in _job_ids(app)


def test_a_job_enqueued_in_a_rolled_back_block_does_not_exist(app: Any) -> None:
    from notes.tasks import note

    with rolled_back():
        enqueued = note.defer(text="lost")
    assert enqueued.created
    assert _job_ids(app) == set()


def test_a_rolled_back_savepoint_takes_its_jobs_and_keeps_the_outer_ones(app: Any) -> None:
    from django.db import transaction
    from notes.tasks import note

    with transaction.atomic():
        outer = note.defer(text="outer")
        with rolled_back():
            inner = app.enqueue("note", {"text": "inner"})
            many = app.enqueue_many([app_spec("a"), app_spec("b")])
        after = note.configure(key="after").defer(text="after")
    assert _job_ids(app) == {outer.id, after.id}
    assert inner.id not in _job_ids(app) and not {job.id for job in many} & _job_ids(app)


def app_spec(text: str) -> Any:
    from chronoq import JobSpec

    return JobSpec("note", {"text": text})


def test_outside_a_block_a_job_commits_at_once(app: Any) -> None:
    from notes.tasks import note

    enqueued = note.defer(text="autocommit")
    assert enqueued.id in _job_ids(app)


def test_an_async_enqueue_joins_the_transaction_of_the_thread_that_awaits_it(app: Any) -> None:
    from asgiref.sync import async_to_sync
    from django.db import transaction
    from notes.tasks import note

    # async_to_sync runs Django's thread-sensitive calls back on this thread: defer_async's
    # INSERT goes through this thread's connection, inside its atomic block.
    with rolled_back():
        async_to_sync(note.defer_async)(text="rolled back")
    assert _job_ids(app) == set()
    with transaction.atomic():
        kept = async_to_sync(note.defer_async)(text="committed")
        assert kept.id not in _job_ids(app)
    assert _job_ids(app) == {kept.id}

    async def from_a_loop() -> int:
        return (await note.defer_async(text="autocommit")).id

    assert asyncio.run(from_a_loop()) in _job_ids(app)


def test_handlers_use_the_orm_in_a_worker_and_close_their_connections(app: Any) -> None:
    from django.db import connection
    from notes.models import Note
    from notes.tasks import add_note, mark_note

    from chronoq.core.jobs import JobStatus
    from chronoq.testing import drain

    notes = [Note.objects.create(text=f"n{i}") for i in range(5)]
    jobs = [mark_note.defer(note_id=n.pk) for n in notes]
    added = add_note.defer(text="from the loop")
    stats = drain(app, concurrency=3)
    assert stats.done == 6
    assert {n.pk: n.seen_by_job for n in Note.objects.filter(seen_by_job__isnull=False)} == {
        n.pk: job.id for n, job in zip(notes, jobs, strict=True)
    }
    assert Note.objects.filter(text="from the loop").count() == 1
    assert app.get_job(added.id).status == JobStatus.DONE
    # Every connection the handlers opened, in pool threads and in Django's async thread, was
    # closed after its job (CONN_MAX_AGE 0): only this thread's is left. (chronoq's own
    # connections are named "chronoq".)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
            " AND datname = current_database()",
            [CONNECTION_NAME],
        )
        assert cursor.fetchone() == (1,)


def _manage(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "chronoq", *arguments],
        cwd=PROJECT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_manage_py_runs_a_burst_worker_with_the_projects_tasks(
    app: Any, project: dict[str, str]
) -> None:
    from notes.models import Note
    from notes.tasks import mark_note

    note = Note.objects.create(text="for the worker")
    job = mark_note.defer(note_id=note.pk)
    ran = _manage(project, "worker", "--burst", "--concurrency", "2")
    assert ran.returncode == 0, ran.stderr
    note.refresh_from_db()
    assert note.seen_by_job == job.id


def test_manage_py_chronoq_is_the_cli_with_the_projects_app(
    app: Any, project: dict[str, str]
) -> None:
    from notes.tasks import note

    note.defer(text="listed")
    listed = _manage(project, "--settings", "project.settings", "jobs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert '"task": "note"' in listed.stdout


def _run(*arguments: str) -> tuple[int, str, str]:
    from chronoq.contrib.django.management.commands.chronoq import run

    out, err = io.StringIO(), io.StringIO()
    code = run(list(arguments), prog="manage.py chronoq", stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_the_commands_take_the_clis_options_help_and_errors(app: Any) -> None:
    code, _, err = _run("worker", "--concurency", "2")
    assert code == 2 and "--concurency" in err and "Traceback" not in err
    code, out, _ = _run("worker", "--help")
    assert code == 0 and "usage: manage.py chronoq worker" in out
    assert "[--app MODULE:APP]" in out  # optional: the project gives the App
    code, out, _ = _run("migrate")
    assert code == 0 and "up to date" in out
    code, out, _ = _run("enqueue", "note", "--payload", '{"text": "from the command"}')
    assert code == 0 and int(out) in _job_ids(app)
    code, _, err = _run("enqueue", "note", "--payload", '{"txt": "typo"}')
    assert code == 2 and "txt" in err


def test_without_django_options_keeps_the_rest() -> None:
    from chronoq.contrib.django.management.commands.chronoq import without_django_options

    argv = ["--settings", "a.b", "worker", "--pythonpath=/x", "--queues", "q", "--burst"]
    assert without_django_options(argv) == ["worker", "--queues", "q", "--burst"]


def test_unknown_settings_keys_are_refused_with_a_suggestion(project: dict[str, str]) -> None:
    from django.core.exceptions import ImproperlyConfigured
    from django.test import override_settings

    from chronoq.contrib.django.settings import read_settings

    with override_settings(CHRONOQ={"QUEUE": ["a"]}), pytest.raises(ImproperlyConfigured) as err:
        read_settings()
    assert "did you mean 'QUEUES'" in str(err.value)
    with override_settings(CHRONOQ={"DATABASE": "other"}), pytest.raises(ImproperlyConfigured):
        read_settings()


def test_the_dsn_of_a_django_database_quotes_and_keeps_what_libpq_reads() -> None:
    from chronoq.contrib.django.settings import _url

    dsn = _url(
        {
            "NAME": "shop",
            "USER": "app",
            "PASSWORD": "p@ss/word",
            "HOST": "/var/run/postgresql",
            "PORT": 5433,
            "OPTIONS": {"sslmode": "require", "application_name": "site", "pool": True},
        }
    )
    assert dsn == (
        "postgresql://app:p%40ss%2Fword@:5433/shop"
        "?application_name=chronoq&host=%2Fvar%2Frun%2Fpostgresql&sslmode=require"
    )


def test_with_a_dsn_of_its_own_enqueue_commits_on_chronoqs_connections(
    project: dict[str, str], tmp_path: Path
) -> None:
    """Documented: with settings.CHRONOQ["DSN"], chronoq's tables are elsewhere, so enqueue
    cannot join Django's transaction; the job is stored whatever the block does."""
    from django.test import override_settings

    from chronoq.contrib.django.djangoapp import DjangoApp
    from chronoq.contrib.django.settings import read_settings

    dsn = f"sqlite:///{tmp_path / 'jobs.db'}"
    with override_settings(CHRONOQ={"DSN": dsn}):
        own = DjangoApp(read_settings())
    with own:
        own.task(name="elsewhere")(lambda: None)
        with rolled_back():
            kept = own.enqueue("elsewhere")
        assert own.config.dsn == dsn
        assert _job_ids(own) == {kept.id}


def test_call_command_runs_a_chronoq_command(app: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from django.core.management import CommandError, call_command
    from notes.tasks import note

    note.defer(text="called")
    call_command("chronoq", "jobs", "list", "--json")
    assert '"task": "note"' in capsys.readouterr().out
    with pytest.raises(CommandError, match="exited with code 1"):
        call_command("chronoq", "jobs", "show", "999999")
