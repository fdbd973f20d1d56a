"""The README's examples, run as written.

- Every ```python block runs in a subprocess of its own, in an empty directory, against a fresh
  SQLite store (`CHRONOQ_DSN`). Top-level `await` runs on an event loop, as `python -m asyncio`
  runs it. A block is skipped only when the line before its fence is `<!-- not run: reason -->`;
  the test counts the blocks it ran and fails if it ran none.
- Every `curl` command of a ```console block runs in bash against a real `chronoq serve`,
  started as the same block starts its server with tokens, with the app the README defines
  (its Python block's imports, `app` and tasks, without the calls that enqueue). Only the host,
  the port and the `...` token placeholders are substituted; `$TOKEN` is an admin token. A
  response the README shows (`# {...}` after the command) must have the same shape.
- The error example the README gives in prose is what the API answers a naive `run_at`.

The blocks are read when the test runs, so it checks whatever the README holds then.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import wait_until

BASH = shutil.which("bash") or "/bin/bash"
README = Path(__file__).resolve().parents[2] / "README.md"
ADMIN = "readme-admin-token-0123456789"
READER = "readme-read-token-0123456789"

# Runs one block: top-level `await` makes the compiled block a coroutine, run on a fresh loop.
RUNNER = """\
import ast, asyncio, inspect, sys

