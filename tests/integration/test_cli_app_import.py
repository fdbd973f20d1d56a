"""`--app` naming a module that raises while it is imported: the command shows the traceback of
the user's code (not chronoq's nor importlib's frames), then its one error line, exit code 2."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.integration.cli_support import run_cli

FAILING_APP = """import chronoq


def connect():
    raise RuntimeError("no route to the billing service")


connect()
app = chronoq.App()
"""


def _error_lines(err: str) -> tuple[list[str], str]:
    *shown, last = err.splitlines()
    return shown, last


def test_an_exception_at_import_shows_the_users_frames_then_one_line(
    write_app: Callable[[str], str], sqlite_dsn: str, tmp_path: Path
) -> None:
    spec = write_app(FAILING_APP)
    module = spec.split(":")[0]
    result = run_cli("worker", "--app", spec, "--dsn", sqlite_dsn)
    assert (result.code, result.out) == (2, "")
    shown, last = _error_lines(result.err)
    source = tmp_path / f"{module}.py"
    assert shown == [
        "Traceback (most recent call last):",
        f'  File "{source}", line 8, in <module>',
        "    connect()",
        f'  File "{source}", line 5, in connect',
        '    raise RuntimeError("no route to the billing service")',
        "RuntimeError: no route to the billing service",
    ]
    assert last == (
        f"error: --app {spec}: importing {module} failed: "
        "RuntimeError: no route to the billing service"
    )


def test_frames_of_a_module_the_app_imports_are_shown_without_importlib(
    write_app: Callable[[str], str], sqlite_dsn: str, tmp_path: Path
) -> None:
    helper = write_app(FAILING_APP).split(":")[0]
    spec = write_app(f"import {helper}\n")
    result = run_cli("enqueue", "ping", "--app", spec, "--dsn", sqlite_dsn)
    assert result.code == 2
    shown, _ = _error_lines(result.err)
    files = [line for line in shown if line.startswith("  File ")]
    assert files == [
        f'  File "{tmp_path / spec.split(":")[0]}.py", line 1, in <module>',
        f'  File "{tmp_path / helper}.py", line 8, in <module>',
        f'  File "{tmp_path / helper}.py", line 5, in connect',
    ]


def test_a_syntax_error_shows_its_file_line_and_caret(
    write_app: Callable[[str], str], sqlite_dsn: str, tmp_path: Path
) -> None:
    spec = write_app("import chronoq\napp = chronoq.App(\n")
    module = spec.split(":")[0]
    result = run_cli("worker", "--app", spec, "--dsn", sqlite_dsn)
    assert result.code == 2
    shown, last = _error_lines(result.err)
    assert shown[0] == f'  File "{tmp_path / module}.py", line 2'
    assert shown[-1] == "SyntaxError: '(' was never closed"
    assert "^" in shown[-2]
    assert last.startswith(f"error: --app {spec}: importing {module} failed: SyntaxError")


def test_a_missing_dependency_of_the_app_is_traced_to_its_import(
    write_app: Callable[[str], str], sqlite_dsn: str, tmp_path: Path
) -> None:
    spec = write_app("import chronoq_no_such_dependency\n")
    result = run_cli("worker", "--app", spec, "--dsn", sqlite_dsn)
    assert result.code == 2
    shown, last = _error_lines(result.err)
    assert shown[1:] == [
        f'  File "{tmp_path / spec.split(":")[0]}.py", line 1, in <module>',
        "    import chronoq_no_such_dependency",
        "ModuleNotFoundError: No module named 'chronoq_no_such_dependency'",
    ]
    assert last.endswith("failed: No module named 'chronoq_no_such_dependency'")


def test_a_module_that_is_not_there_is_still_one_line(sqlite_dsn: str) -> None:
    result = run_cli("worker", "--app", "chronoq_no_such_app_module:app", "--dsn", sqlite_dsn)
    assert result.code == 2
    assert result.err.count("\n") == 1
    assert "no module named 'chronoq_no_such_app_module'" in result.err


def test_a_setting_chronoq_refuses_at_import_is_one_line(
    sqlite_dsn: str, write_app: Callable[[str], str]
) -> None:
    spec = write_app("import chronoq\n\napp = chronoq.App(default_max_attempts=0)\n")
    result = run_cli("enqueue", "ping", "--app", spec, "--dsn", sqlite_dsn)
    assert "Traceback" not in result.err
    assert result.err.count("\n") == 1, result.err
    assert "default_max_attempts" in result.err
