"""Authenticated Redis: a password (`requirepass`), an ACL user, and a Redis Cluster whose nodes
require a password (`--requirepass`, `--masterauth`). The URL's credentials carry every
connection, the timer store's scripts and the reader's streams; credentials Redis refuses are
one ConfigError line that never shows the password."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster

from chronoq.errors import ConfigError
from chronoq.tier.ports import Timer
from chronoq.tier.redis import RedisStreamReader, RedisTimerStore, connect
from tests.services.redis import PrivateRedis
from tests.services.redis_cluster import PrivateRedisCluster, started_cluster

NOW = 1_800_000_000_000
PASSWORD = "s3cret-Pa55"
USER_PASSWORD = "u5er-Pa55"


@pytest.fixture
def locked_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not on PATH (Debian package redis-server)")
    server = PrivateRedis(binary, tmp_path, password=PASSWORD)
    server.start()
    admin = redis.Redis(port=server.port, password=PASSWORD)
    admin.acl_setuser(
        "chronoq",
        enabled=True,
        passwords=[f"+{USER_PASSWORD}"],
        keys=["*"],
        channels=["*"],
        commands=["+@all"],
    )
    admin.close()
    yield server
    server.stop()


def _round_trip(url: str) -> None:
    """Take a partition over, stage and move a timer, read and acknowledge it: every kind of
    command the tier sends (scripts, pipelines, blocking reads) through `url`'s credentials."""
    store = RedisTimerStore(connect(url), "auth")
    reader = RedisStreamReader(connect(url), "auth", ["q"], 4, "w1")
    try:
        for partition in range(4):
            assert store.take_over(partition, 1).accepted
            store.stage(partition, 1, [Timer(10 + partition, 1, "q", NOW)])
            assert store.move_due(partition, 1, NOW, 10).moved == 1
        got = []
        while batch := reader.read(10, 0.2):
            got.extend(batch)
        assert sorted(d.job_id for d in got) == [10, 11, 12, 13]
        reader.ack(got)
        assert store.status(0, NOW).staged == 0
    finally:
        reader.close()
        store.close()


def _refused_in_one_line(url: str, secret: str) -> None:
    with pytest.raises(ConfigError) as raised:
        connect(url).close()
    message = str(raised.value)
    assert "refused the credentials" in message
    assert "\n" not in message and secret not in message


def test_a_password_in_the_url_carries_every_command(locked_redis: PrivateRedis) -> None:
    _round_trip(f"redis://:{PASSWORD}@127.0.0.1:{locked_redis.port}/0")


def test_an_acl_user_in_the_url_carries_every_command(locked_redis: PrivateRedis) -> None:
    _round_trip(f"redis://chronoq:{USER_PASSWORD}@127.0.0.1:{locked_redis.port}/0")


@pytest.mark.parametrize(
    "credentials", ["", ":wrong-Pa55@", "chronoq:wrong-Pa55@", "nobody:wrong-Pa55@"]
)
def test_refused_credentials_are_one_config_error_line(
    locked_redis: PrivateRedis, credentials: str
) -> None:
    _refused_in_one_line(f"redis://{credentials}127.0.0.1:{locked_redis.port}/0", "wrong-Pa55")


@pytest.fixture(scope="module")
def locked_cluster() -> Iterator[PrivateRedisCluster]:
    cluster = started_cluster(password=PASSWORD)
    yield cluster
    cluster.stop()


def test_a_password_carries_every_command_on_a_cluster(
    locked_cluster: PrivateRedisCluster,
) -> None:
    client = connect(locked_cluster.url)
    assert isinstance(client, RedisCluster)
    client.close()
    _round_trip(locked_cluster.url)


def test_refused_credentials_on_a_cluster_are_one_config_error_line(
    locked_cluster: PrivateRedisCluster,
) -> None:
    _refused_in_one_line(locked_cluster.url.replace(PASSWORD, "wrong-Pa55"), "wrong-Pa55")
