"""The public surface: `chronoq.__all__` is exactly what the package exports, and it all works."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import types

import pytest

import chronoq
from chronoq.storage import base


def _exported() -> set[str]:
    """Public names bound in the package, leaving out its own submodules."""
    return {
        name
        for name, value in vars(chronoq).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }


def test_all_lists_every_exported_name_once() -> None:
    assert len(chronoq.__all__) == len(set(chronoq.__all__))
    assert set(chronoq.__all__) - {"__version__"} == _exported()


@pytest.mark.parametrize("name", chronoq.__all__)
def test_each_name_resolves(name: str) -> None:
    value = getattr(chronoq, name)
    assert value is not None
    if isinstance(value, type):
        assert value.__module__.startswith("chronoq.")
        assert value.__doc__, f"{name} has no docstring"


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from chronoq import *", namespace)  # noqa: S102 - the statement under test
    namespace.pop("__builtins__")
    assert set(namespace) == set(chronoq.__all__)


def test_version_is_a_string() -> None:
    assert isinstance(chronoq.__version__, str)
    assert chronoq.__version__.count(".") >= 2


def test_version_is_the_package_metadata() -> None:
    assert chronoq.__version__ == importlib.metadata.version("chronoq")


def test_job_timeout_is_exported() -> None:
    assert "JobTimeout" in chronoq.__all__
    assert issubclass(chronoq.JobTimeout, chronoq.ChronoqError)


def test_enqueued_is_a_public_frozen_type_that_stores_answer_with() -> None:
    assert not chronoq.Enqueued.__module__.startswith("chronoq.storage")
    # A store's answer for each job is handed to the caller as it is: no second object a job.
    assert base.JobInsertResult is chronoq.Enqueued
    result = chronoq.Enqueued(id=7, created=False)
    assert (result.id, result.created) == (7, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.id = 8  # type: ignore[misc]


def test_job_spec_refuses_options_given_by_position() -> None:
    with pytest.raises(TypeError):
        chronoq.JobSpec("send", {}, None, "10s")  # type: ignore[misc]


def test_errors_share_one_root() -> None:
    errors = [
        value
        for name in chronoq.__all__
        if isinstance(value := getattr(chronoq, name), type) and issubclass(value, Exception)
    ]
    control_flow = {chronoq.Retry, chronoq.Discard}
    for error in errors:
        assert issubclass(error, chronoq.ChronoqError) != (error in control_flow), error
