"""The Django application `chronoq.contrib.django`: imports the task modules at start."""

from __future__ import annotations

import importlib

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class ChronoqConfig(AppConfig):
    name = "chronoq.contrib.django"
    label = "chronoq"
    verbose_name = "chronoq"

    def ready(self) -> None:
        """Check `settings.CHRONOQ` and register every task, so that the worker, the
        scheduler and enqueue all see the same tasks, whichever module a process starts from."""
        from chronoq.contrib.django import get_app

        app = get_app()
        modules = app.django.task_modules
        if modules is None:
            autodiscover_modules("tasks")
        else:
            for module in modules:
                importlib.import_module(module)