path = sys.argv[1]
with open(path, encoding="utf-8") as source:
    code = compile(source.read(), path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
result = eval(code, {"__name__": "__main__"})
if inspect.iscoroutine(result):
    asyncio.run(result)
"""

_FENCE = re.compile(r"^```(\w*)\s*$")
_NOT_RUN = re.compile(r"^<!--\s*not run:\s*(\S.*?)\s*-->$")
_SHOWN = re.compile(r"#\s*(\{.*\}|\[.*\])\s*$")  # a response shown after a command
_ERROR_EXAMPLE = re.compile(r'\{"error": \{"type": "(\w+)", "field": "([\w.\[\]]+)"')


@dataclass(frozen=True)
class Block:
    language: str
    line: int  # of the opening fence, for messages
    text: str
    not_run: str | None  # the reason given in the marker before the fence


def _blocks(text: str) -> list[Block]:
    lines = text.splitlines()
    found, index = [], 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        before = next((line.strip() for line in reversed(lines[:index]) if line.strip()), "")
        marker = _NOT_RUN.match(before)
        body = "\n".join(lines[index + 1 : end]) + "\n"
        found.append(Block(fence[1], index + 1, body, marker[1] if marker else None))
        index = end + 1
    return found


def _commands(block: Block) -> list[str]:
    """The block's shell commands, each with its continuation lines joined."""
    commands, pending = [], ""
    for line in block.text.splitlines():
        pending += line + "\n"
        if not line.rstrip().endswith("\\"):
            if pending.strip():
                commands.append(pending.strip())
            pending = ""
    return commands


def _readme_blocks(language: str) -> list[Block]:
    return [b for b in _blocks(README.read_text(encoding="utf-8")) if b.language == language]


def _clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without a developer's own CHRONOQ_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHRONOQ_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env | extra


def _missing_tool(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


# -- Python ---------------------------------------------------------------------------------


def _run_python(block: Block, workdir: Path) -> str | None:
    """Runs the block; returns what went wrong, or None."""
    workdir.mkdir()
    (workdir / "run_block.py").write_text(RUNNER, encoding="utf-8")
    (workdir / "block.py").write_text(block.text, encoding="utf-8")
    env = _clean_env(CHRONOQ_DSN=f"sqlite:///{workdir / 'chronoq.db'}")
    done = subprocess.run(
        [sys.executable, "run_block.py", "block.py"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode == 0:
        return None
    return f"README.md:{block.line} exited {done.returncode}:\n{done.stderr[-3000:]}"


def test_the_readme_python_blocks_run(tmp_path: Path) -> None:
    blocks = _readme_blocks("python")
    runnable = [block for block in blocks if block.not_run is None]
    failures = [
        failure
        for block in runnable
        if (failure := _run_python(block, tmp_path / f"block-{block.line}")) is not None
    ]
    print(f"ran {len(runnable)} of the README's {len(blocks)} Python blocks")
    assert runnable, "the README has no Python block that is run"
    assert not failures, "\n\n".join(failures)


# -- curl against chronoq serve -------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _app_module(blocks: list[Block]) -> str:
    """The README's app as a module: the first Python block that makes `app`, without the
    statements that are bare calls (its enqueue examples), which would run at each import."""
    for block in blocks:
        tree = ast.parse(block.text)
        kept = [node for node in tree.body if not isinstance(node, ast.Expr)]
        if any(isinstance(n, ast.Assign) and "app = " in ast.unparse(n) for n in kept):
            return ast.unparse(ast.Module(body=kept, type_ignores=[])) + "\n"
    raise AssertionError("no Python block of the README defines `app`")


def _with_tokens_and_address(command: str, port: int) -> str:
    command = re.sub(r"CHRONOQ_ADMIN_TOKENS=\S+", f"CHRONOQ_ADMIN_TOKENS={ADMIN}", command)
    command = re.sub(r"CHRONOQ_READ_TOKENS=\S+", f"CHRONOQ_READ_TOKENS={READER}", command)
    command = re.sub(r"--host \S+", "--host 127.0.0.1", command)
    command = re.sub(r"--port \d+", f"--port {port}", command)
    return re.sub(r"\b(?:127\.0\.0\.1|localhost):\d+\b", f"127.0.0.1:{port}", command)


@dataclass
class Served:
    base: str
    port: int
    workdir: Path
    env: dict[str, str]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback
            return bool(response.status == 200)
    except OSError:
        return False


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Served, list[str]]]:
    """`chronoq serve` started by the README's own command with tokens, and the curl commands
    of that block."""
    if shutil.which("curl") is None:
        _missing_tool("curl is not installed (Debian package curl)")
    block = next((b for b in _readme_blocks("console") if "curl " in b.text), None)
    assert block is not None, "the README has no curl example"
    serve = [c for c in _commands(block) if "chronoq serve" in c and "ADMIN_TOKENS" in c]
    assert serve, f"README.md:{block.line}: no `chronoq serve` command with tokens for the curls"
    (tmp_path / "myproject").mkdir()
    (tmp_path / "myproject" / "__init__.py").write_text("")
    (tmp_path / "myproject" / "jobs.py").write_text(_app_module(_readme_blocks("python")))
    curlrc = tmp_path / "curl"
    curlrc.mkdir()
    # curl reads $CURL_HOME/.curlrc: the status code comes after the body, commands unchanged.
    (curlrc / ".curlrc").write_text('silent\nshow-error\nwrite-out = "\\n%{http_code}"\n')
    env = _clean_env(CHRONOQ_DSN=f"sqlite:///{tmp_path / 'chronoq.db'}", CURL_HOME=str(curlrc))
    port = _free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [BASH, "-c", _with_tokens_and_address(serve[0], port)],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # one group: bash and the server stop together
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(
            lambda: process.poll() is not None or _answers(f"{base}/api/v1/openapi.json"),
            30,
            "chronoq serve to answer",
        )
        assert process.poll() is None, f"chronoq serve exited:\n{log.read_text()}"
        curls = [c for c in _commands(block) if c.startswith("curl ")]
        yield Served(base, port, tmp_path, env | {"TOKEN": ADMIN}), curls
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _assert_same_shape(shown: Any, answered: Any, where: str) -> None:
    """Same keys and kinds of value; true, false and null as shown. Ids, counts and texts
    are examples."""
    if isinstance(shown, dict):
        assert isinstance(answered, dict), f"{where}: {answered!r} is not an object"
        assert set(answered) == set(shown), f"{where}: keys {sorted(answered)} != {sorted(shown)}"
        for key, value in shown.items():
            _assert_same_shape(value, answered[key], f"{where}.{key}")
    elif isinstance(shown, list):
        assert isinstance(answered, list), f"{where}: {answered!r} is not a list"
        for item in answered if shown else []:
            _assert_same_shape(shown[0], item, f"{where}[]")
    elif isinstance(shown, bool) or shown is None:
        assert answered is shown, f"{where}: {answered!r}, the README shows {shown!r}"
    else:
        kinds = (int, float) if isinstance(shown, int | float) else (str,)
        assert isinstance(answered, kinds) and not isinstance(answered, bool), (
            f"{where}: {answered!r} is not like the README's {shown!r}"
        )


def _run_curl(command: str, served: Served) -> tuple[int, str]:
    done = subprocess.run(
        [BASH, "-c", _with_tokens_and_address(command, served.port)],
        cwd=served.workdir,
        env=served.env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, f"{command}\nexited {done.returncode}: {done.stderr}"
    body, _, status = done.stdout.rpartition("\n")
    return int(status), body


def test_the_readme_curl_commands_work_against_chronoq_serve(
    served: tuple[Served, list[str]],
) -> None:
    server, curls = served
    assert curls, "the README's curl block has no curl command"
    for command in curls:
        status, body = _run_curl(command, server)
        assert 200 <= status < 300, f"{command}\nanswered {status}: {body}"
        shown = _SHOWN.search(command)
        if shown:
            _assert_same_shape(json.loads(shown[1]), json.loads(body), "response")
    print(f"ran {len(curls)} curl command(s) from the README")


def test_the_readme_error_example_is_what_a_naive_run_at_gets(
    served: tuple[Served, list[str]],
) -> None:
    server, curls = served
    example = _ERROR_EXAMPLE.search(README.read_text(encoding="utf-8"))
    assert example is not None, "the README no longer shows an error body"
    posted = re.search(r"-d '(\{.*?\})'", curls[0], re.DOTALL)
    assert posted is not None, f"no JSON body in {curls[0]}"
    job = json.loads(posted[1])
    naive = {"task": job["task"], "payload": job["payload"], "run_at": "2027-01-01T09:12:00"}
    request = urllib.request.Request(  # noqa: S310 - loopback http only
        f"{server.base}/api/v1/jobs",
        json.dumps(naive).encode(),
        {"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)  # noqa: S310 - loopback http only
    with refused.value:
        error = json.loads(refused.value.read())["error"]
    assert refused.value.code == 422
    assert (error["type"], error["field"]) == (example[1], example[2]), error
