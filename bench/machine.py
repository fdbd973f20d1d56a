"""What the figures were measured on: hardware, versions, and the exact chronoq commit."""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import redis


def describe(pg_dsn: str, redis_url: str) -> dict[str, Any]:
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(_mem_total_kib() / 2**20, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "postgres": _postgres_version(pg_dsn),
        "redis": _redis_version(redis_url),
        "sqlite": sqlite3.sqlite_version,
        "chronoq_commit": _git_commit(),
    }


def _cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _mem_total_kib() -> int:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1])
    return 0


def _postgres_version(dsn: str) -> str:
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            commit = conn.execute("SHOW synchronous_commit").fetchone()
        return f"{row[0] if row else '?'} (synchronous_commit={commit[0] if commit else '?'})"
    except psycopg.Error as exc:
        return f"unavailable: {exc}"


def _redis_version(url: str) -> str:
    try:
        client = redis.Redis.from_url(url)
        info = client.info("server")
        client.close()
        return str(info.get("redis_version", "?"))
    except redis.RedisError as exc:
        return f"unavailable: {exc}"


def _git_commit() -> str:
    try:
        commit = _git("rev-parse", "--short", "HEAD")
        changed = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+changes" if changed else "")


def _git(*args: str) -> str:
    done = subprocess.run(
        ["git", *args],  # noqa: S607
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent,
    )
    return done.stdout.strip()


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError:
        return ""
