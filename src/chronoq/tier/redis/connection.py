"""Connecting to Redis: one checked client per role, and one translation of Redis failures.

`connect(url)` refuses a malformed URL with `InvalidDSN` (a `ConfigError`), credentials Redis
refuses with `ConfigError`, and an unreachable server with `RedisUnavailable`, each in one line
that never shows the password. The client it returns has bounded waits everywhere: a connect
timeout of a few seconds, and a socket timeout that a stream reader must keep longer than its
longest blocking read.

Redis Cluster is detected, not configured: when the server of the URL answers `CLUSTER INFO`
(a node of a cluster), `connect` returns a `redis.cluster.RedisCluster` that found the other
nodes from it, follows MOVED and ASK, and refreshes its slot map after a failover. A server
with cluster support disabled, or a user not allowed `CLUSTER INFO`, gets a plain client.

Failures of later calls are translated by `redis_errors`:

```
StoreError                     (chronoq.errors)
├── RedisUnavailable           Redis cannot be reached, did not answer in time, or cannot take
│                              writes for now (READONLY: a replica, before or during a
│                              failover; LOADING; MASTERDOWN; UNBLOCKED): retry later
└── (StoreError itself)        Redis answered with an error the caller did not expect
```
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import redis
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.cluster import RedisCluster
from redis.exceptions import AskError, ClusterError, RedisClusterException, TryAgainError
from redis.retry import Retry

from chronoq.errors import ConfigError, InvalidDSN, StoreError
from chronoq.storage.dsn import redact

DEFAULT_CONNECT_TIMEOUT = 3.0
DEFAULT_SOCKET_TIMEOUT = 10.0
_SCHEMES = ("redis", "rediss", "unix")


# A client of one Redis server, or of a Redis Cluster: both take the same commands, scripts and
# (non-transactional) pipelines; the cluster's route each key to the node of its slot.
Client = redis.Redis | RedisCluster


class RedisUnavailable(StoreError):
    """Redis cannot be reached."""


def connect(
    url: str,
    *,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
    name: str | None = None,
) -> Client:
    """A client for `url` (redis://[[user]:password@]host[:port][/db], rediss://..., unix://path),
    checked with a PING; a `RedisCluster` when that server is a cluster node. A stream reader's
    `socket_timeout` must exceed its longest `block`; `name` is what CLIENT LIST shows for its
    connections (e.g. the worker's id)."""
    check_url(url)
    if connect_timeout <= 0 or socket_timeout <= 0:
        raise ConfigError(
            f"Redis timeouts must be positive, got connect_timeout={connect_timeout!r} "
            f"and socket_timeout={socket_timeout!r}"
        )
    options: dict[str, Any] = {
        "socket_connect_timeout": connect_timeout,
        "socket_timeout": socket_timeout,
        "client_name": name,
    }
    try:
        client = redis.Redis.from_url(
            url,
            # One retry on a broken connection: a pooled socket that Redis closed (a restart)
            # is replaced at once, while a server that is down still fails within a connect
            # timeout or two.
            retry=Retry(NoBackoff(), 1),
            **options,
        )
    except ValueError as exc:
        raise InvalidDSN(f"invalid Redis URL {redact(url)!r}: {exc}") from None
    _check_reachable(client, url)
    if not _is_cluster_node(client):
        return client
    client.close()
    return _connect_cluster(url, options)


def _is_cluster_node(client: redis.Redis) -> bool:
    execute: Callable[..., Any] = client.execute_command
    try:
        execute("CLUSTER", "INFO")
    except redis.ResponseError:
        return False  # "cluster support disabled", or NOPERM: used as one server
    except redis.RedisError as exc:
        client.close()
        raise RedisUnavailable(f"Redis not reachable at {where(client)}: {reason(exc)}") from None
    return True


def _cluster_retry() -> Retry:
    """Retries of a command whose node failed: a few, quickly (redis-py's default is 10, up to
    1 s apart, each a connect timeout long against a host that does not answer). MOVED and ASK
    are followed apart from these. Past them the caller gets RedisUnavailable and retries at its
    own pace, as it does for one server."""
    return Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), 3)


def _connect_cluster(url: str, options: dict[str, Any]) -> RedisCluster:
    """A cluster client from one node's URL (it finds the others)."""
    if urlsplit(url).scheme == "unix":
        raise ConfigError(
            f"Redis at {redact(url)} is a cluster node: reach it by redis://host:port"
        )
    try:
        client = RedisCluster.from_url(url, retry=_cluster_retry(), **options)
    except redis.AuthenticationError as exc:
        raise ConfigError(f"Redis at {redact(url)} refused the credentials: {exc}") from None
    except (redis.RedisError, RedisClusterException) as exc:
        raise RedisUnavailable(
            f"Redis Cluster not reachable at {redact(url)}: {reason(exc)}"
        ) from None
    _check_reachable(client, url)
    return client


