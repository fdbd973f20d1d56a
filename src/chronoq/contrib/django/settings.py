"""`settings.CHRONOQ`: what the Django integration reads, checked once, naming the key at fault.

```python
CHRONOQ = {
    "DSN": None,               # None: Django's database below; else a chronoq DSN of its own
    "DATABASE": "default",     # the Django database alias whose transactions enqueue joins
    "TASK_MODULES": None,      # None: the `tasks` module of every installed app that has one
    "QUEUES": None,            # the queues `manage.py chronoq worker` serves without --queues
    "SETTINGS": {},            # other App settings: pool_size, default_queue, dispatch, ...
}
```
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from chronoq.core.enqueue import did_you_mean

KEYS = ("DSN", "DATABASE", "TASK_MODULES", "QUEUES", "SETTINGS")
# Connection options of Django's postgresql backend that are not libpq parameters, and the
# application name, which chronoq's own connections replace with theirs (so that
# pg_stat_activity tells them from the site's).
_NOT_COPIED = frozenset(
    {
        "isolation_level",
        "server_side_binding",
        "pool",
        "assume_role",
        "cursor_factory",
        "context",
        "application_name",
    }
)
APPLICATION_NAME = "chronoq"


@dataclass(frozen=True, slots=True)
class ChronoqSettings:
    """`settings.CHRONOQ`, checked. `dsn` None means: Django's database `database`."""

    dsn: str | None = None
    database: str = "default"
    task_modules: tuple[str, ...] | None = None
    queues: tuple[str, ...] | None = None
    app_settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def joins_django(self) -> bool:
        """Does chronoq live in Django's database, so enqueue joins its transactions?"""
        return self.dsn is None


def read_settings() -> ChronoqSettings:
    """`settings.CHRONOQ` (absent: every default), or ImproperlyConfigured naming the key."""
    raw = getattr(django_settings, "CHRONOQ", {})
    if not isinstance(raw, Mapping):
        raise ImproperlyConfigured(f"settings.CHRONOQ must be a dict, got {type(raw).__name__}")
    for key in raw:
        if key not in KEYS:
            raise ImproperlyConfigured(
                f"settings.CHRONOQ: unknown key {key!r}{did_you_mean(str(key), KEYS)}"
            )
    database = _text(raw, "DATABASE", "default")
    if database not in django_settings.DATABASES:
        raise ImproperlyConfigured(
            f"settings.CHRONOQ['DATABASE']: no database {database!r} in settings.DATABASES"
            f"{did_you_mean(database, django_settings.DATABASES)}"
        )
    app_settings = raw.get("SETTINGS", {})
    if not isinstance(app_settings, Mapping):
        raise ImproperlyConfigured("settings.CHRONOQ['SETTINGS'] must be a dict of App settings")
    if "dsn" in app_settings:
        raise ImproperlyConfigured("settings.CHRONOQ: give the DSN as 'DSN', not in 'SETTINGS'")
    dsn = raw.get("DSN")
    return ChronoqSettings(
        dsn=None if dsn is None else _text(raw, "DSN", ""),
        database=database,
        task_modules=_names(raw, "TASK_MODULES"),
        queues=_names(raw, "QUEUES"),
        app_settings=dict(app_settings),
    )


def _text(raw: Mapping[str, Any], key: str, default: str) -> str:
    value = raw.get(key, default)
    if not isinstance(value, str) or not value:
        raise ImproperlyConfigured(f"settings.CHRONOQ[{key!r}] must be a non-empty string")
    return value


def _names(raw: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ImproperlyConfigured(f"settings.CHRONOQ[{key!r}] must be a list of names")
    if not all(isinstance(name, str) and name for name in value):
        raise ImproperlyConfigured(f"settings.CHRONOQ[{key!r}] must hold non-empty strings")
    return tuple(value)


def database_dsn(alias: str) -> str:
    """A chronoq DSN for Django's database `alias`, read from its settings as they are now (a
    test runner renames the database before the store opens), which must be PostgreSQL on
    psycopg 3: enqueue hands chronoq's statements to that connection."""
    connection = connections[alias]
    if connection.vendor != "postgresql":
        raise ImproperlyConfigured(
            f"chronoq.contrib.django: database {alias!r} is {connection.vendor}, not PostgreSQL; "
            "use a PostgreSQL database or give settings.CHRONOQ['DSN']"
        )
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    if not is_psycopg3:
        raise ImproperlyConfigured(
            "chronoq.contrib.django: Django's postgresql backend runs on psycopg2 here; "
            "chronoq joins its transactions with psycopg 3 (install psycopg, not psycopg2)"
        )
    return _url(connection.settings_dict)


def _url(database: Mapping[str, Any]) -> str:
    """`postgresql://user:password@host:port/name?options`; a socket directory goes into the
    query, where a URL can hold a path."""
    user = quote(str(database.get("USER") or ""), safe="")
    password = quote(str(database.get("PASSWORD") or ""), safe="")
    host = str(database.get("HOST") or "")
    port = str(database.get("PORT") or "")
    query = {"application_name": APPLICATION_NAME}
    if host.startswith("/"):
        query["host"], host = host, ""
    options = database.get("OPTIONS") or {}
    for name, value in options.items():
        if name not in _NOT_COPIED and isinstance(value, str | int):
            query[name] = str(value)
    credentials = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    netloc = f"{credentials}{host}{':' + port if port else ''}"
    name = quote(str(database.get("NAME") or ""), safe="")
    return f"postgresql://{netloc}/{name}?{urlencode(query)}"
