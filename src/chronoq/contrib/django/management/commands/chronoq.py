"""`manage.py chronoq COMMAND ...`: every command of the `chronoq` CLI, with the project's App.

The arguments go to the CLI's own parser (`chronoq.cli.parser`) as they are, so each command
takes the options and prints the help it has as `chronoq`; the App, its DSN and its tasks come
from `settings.CHRONOQ`, so `--app` is not needed (given, it still wins).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, TextIO

from django.core.management.base import BaseCommand, CommandError, CommandParser

from chronoq.cli.apps import Host
from chronoq.cli.main import main
from chronoq.contrib.django import get_app

# Options Django's own launcher reads before any command runs; they are in the environment
# (DJANGO_SETTINGS_MODULE, sys.path) by now, and a worker's child processes inherit them.
_DJANGO_OPTIONS = ("--settings", "--pythonpath")


class Command(BaseCommand):
    help = "Run a chronoq command (migrate, worker, scheduler, serve, jobs, ...) on this project."

    def run_from_argv(self, argv: list[str]) -> None:
        """`manage.py chronoq ARGS`: ARGS go to chronoq's parser untouched, help included."""
        code = run(without_django_options(argv[2:]), prog=f"{os.path.basename(argv[0])} chronoq")
        if code:
            sys.exit(code)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("arguments", nargs=argparse.REMAINDER, help="a chronoq command")

    def handle(self, *args: Any, **options: Any) -> None:
        """`call_command("chronoq", "jobs", "list", "--json")`."""
        code = run([*args, *options.get("arguments", [])], prog="chronoq")
        if code:
            raise CommandError(f"chronoq exited with code {code}", returncode=code)


def run(
    arguments: list[str],
    *,
    prog: str,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run one chronoq command as this project's; returns its exit code."""
    settings = get_app().django
    host = Host(
        prog=prog,
        app=get_app,
        command=(sys.executable, os.path.abspath(sys.argv[0]), "chronoq"),
        defaults={"queues": list(settings.queues)} if settings.queues else {},
    )
    return main(arguments, stdout=stdout, stderr=stderr, host=host)


def without_django_options(argv: list[str]) -> list[str]:
    """`argv` without `--settings X`, `--settings=X`, `--pythonpath X` and `--pythonpath=X`."""
    kept: list[str] = []
    skip = False
    for token in argv:
        if skip:
            skip = False
        elif token in _DJANGO_OPTIONS:
            skip = True
        elif not token.startswith(tuple(f"{option}=" for option in _DJANGO_OPTIONS)):
            kept.append(token)
    return kept
