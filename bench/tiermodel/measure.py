"""Small, quick measurements of the costs the sizing model needs, on this machine, now.

```
 PostgreSQL  a scratch database: insert N jobs (1,000 a call), read them back through the
             stager's horizon query (1,000 a page), claim them by id (100 a call), finish them
             (100 a call); CPU of the database's backends from /proc, WAL from pg_current_wal_lsn
 Redis       a prefix of its own: stage N timers, move them at batch limits 1, 100 and 1,000,
             read and ack them at COUNT 100; CPU of Redis's main thread from INFO cpu
 wheel       chronoq's TimingWheel: insert + expire per timer, memory per timer (tracemalloc)
 etcd        a private one-member etcd started from the `etcd` binary: lease keep-alives and
             range reads of an election prefix; the member's CPU from /proc
```

Server CPU is read from /proc when the server runs on this machine (PostgreSQL backends of the
scratch database, the etcd member started here); otherwise the caller's wall time stands in and
the figure's source says "measured (wall)". Redis reports its own main thread's CPU. Other work on
the same servers (a shared machine) adds to these figures; nothing here can tell it apart.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import redis

from bench.tiermodel.costs import Costs
from bench.timing_wheel import Case, Inputs, memory_once, run_once
from chronoq.core.jobs import Outcome
from chronoq.storage.base import (
    JobClaimIdsParams,
    JobFinishParams,
    JobInsertParams,
    JobLeaseRef,
    JobStageParams,
    StageRow,
)
from chronoq.storage.postgres.store import PostgresStore
from chronoq.tier.etcd.gateway import Gateway, parse_endpoint
from chronoq.tier.ports import Timer
from chronoq.tier.redis import STAGE_BATCH, RedisStreamReader, RedisTimerStore, connect

PARTITIONS = 16
INSERT_BATCH = 1_000
CLAIM_BATCH = 100
MOVE_BATCHES = (1, 100, 1_000)
READ_COUNT = 100
NOW_MS = 1_800_000_000_000
CLOCK_TICK = os.sysconf("SC_CLK_TCK")
DONE = Outcome.DONE


class MeasureError(Exception):
    """A service the measurement needs cannot be used: the message says which and why."""


@dataclass(frozen=True)
class MeasureSettings:
    pg_dsn: str
    redis_url: str
    jobs: int = 20_000  # PostgreSQL
    timers: int = 50_000  # Redis
    wheel_timers: int = 100_000
    etcd_requests: int = 300


@dataclass
class Spent:
    """What one measured block cost: the server's CPU, this process's CPU, wall time."""

    server_s: float = 0.0
    client_s: float = 0.0
    wall_s: float = 0.0
    wal_bytes: int = 0


def measure(settings: MeasureSettings, log: Callable[[str], None] = print) -> Costs:
    sources: dict[str, str] = {}
    log("PostgreSQL: insert, stage, claim by id, finish")
    pg = measure_postgres(settings.pg_dsn, settings.jobs, sources)
    log("Redis: stage, move, consume")
    red = measure_redis(settings.redis_url, settings.timers, sources)
    log("timing wheel: insert + expire, memory")
    wheel = measure_wheel(settings.wheel_timers, sources)
    log("etcd: keep-alive, range read")
    etcd = measure_etcd(settings.etcd_requests, sources)
    return Costs(**pg, **red, **wheel, **etcd, sources=sources)


# -- PostgreSQL -------------------------------------------------------------------------------


@contextmanager
def scratch_database(admin_dsn: str) -> Iterator[tuple[str, str]]:
    """A migrated database of its own (dsn, name), dropped afterwards."""
    name = f"chronoq_tiermodel_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(admin_dsn, autocommit=True, connect_timeout=5) as conn:
            conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    except psycopg.OperationalError as exc:
        raise MeasureError(f"PostgreSQL not reachable at {admin_dsn}: {exc}") from exc
    dsn = urlunsplit(urlsplit(admin_dsn)._replace(path=f"/{name}"))
    try:
        yield dsn, name
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            drop = psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            conn.execute(drop.format(psycopg.sql.Identifier(name)))


class Backends:
    """CPU of every PostgreSQL backend connected to one database (the scratch one: only the
    store measured connects to it), and the server's WAL position."""

    def __init__(self, admin: psycopg.Connection[Any], database: str) -> None:
        self.admin, self.database = admin, database

    def cpu_s(self) -> float | None:
        rows = self.admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.database,)
        ).fetchall()
        total = 0.0
        for (pid,) in rows:
            used = process_cpu_s(pid)
            if used is None:
                return None  # not on this machine, or /proc not readable
            total += used
        return total

    def wal(self) -> int:
        row = self.admin.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
        return int(row[0]) if row else 0

    @contextmanager
    def spent(self, into: Spent) -> Iterator[None]:
        server, wal = self.cpu_s(), self.wal()
        client, wall = time.process_time(), time.perf_counter()
        yield
        into.wall_s += time.perf_counter() - wall
        into.client_s += time.process_time() - client
        into.wal_bytes += self.wal() - wal
        after = self.cpu_s()
        if server is None or after is None:
            into.server_s = float("nan")
        else:
            into.server_s += after - server


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a process on this machine, from /proc/<pid>/stat."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK  # utime, stime


