"""A small Django project on PostgreSQL: its database is the URL in CHRONOQ_DJANGO_TEST_DB,
which the tests create for their session."""

import os
from urllib.parse import unquote, urlsplit

_url = urlsplit(os.environ["CHRONOQ_DJANGO_TEST_DB"])

SECRET_KEY = "chronoq-django-tests"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "chronoq.contrib.django", "notes"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _url.path.lstrip("/"),
        "USER": unquote(_url.username or ""),
        "PASSWORD": unquote(_url.password or ""),
        "HOST": _url.hostname or "",
        "PORT": str(_url.port or ""),
        # The tests count this project's connections by this name.
        "OPTIONS": {"application_name": "chronoq-django-tests"},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
CHRONOQ = {"QUEUES": ["notes"], "SETTINGS": {"pool_size": 2}}
