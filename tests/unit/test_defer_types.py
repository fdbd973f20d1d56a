"""`mypy --strict` checks `defer`, `configure` and `schedule` against the handler's signature.

Two snippets are checked in one mypy run: one of correct calls, which must pass, and one whose
lines marked `# E: text` must each get an error containing that text, and no other line any.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="the dev extra installs mypy")

ROOT = Path(__file__).resolve().parents[2]

HEADER = """\
from typing import assert_type

import chronoq

app = chronoq.App("sqlite:///never-opened.db")


@app.task
def send(to: str, key: str = "", delay: int = 0) -> None: ...


@app.task(queue="greetings")
def greet(ctx: chronoq.JobContext, name: str) -> None: ...


@app.schedule("every 1m")
def tick(n: int = 1) -> int:
    return n
"""

CORRECT = """
send.defer(to="a", key="a payload field", delay=3)
send.defer("a")
send.configure(delay=5, key="k", queue="greetings", conn=None).defer(to="a", key="k")
greet.defer(name="a")
greet.configure(run_at=None, priority=3).defer("a")
deferrer: chronoq.Deferrer[[str]] = greet.configure(max_attempts=2)
assert_type(app.schedule("every 1m", send), chronoq.ScheduleSpec)
assert_type(app.schedule("every 1m", "send"), chronoq.ScheduleSpec)
assert_type(tick(), int)
tick.defer(n=2)


async def produce() -> None:
    await send.defer_async(to="a")
    await greet.configure(key="k").defer_async(name="a")


def run_directly(ctx: chronoq.JobContext) -> None:
    greet(ctx, name="a")
    send(to="a")
"""

WRONG = """
send.defer(too="a")  # E: Unexpected keyword argument "too" for "defer" of "Task"
send.defer(to=1)  # E: Argument "to" to "defer" of "Task" has incompatible type "int"
send.defer()  # E: Missing positional argument "to" in call to "defer" of "Task"
greet.defer(nam="a")  # E: Unexpected keyword argument "nam" for "defer" of "Task"
greet.defer(ctx=None, name="a")  # E: Unexpected keyword argument "ctx" for "defer" of "Task"
send.configure(dealy=5)  # E: Unexpected keyword argument "dealy" for "configure" of "Task"
send.configure(key=5)  # E: Argument "key" to "configure" of "Task" has incompatible type "int"
send.configure(delay=5).defer(too="a")  # E: Unexpected keyword argument "too" for "defer" of "Deferrer"
tick.defer(m=2)  # E: Unexpected keyword argument "m" for "defer" of "Task"
wrong_return: str = tick()  # E: Incompatible types in assignment (expression has type "int"
wrong_spec: str = app.schedule("every 1m", send)  # E: (expression has type "ScheduleSpec"
"""  # noqa: E501 - each wrong call on one line with the error it gets

ERROR = re.compile(r"^(?P<file>[^:]+\.py):(?P<line>\d+): error: (?P<message>.*)$")


@pytest.fixture(scope="module")
def errors(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], str]:
    """mypy's errors on both snippets, by (file name, line)."""
    folder = tmp_path_factory.mktemp("snippets")
    for name, body in (("correct.py", CORRECT), ("wrong.py", WRONG)):
        (folder / name).write_text(HEADER + textwrap.dedent(body))
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
    command += ["--cache-dir", str(folder / "cache"), "--no-pretty", str(folder)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 2: mypy itself failed
    found: dict[tuple[str, int], str] = {}
    for line in done.stdout.splitlines():
        if match := ERROR.match(line):
            key = (Path(match["file"]).name, int(match["line"]))
            found[key] = found.get(key, "") + match["message"]
    return found


def _expected() -> dict[int, str]:
    lines = (HEADER + textwrap.dedent(WRONG)).splitlines()
    return {n: line.split("# E: ")[1] for n, line in enumerate(lines, 1) if "# E: " in line}


def test_correct_calls_pass_mypy_strict(errors: dict[tuple[str, int], str]) -> None:
    assert {key: text for key, text in errors.items() if key[0] == "correct.py"} == {}


@pytest.mark.parametrize("line", sorted(_expected()))
def test_each_wrong_call_fails_mypy_strict(errors: dict[tuple[str, int], str], line: int) -> None:
    assert _expected()[line] in errors.get(("wrong.py", line), "no error")


def test_no_other_line_of_the_wrong_calls_fails(errors: dict[tuple[str, int], str]) -> None:
    unexpected = {key: text for key, text in errors.items() if key[0] == "wrong.py"}
    assert set(unexpected) - {("wrong.py", line) for line in _expected()} == set()