def measure_postgres(admin_dsn: str, jobs: int, sources: dict[str, str]) -> dict[str, Any]:
    with scratch_database(admin_dsn) as (dsn, name):
        store = PostgresStore(dsn, pool_size=1)
        store.migrate()
        store.tier_partitions(PARTITIONS)
        try:
            with psycopg.connect(admin_dsn, autocommit=True) as admin:
                return _postgres_phases(store, Backends(admin, name), dsn, jobs, sources)
        finally:
            store.close()


def _postgres_phases(
    store: PostgresStore, backends: Backends, dsn: str, jobs: int, sources: dict[str, str]
) -> dict[str, Any]:
    insert, stage, claim, finish = Spent(), Spent(), Spent(), Spent()
    with backends.spent(insert):
        for start in range(0, jobs, INSERT_BATCH):
            count = min(INSERT_BATCH, jobs - start)
            store.job_insert_many([JobInsertParams("q", "t", "{}") for _ in range(count)])
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE chronoq_jobs")
        size = conn.execute("SELECT pg_total_relation_size('chronoq_jobs')").fetchone()
    rows = _stage_all(store, backends, stage)
    if len(rows) != jobs:
        raise MeasureError(f"the horizon query returned {len(rows)} of {jobs} jobs")
    claimed = _claim_all(store, backends, rows, claim)
    with backends.spent(finish):
        for start in range(0, len(claimed), CLAIM_BATCH):
            batch = claimed[start : start + CLAIM_BATCH]
            store.job_finish_many(
                [JobFinishParams(r.id, r.lease_token, Outcome.DONE) for r in batch]
            )
    server_cpu = "measured" if insert.server_s == insert.server_s else "measured (wall)"
    for key in ("pg_insert_us", "pg_claim_us", "pg_finish_us", "pg_stage_row_us"):
        sources[key] = server_cpu
    sources["pg_row_bytes"] = sources["pg_wal_bytes_per_job"] = "measured"
    sources["sched_stage_row_us"] = "measured"
    return {
        "pg_insert_us": _per(insert, jobs),
        "pg_stage_row_us": _per(stage, jobs),
        "pg_claim_us": _per(claim, jobs),
        "pg_finish_us": _per(finish, jobs),
        "pg_row_bytes": round((int(size[0]) if size else 0) / jobs, 1),
        "pg_wal_bytes_per_job": round(
            (insert.wal_bytes + claim.wal_bytes + finish.wal_bytes) / jobs, 1
        ),
        "sched_stage_row_us": round(stage.client_s * 1e6 / jobs, 3),
    }


def _stage_all(store: PostgresStore, backends: Backends, into: Spent) -> list[StageRow]:
    rows: list[StageRow] = []
    with backends.spent(into):
        while True:
            page = store.job_stage_candidates(
                JobStageParams(
                    partitions=range(PARTITIONS),
                    partition_count=PARTITIONS,
                    horizon=timedelta(seconds=60),
                    after_id=rows[-1].id if rows else 0,
                    limit=INSERT_BATCH,
                )
            ).rows
            rows.extend(page)
            if len(page) < INSERT_BATCH:
                return rows


