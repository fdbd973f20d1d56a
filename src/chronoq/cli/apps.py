"""Finding the App a command works with: `--app MODULE:APP`, or a bare App on `--dsn`.

The DSN rule is the same for every command: `--dsn`, else `CHRONOQ_DSN`, else
`sqlite:///chronoq.db`. An App loaded with `--app` keeps the DSN it was built with unless
`--dsn` is given, because the module may name its database explicitly.

Opening a SQLite file that is not there creates it. That suits the commands that add to a store,
but a command that only looks at one (or changes what it already holds) would report on an empty
database made on the spot, so a mistyped path would pass for an empty queue. The command table
(`chronoq.cli.main`) runs those commands under `existing_store_required()`, and `open_app` then
refuses a SQLite file that is not there. The check sits where the store is opened, not before the
handler, so that a handler's own checks of its input come first (a usage error is reported as
such whatever the DSN).
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from chronoq.app import App
from chronoq.config import Config
from chronoq.errors import ChronoqError, ConfigError, StoreUnavailable
from chronoq.storage.dsn import sqlite_path, store_kind

APP_SPEC_HELP = "--app must look like MODULE:APP, e.g. myproject.tasks:app"


class AppImportFailed(ConfigError):
    """The module `--app` names raised while it was imported; `user_traceback` shows where."""

    def __init__(self, message: str, user_traceback: str) -> None:
        super().__init__(message)
        self.user_traceback = user_traceback


_EXISTING_STORE_ONLY: ContextVar[bool] = ContextVar("existing_store_only", default=False)


@dataclass(frozen=True, slots=True)
class Host:
    """A program that runs the `chronoq` commands as its own: `manage.py chronoq` runs them
    with the App of the Django project (`chronoq.contrib.django`), so `--app` is not needed.

    `prog` names the command in help and usage lines; `app` gives the App a command uses when
    `--app` is not given; `command` starts this same program in a new process (the children of
    `worker --processes`), its arguments following; `defaults` fill in options left unset.
    """

    prog: str
    app: Callable[[], App]
    command: tuple[str, ...]
    defaults: Mapping[str, object] = field(default_factory=dict)


_HOST: ContextVar[Host | None] = ContextVar("host", default=None)


@contextmanager
def hosted(host: Host | None) -> Iterator[None]:
    """Within this block, commands take their App from `host` (None: the `chronoq` script)."""
    token = _HOST.set(host)
    try:
        yield
    finally:
        _HOST.reset(token)


def current_host() -> Host | None:
    return _HOST.get()


def command_config(dsn: str | None) -> Config:
    """The configuration a command that opens no App works with (`migrate`): the host App's,
    else the environment's; `--dsn` wins over both."""
    host = _HOST.get()
    if host is None:
        return Config.load(dsn=dsn)
    app = host.app()
    return app.config if not dsn else app.config.with_dsn(dsn)


@contextmanager
def existing_store_required() -> Iterator[None]:
    """Within this block, `open_app` opens only a store that is already there."""
    token = _EXISTING_STORE_ONLY.set(True)
    try:
        yield
    finally:
        _EXISTING_STORE_ONLY.reset(token)


def open_app(dsn: str | None, app_spec: str | None = None) -> App:
    """The App named by `app_spec`, or an App without tasks on the configured database."""
    host = _HOST.get()
    if app_spec is None and host is not None:
        return _with_dsn(host.app(), dsn)
    if app_spec is None:
        config = Config.load(dsn=dsn)
        if _EXISTING_STORE_ONLY.get():
            require_existing_store(config.dsn)
        # No handlers here: a job's queue and settings come from the workers that run it.
        return App(config=config, fleet_tasks=True)
    return _with_dsn(load_app(app_spec), dsn)


def _with_dsn(app: App, dsn: str | None) -> App:
    if dsn:
        app.close()  # a store opened at import time still points at the module's database
        app.config = app.config.with_dsn(dsn)
    return app


def require_existing_store(dsn: str) -> None:
    """Refuse a SQLite DSN whose file is not there, naming the path (PostgreSQL is left to the
    server, which refuses a database that does not exist by itself)."""
    if store_kind(dsn) != "sqlite":
        return
    path = Path(sqlite_path(dsn))
    if not path.exists():
        where = str(path) if path.is_absolute() else f"{path} ({path.absolute()})"
        raise StoreUnavailable(
            f"no SQLite database at {where}: check --dsn or CHRONOQ_DSN "
            "(`chronoq migrate` creates one)"
        )


def load_app(spec: str) -> App:
    """Import `module.path:attribute` from the current directory (like `python -m` would)."""
    module_name, attribute = _split_spec(spec)
    _put_cwd_on_path()
    module = _import(spec, module_name)
    target = _resolve(spec, module, attribute)
    if not isinstance(target, App):
        raise ConfigError(
            f"--app {spec}: {attribute} is a {type(target).__name__}, not a chronoq.App"
        )
    return target


def _split_spec(spec: str) -> tuple[str, str]:
    module_name, colon, attribute = spec.partition(":")
    if not (colon and module_name.strip() and attribute.strip()) or ":" in attribute:
        raise ConfigError(f"{APP_SPEC_HELP}; got {spec!r}")
    return module_name.strip(), attribute.strip()


def _put_cwd_on_path() -> None:
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)


def _import(spec: str, module_name: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name + ".").startswith(exc.name + "."):
            raise ConfigError(
                f"--app {spec}: no module named {exc.name!r} (run from the directory that "
                "holds it, or add that directory to PYTHONPATH)"
            ) from None
        raise AppImportFailed(
            f"--app {spec}: importing {module_name} failed: {exc}", user_traceback(exc)
        ) from None
    except ChronoqError as exc:
        # chronoq refused a setting of the app (App(...) with a bad value, say): its message
        # names the problem, and the user's traceback would only hide it.
        raise ConfigError(f"--app {spec}: {exc}") from None
    except Exception as exc:
        raise AppImportFailed(
            f"--app {spec}: importing {module_name} failed: {type(exc).__name__}: {exc}",
            user_traceback(exc),
        ) from None


def user_traceback(exc: BaseException) -> str:
    """The traceback of `exc` from the first frame of the user's code on, without the frames of
    this module and of importlib that lead to it (and without the importlib frames between one
    user module and the next it imports, which Python's own report hides too).

    A SyntaxError is raised by importlib's compile, before any user frame: what is left is
    Python's own account of it, file, line and caret.
    """
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not _is_import_machinery(frame.filename)
    ]
    lines = traceback.format_exception_only(type(exc), exc)
    if frames:
        lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames), *lines]
    return "".join(lines)


def _is_import_machinery(filename: str) -> bool:
    return (
        filename == __file__
        or filename == importlib.__file__
        or filename.startswith("<frozen importlib")
    )


def _resolve(spec: str, module: ModuleType, attribute: str) -> object:
    target: object = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ConfigError(
                f"--app {spec}: {module.__name__} has no attribute {attribute!r}"
                f"{_suggest_apps(module, attribute)}"
            )
        target = getattr(target, part)
    return target


def _suggest_apps(module: ModuleType, attribute: str) -> str:
    apps = sorted(name for name, value in vars(module).items() if isinstance(value, App))
    close = difflib.get_close_matches(attribute, apps, n=1)
    if close:
        return f"; did you mean {module.__name__}:{close[0]}?"
    if apps:
        return f"; it defines the App(s) {', '.join(apps)}"
    return "; it defines no chronoq.App"
