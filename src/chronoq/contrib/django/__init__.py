"""chronoq in a Django project (`pip install 'chronoq[django]'`).

```python
# settings.py
INSTALLED_APPS = [..., "chronoq.contrib.django"]
CHRONOQ = {"QUEUES": ["emails"]}              # every key is optional (see docs/django.md)

# myapp/tasks.py: imported when Django starts
from chronoq.contrib.django import app

@app.task(queue="emails")
def send_welcome(user_id: int) -> None:
    user = User.objects.get(pk=user_id)   # the ORM works in handlers
    ...

# a view
with transaction.atomic():
    user = User.objects.create(...)
    send_welcome.defer(user_id=user.pk)   # the job exists if and only if this commits
```

```console
python manage.py chronoq migrate
python manage.py chronoq worker --concurrency 20     # no --app: the tasks come from Django
```

`app` is one `DjangoApp` per process, built from `settings.CHRONOQ` on first use.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chronoq.contrib.django.djangoapp import DjangoApp

__all__ = ["app", "get_app"]

_app: DjangoApp | None = None
_app_lock = threading.Lock()


def get_app() -> DjangoApp:
    """The project's App, built from `settings.CHRONOQ` the first time it is asked for."""
    global _app
    if _app is None:
        with _app_lock:
            if _app is None:
                from chronoq.contrib.django.djangoapp import DjangoApp
                from chronoq.contrib.django.settings import read_settings

                _app = DjangoApp(read_settings())
    return _app


def __getattr__(name: str) -> DjangoApp:
    # `from chronoq.contrib.django import app` builds the App then, once Django's settings
    # are there, not when Django imports this package to list it among INSTALLED_APPS.
    if name == "app":
        return get_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
