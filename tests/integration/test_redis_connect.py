"""Connecting to Redis: malformed URLs, unreachable servers and a server that goes away, each
one clear error that never shows a password."""

from __future__ import annotations

import socket

import pytest

from chronoq.errors import ConfigError, InvalidDSN, StoreError
from chronoq.tier.ports import PartitionLost, Timer
from chronoq.tier.redis import RedisTimerStore, RedisUnavailable, connect
from tests.services.redis import PrivateRedis


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("", "the Redis URL is empty"),
        ("http://127.0.0.1:6379/0", "it must start with redis://, rediss:// or unix://"),
        ("127.0.0.1:6379", "it must start with redis://"),
        ("redis://127.0.0.1:port/0", "Port could not be cast"),
        ("redis://127.0.0.1:99999/0", "Port out of range"),
        ("redis://127.0.0.1:6379/nine", "the path must be a database number, got 'nine'"),
        ("redis://127.0.0.1:6379/0\x00", "contains a NUL character"),
    ],
)
def test_a_malformed_url_is_a_config_error_naming_it(url: str, problem: str) -> None:
    with pytest.raises(InvalidDSN, match=problem) as caught:
        connect(url)
    assert isinstance(caught.value, ConfigError)


def test_the_password_of_a_malformed_url_is_hidden() -> None:
    with pytest.raises(InvalidDSN) as caught:
        connect("redis://:s3cret@127.0.0.1:6379/nine")
    assert "s3cret" not in str(caught.value) and "***" in str(caught.value)


def test_an_unreachable_server_is_one_clear_line() -> None:
    port = _closed_port()
    with pytest.raises(RedisUnavailable) as caught:
        connect(f"redis://:s3cret@127.0.0.1:{port}/0")
    assert str(caught.value) == (
        f"Redis not reachable at redis://:***@127.0.0.1:{port}/0: Connection refused"
    )
    assert isinstance(caught.value, StoreError)


def test_timeouts_must_be_positive(redis_url: str) -> None:
    with pytest.raises(ConfigError, match="timeouts must be positive"):
        connect(redis_url, socket_timeout=0)


def test_a_database_out_of_range_is_a_config_error(redis_url: str) -> None:
    base = redis_url.rsplit("/", 1)[0]
    with pytest.raises(ConfigError, match="DB index is out of range"):
        connect(f"{base}/100000")


def test_a_server_that_goes_away_raises_unavailable_and_is_used_again_when_back(
    private_redis: PrivateRedis,
) -> None:
    store = RedisTimerStore(connect(private_redis.url))
    assert store.take_over(0, 1).accepted
    private_redis.stop()
    with pytest.raises(
        RedisUnavailable, match=r"to stage timers of partition 0: Connection refused"
    ):
        store.stage(0, 1, [Timer(1, 1, "q", 5)])
    private_redis.start()
    # The same client reconnects, and the restarted (empty) Redis reads as lost.
    with pytest.raises(PartitionLost):
        store.stage(0, 1, [Timer(1, 1, "q", 5)])
    store.close()
