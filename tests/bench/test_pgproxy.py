"""The benchmark's round-trip counter: it must count what a client waits for, whatever the
chunking of the byte stream, or the efficiency figure is wrong."""

from __future__ import annotations

import struct
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from bench.pgproxy import CountingProxy, Counts, FrontendParser


def message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def untyped(body: bytes) -> bytes:
    return struct.pack("!i", len(body) + 4) + body


SSL_REQUEST = untyped(struct.pack("!i", 80877103))
STARTUP = untyped(struct.pack("!i", 196608) + b"user\x00postgres\x00\x00")
STREAM = (
    SSL_REQUEST
    + STARTUP
    + message(b"Q", b"SELECT 1\x00")
    + message(b"P", b"\x00SELECT $1\x00\x00\x00")
    + message(b"B", b"\x00" * 12)
    + message(b"E", b"\x00\x00\x00\x00\x00")
    + message(b"S")
    + message(b"d", b"x" * 300)
    + message(b"X")
)


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 64, len(STREAM)])
def test_counts_round_trips_however_the_stream_is_cut(chunk: int) -> None:
    counts = Counts()
    parser = FrontendParser(counts)
    for start in range(0, len(STREAM), chunk):
        parser.feed(STREAM[start : start + chunk])
    snapshot = counts.snapshot()
    assert snapshot["round_trips"] == 2  # the Query and the Sync
    assert snapshot["messages"] == 7
    assert snapshot["bytes_up"] == len(STREAM)


@pytest.mark.postgres
def test_counts_one_round_trip_per_statement_of_a_real_client(pg_dsn: str) -> None:
    upstream = urlsplit(pg_dsn)
    with CountingProxy(upstream.hostname or "127.0.0.1", upstream.port or 5432) as proxy:
        netloc = f"{upstream.username}@127.0.0.1:{proxy.port}"
        via_proxy = urlunsplit(upstream._replace(netloc=netloc, query="sslmode=disable"))
        with psycopg.connect(via_proxy, autocommit=True) as conn:
            proxy.reset()
            # Unprepared: psycopg's automatic prepare after 5 runs costs one exchange of its own.
            for n in range(10):
                assert conn.execute("SELECT %s::int", (n,), prepare=False).fetchone() == (n,)
            assert proxy.counts.snapshot()["round_trips"] == 10
            with conn.pipeline():
                for n in range(5):
                    conn.execute("SELECT %s::int", (n,), prepare=False)
            # Five statements in a pipeline: one exchange.
            assert proxy.counts.snapshot()["round_trips"] == 11
            assert proxy.counts.connections == 1