def _claim_all(
    store: PostgresStore, backends: Backends, rows: Sequence[StageRow], into: Spent
) -> list[JobLeaseRef]:
    claimed: list[JobLeaseRef] = []
    with backends.spent(into):
        for start in range(0, len(rows), CLAIM_BATCH):
            refs = [JobLeaseRef(r.id, r.lease_token) for r in rows[start : start + CLAIM_BATCH]]
            result = store.job_claim_ids(JobClaimIdsParams(refs, "tiermodel"))
            claimed += [JobLeaseRef(job.id, job.lease_token) for job in result.jobs]
    if len(claimed) != len(rows):
        raise MeasureError(f"claimed {len(claimed)} of {len(rows)} staged jobs")
    return claimed


def _per(spent: Spent, count: int) -> float:
    seconds = spent.server_s if spent.server_s == spent.server_s else spent.wall_s
    return round(seconds * 1e6 / count, 3)


# -- Redis ------------------------------------------------------------------------------------


def redis_cpu_s(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user_main_thread"]) + float(info["used_cpu_sys_main_thread"])


@contextmanager
def redis_spent(client: redis.Redis, into: Spent) -> Iterator[None]:
    server, cpu = redis_cpu_s(client), time.process_time()
    yield
    into.client_s += time.process_time() - cpu
    into.server_s += redis_cpu_s(client) - server


def measure_redis(url: str, timers: int, sources: dict[str, str]) -> dict[str, Any]:
    try:
        client = connect(url)
    except Exception as exc:
        raise MeasureError(f"Redis not reachable at {url}: {exc}") from exc
    prefix = f"chronoq-tiermodel-{uuid.uuid4().hex[:8]}"
    store = RedisTimerStore(client, prefix)
    try:
        return _redis_phases(store, url, prefix, timers, sources)
    finally:
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            client.delete(key)
        store.close()


def _redis_phases(
    store: RedisTimerStore, url: str, prefix: str, timers: int, sources: dict[str, str]
) -> dict[str, Any]:
    store.take_over(0, 1)
    moves: dict[str, float] = {}
    staged, moved_1000, bytes_per_timer = Spent(), Spent(), 0.0
    for round_number, batch in enumerate(MOVE_BATCHES):
        count = timers if batch > 1 else max(1, timers // 10)  # one round trip a timer
        stage, move = Spent(), Spent()
        with redis_spent(store.client, stage):
            # Jobs of their own each round: a job whose entry still waits is not staged again.
            _stage(store, count, first_id=1 + round_number * 10 * timers)
        if batch == MOVE_BATCHES[-1]:
            bytes_per_timer = _zset_bytes(store) / count
        with redis_spent(store.client, move):
            while store.move_due(0, 1, NOW_MS, batch).moved:
                pass
        moves[str(batch)] = round(move.server_s * 1e6 / count, 3)
        if batch == MOVE_BATCHES[-1]:
            staged, moved_1000 = stage, move
    consume = _consume(store, url, prefix, timers)
    for key in ("redis_stage_us", "redis_move_us", "redis_consume_us", "redis_bytes_per_timer"):
        sources[key] = "measured"
    sources["sched_redis_us"] = "measured"
    return {
        "redis_stage_us": round(staged.server_s * 1e6 / timers, 3),
        "redis_move_us": moves,
        "redis_consume_us": round(consume.server_s * 1e6 / timers, 3),
        "redis_bytes_per_timer": round(bytes_per_timer, 1),
        "sched_redis_us": round((staged.client_s + moved_1000.client_s) * 1e6 / timers, 3),
    }


def _stage(store: RedisTimerStore, count: int, first_id: int = 1) -> None:
    due = [Timer(first_id + i, 1, "q", NOW_MS - i) for i in range(count)]
    for start in range(0, count, STAGE_BATCH):
        store.stage(0, 1, due[start : start + STAGE_BATCH])


def _zset_bytes(store: RedisTimerStore) -> int:
    used = store.client.memory_usage(store.keys(0).timers, samples=0)
    return int(used or 0)


def _consume(store: RedisTimerStore, url: str, prefix: str, timers: int) -> Spent:
    """Entries moved at batch 1,000 are read and acked; the stream holds every entry moved by
    all the batches, so read exactly `timers` of them."""
    reader = RedisStreamReader(connect(url), prefix, ["q"], 1, "tiermodel")
    spent, consumed = Spent(), 0
    try:
        with redis_spent(store.client, spent):
            while consumed < timers and (
                batch := reader.read(min(READ_COUNT, timers - consumed), 0)
            ):
                reader.ack(batch)
                consumed += len(batch)
    finally:
        reader.close()
    if consumed != timers:
        raise MeasureError(f"consumed {consumed} of {timers} entries")
    return spent


# -- the timing wheel -------------------------------------------------------------------------


def measure_wheel(timers: int, sources: dict[str, str]) -> dict[str, Any]:
    inputs = Inputs.draw(Case(timers, 60.0, "over 60 s"), seed=1)
    run = run_once("wheel", inputs)
    sources["sched_wheel_us"] = sources["sched_bytes_per_timer"] = "measured"
    return {
        "sched_wheel_us": round(run.insert.us() + run.expire.us(), 3),
        "sched_bytes_per_timer": memory_once("wheel", inputs).per_timer()["added"],
    }


# -- etcd -------------------------------------------------------------------------------------

# Without an etcd binary: a guess, said to be one. etcd's own benchmark docs report tens of
# thousands of small requests a second per member on a few cores, i.e. tens of µs each.
ASSUMED_ETCD = {"etcd_keepalive_us": 50.0, "etcd_range_us": 100.0, "etcd_range_keys": 80}
ELECTION_KEYS = 80  # 64 partitions' leader keys and 16 members


def measure_etcd(requests: int, sources: dict[str, str]) -> dict[str, Any]:
    binary = shutil.which("etcd")
    if binary is None:
        for key in ASSUMED_ETCD:
            sources[key] = "assumed: no etcd binary on PATH to measure with"
        return dict(ASSUMED_ETCD)
    with private_etcd(binary) as (url, pid):
        gateway = Gateway([parse_endpoint(url)], request_timeout=5.0)
        try:
            return _etcd_requests(gateway, pid, requests, sources)
        finally:
            gateway.close()


def _etcd_requests(
    gateway: Gateway, pid: int, requests: int, sources: dict[str, str]
) -> dict[str, Any]:
    def deadline() -> float:
        return time.monotonic() + 5.0

    lease = gateway.grant(60, deadline())
    for i in range(ELECTION_KEYS):
        gateway.put(f"/tiermodel/partitions/{i:04d}/leader", "holder", lease, deadline())
    before = process_cpu_s(pid) or 0.0
    for _ in range(requests):
        gateway.keepalive(lease, deadline())
    between = process_cpu_s(pid) or 0.0
    for _ in range(requests):
        gateway.range_prefix("/tiermodel/", deadline())
    after = process_cpu_s(pid) or 0.0
    for key in ASSUMED_ETCD:
        sources[key] = "measured (a one-member etcd on this machine)"
    return {
        "etcd_keepalive_us": round((between - before) * 1e6 / requests, 3),
        "etcd_range_us": round((after - between) * 1e6 / requests, 3),
        "etcd_range_keys": ELECTION_KEYS,
    }


@contextmanager
def private_etcd(binary: str) -> Iterator[tuple[str, int]]:
    """A one-member etcd on loopback in a temporary data dir: (client url, pid)."""
    client, peer = _free_port(), _free_port()
    url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
    with tempfile.TemporaryDirectory(prefix="chronoq-tiermodel-etcd-") as data:
        command = [
            binary,
            *("--name", "m1", "--data-dir", data),
            *("--listen-client-urls", url, "--advertise-client-urls", url),
            *("--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url),
            *("--initial-cluster", f"m1={peer_url}", "--initial-cluster-state", "new"),
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD")}
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        try:
            _wait_healthy(url, process)
            yield url, process.pid
        finally:
            process.terminate()
            process.wait(timeout=10)


def _wait_healthy(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 15.0
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise MeasureError(f"etcd exited at start with code {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1.0) as answer:  # noqa: S310
                if b'"true"' in answer.read():
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise MeasureError("etcd did not become healthy within 15 s")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