def check_url(url: str) -> None:
    """Refuse, with InvalidDSN naming the problem, a URL that redis-py would misread."""
    shown = redact(url) if isinstance(url, str) else repr(url)
    if not isinstance(url, str) or not url.strip():
        raise InvalidDSN("the Redis URL is empty: use redis://host:6379/0")
    if "\x00" in url:
        raise InvalidDSN(f"the Redis URL {shown!r} contains a NUL character")
    parts = urlsplit(url)
    if parts.scheme not in _SCHEMES:
        raise InvalidDSN(
            f"unsupported Redis URL {shown!r}: it must start with redis://, rediss:// or unix://"
        )
    if parts.scheme == "unix":
        return
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when it is read
    except ValueError as exc:
        raise InvalidDSN(f"invalid Redis URL {shown!r}: {exc}") from None
    database = parts.path.strip("/")
    if database and not database.isdigit():
        raise InvalidDSN(
            f"invalid Redis URL {shown!r}: the path must be a database number, got {database!r}"
        )


def _check_reachable(client: Client, url: str) -> None:
    try:
        client.ping()
    except redis.AuthenticationError as exc:
        client.close()
        raise ConfigError(f"Redis at {redact(url)} refused the credentials: {exc}") from None
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        client.close()
        raise RedisUnavailable(f"Redis not reachable at {redact(url)}: {reason(exc)}") from None
    except redis.ResponseError as exc:
        client.close()
        raise ConfigError(f"Redis at {redact(url)} refused the connection: {exc}") from None


def reason(exc: BaseException) -> str:
    """What went wrong, in a few words: the operating system's reason when there is one
    ("Connection refused"), else the first line of the error."""
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror
    if isinstance(exc, redis.TimeoutError) or isinstance(cause, TimeoutError):
        return "timed out"
    lines = str(exc).strip().splitlines()
    return lines[0].rstrip(".") if lines else type(exc).__name__


def socket_timeout(client: Client) -> float | None:
    """The socket timeout of the client's connections (a cluster's: of every node)."""
    kwargs: Callable[[], dict[str, Any]] = client.get_connection_kwargs
    timeout = kwargs().get("socket_timeout")
    return None if timeout is None else float(timeout)


def where(client: Client) -> str:
    """The server a client talks to, as a URL without credentials."""
    if isinstance(client, RedisCluster):
        default_node: Callable[[], Any] = client.get_default_node
        node = default_node()
        return f"redis://{node.host}:{node.port} (cluster)" if node else "the Redis Cluster"
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix://{kwargs['path']}"
    host, port, db = kwargs.get("host", "localhost"), kwargs.get("port", 6379), kwargs.get("db", 0)
    return f"redis://{host}:{port}/{db}"


# Errors that pass once Redis is back or a replica has been promoted: the caller retries later.
_UNAVAILABLE: tuple[type[Exception], ...] = (
    redis.ConnectionError,  # BusyLoadingError (LOADING) too
    redis.TimeoutError,
    redis.ReadOnlyError,  # READONLY: the server is a replica (a failover has not finished)
    # Redis Cluster: CLUSTERDOWN, MASTERDOWN, TRYAGAIN (a slot migrating), MOVED or ASK past
    # the client's retries, slots not covered while a replica is promoted.
    ClusterError,
    TryAgainError,
    AskError,  # MovedError too
    RedisClusterException,
)


# Replies that say the same: a replica whose master link is down, a blocked read ended because
# the server turned into a replica.
_UNAVAILABLE_REPLIES = ("MASTERDOWN", "UNBLOCKED")


def is_unavailable(exc: BaseException) -> bool:
    """True for a failure that passes by itself: Redis down, slow, loading, or read-only."""
    return isinstance(exc, _UNAVAILABLE) or str(exc).startswith(_UNAVAILABLE_REPLIES)


def translate(client: Client, doing: str, exc: Exception) -> StoreError:
    """The StoreError for `exc`, raised while `doing`: RedisUnavailable when it passes by
    itself (see `is_unavailable`), a plain StoreError otherwise."""
    if is_unavailable(exc):
        return RedisUnavailable(f"Redis not reachable at {where(client)} to {doing}: {reason(exc)}")
    return StoreError(f"Redis failed to {doing}: {reason(exc)}")


@contextmanager
def redis_errors(client: Client, doing: str) -> Iterator[None]:
    """Raise RedisUnavailable for a Redis that failed, timed out or could not take writes
    while `doing`, and StoreError for any other error of Redis."""
    try:
        yield
    except (redis.RedisError, RedisClusterException) as exc:
        raise translate(client, doing, exc) from exc
