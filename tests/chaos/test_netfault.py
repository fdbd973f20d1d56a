"""The network partition relay of the chaos suite (tests.services.netfault), against a real Redis:
a cut holds requests and answers, a heal delivers what was held, in order."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.helpers import wait_until
from tests.services.netfault import Link, Network


@dataclass(frozen=True)
class Relayed:
    """A relay to the test Redis, and clients through it on the test URL's database."""

    link: Link
    database: int

    def client(self, timeout: float = 5.0) -> redis.Redis:
        return redis.Redis(
            port=self.link.port,
            db=self.database,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),  # a timeout is what these tests look for
        )


@pytest.fixture
def network() -> Iterator[Network]:
    made = Network()
    yield made
    made.close()


def _relay(network: Network, redis_url: str) -> Relayed:
    address = redis.connection.parse_url(redis_url)
    return Relayed(network.link(address["host"], address["port"]), address.get("db", 0))


@pytest.fixture
def relayed(network: Network, redis_url: str) -> Relayed:
    return _relay(network, redis_url)


def test_an_open_link_relays_both_ways(relayed: Relayed, redis_client: redis.Redis) -> None:
    client = relayed.client()
    key = f"netfault-{uuid.uuid4().hex}"
    try:
        assert client.set(key, "x" * 200_000)  # larger than one relayed chunk
        assert client.get(key) == b"x" * 200_000
        assert redis_client.strlen(key) == 200_000  # it reached the server itself
    finally:
        redis_client.delete(key)
        client.close()


def test_a_cut_holds_a_request_and_the_heal_delivers_it_late(
    relayed: Relayed, redis_client: redis.Redis
) -> None:
    key = f"netfault-{uuid.uuid4().hex}"
    client = relayed.client(timeout=0.3)
    try:
        assert client.ping()  # the connection is up before the cut
        relayed.link.cut()
        assert relayed.link.cut_now
        with pytest.raises(redis.TimeoutError):
            client.execute_command("SET", key, "late")
        assert redis_client.get(key) is None  # held: the server has not seen it
        relayed.link.heal()
        wait_until(lambda: redis_client.get(key) == b"late", what="the held SET to arrive")
    finally:
        redis_client.delete(key)
        client.close()


def test_a_connection_made_during_a_cut_reaches_the_server_after_the_heal(
    relayed: Relayed,
) -> None:
    relayed.link.cut()
    client = relayed.client(timeout=0.3)
    try:
        with pytest.raises(redis.TimeoutError):
            client.ping()
        relayed.link.heal()
        patient = relayed.client()
        try:
            assert patient.ping()
        finally:
            patient.close()
    finally:
        client.close()


def test_a_cut_is_per_link(network: Network, relayed: Relayed, redis_url: str) -> None:
    other = _relay(network, redis_url)
    cut_client, open_client = relayed.client(timeout=0.3), other.client()
    try:
        relayed.link.cut()
        with pytest.raises(redis.TimeoutError):
            cut_client.ping()
        assert open_client.ping()
    finally:
        relayed.link.heal()
        cut_client.close()
        open_client.close()
