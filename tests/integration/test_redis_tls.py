"""Tiered dispatch over `rediss://`: a real redis-server that speaks TLS only, requires a
client certificate signed by its CA and a password. The CA, the client certificate and its key
go in the URL's query, as redis-py reads them (`ssl_ca_certs`, `ssl_certfile`, `ssl_keyfile`).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import pytest

from chronoq import App
from chronoq.errors import ChronoqError
from chronoq.tier.ports import Timer
from chronoq.tier.redis import RedisStreamReader, RedisTimerStore, connect
from tests.helpers import wait_until
from tests.services.etcd_secure import Certificates, make_certificates
from tests.services.redis import _missing_service, free_port

PASSWORD = "tls-pw"
NOW = 1_800_000_000_000


@dataclass
class TlsRedis:
    port: int
    certificates: Certificates

    def url(self, ca: Path | None = None, *, client_cert: bool = True) -> str:
        query = {"ssl_ca_certs": str(ca or self.certificates.ca)}
        if client_cert:
            query |= {
                "ssl_certfile": str(self.certificates.client),
                "ssl_keyfile": str(self.certificates.client_key),
            }
        return f"rediss://:{PASSWORD}@127.0.0.1:{self.port}/0?{urlencode(query)}"


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[TlsRedis]:
    binary = shutil.which("redis-server")
    if binary is None or shutil.which("openssl") is None:
        _missing_service("redis-server and openssl are needed (Debian packages of those names)")
        raise AssertionError("unreachable")  # _missing_service skips or fails
    certificates = make_certificates(tmp_path)
    server = TlsRedis(free_port(), certificates)
    process = subprocess.Popen(
        [
            binary,
            *("--port", "0", "--tls-port", str(server.port), "--bind", "127.0.0.1"),
            *("--tls-cert-file", str(certificates.server)),
            *("--tls-key-file", str(certificates.server_key)),
            *("--tls-ca-cert-file", str(certificates.ca), "--tls-auth-clients", "yes"),
            *("--requirepass", PASSWORD, "--save", "", "--appendonly", "no"),
            *("--dir", str(tmp_path), "--logfile", str(tmp_path / "redis.log")),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: _answers(server), timeout=10, what="redis-server with TLS")
        yield server
    finally:
        process.kill()
        process.wait(timeout=10)


def _answers(server: TlsRedis) -> bool:
    try:
        connect(server.url()).close()
    except ChronoqError:
        return False
    return True


def test_leaders_and_workers_work_over_tls_with_a_client_certificate(
    tls_redis: TlsRedis,
) -> None:
    store = RedisTimerStore(connect(tls_redis.url()), "tls")
    reader = RedisStreamReader(connect(tls_redis.url()), "tls", ["q"], 2, "w1")
    try:
        assert store.take_over(1, 1).accepted
        store.stage(1, 1, [Timer(7, 70, "q", NOW)])
        assert store.move_due(1, 1, NOW, 10).moved == 1
        [delivery] = reader.read(10, 1.0)
        assert (delivery.job_id, delivery.token) == (7, 70)
        reader.ack([delivery])
        store.trim(1, 1)
    finally:
        reader.close()
        store.close()


def test_an_untrusted_server_certificate_is_one_clear_line(tls_redis: TlsRedis) -> None:
    with pytest.raises(ChronoqError) as refused:
        connect(tls_redis.url(tls_redis.certificates.other_ca))
    message = str(refused.value)
    assert "certificate verify failed" in message.lower()
    assert "\n" not in message and PASSWORD not in message


def test_no_client_certificate_is_refused_with_one_clear_line(tls_redis: TlsRedis) -> None:
    with pytest.raises(ChronoqError) as refused:
        connect(tls_redis.url(client_cert=False))
    message = str(refused.value)
    assert "\n" not in message and PASSWORD not in message


def test_the_settings_accept_a_rediss_url_with_its_certificates(
    tls_redis: TlsRedis, pg_dsn: str
) -> None:
    app = App(
        dsn=pg_dsn,
        dispatch="tiered",
        redis_url=tls_redis.url(),
        etcd_endpoints="http://127.0.0.1:2379",
    )
    try:
        assert app.config.redis_url.startswith("rediss://")
        assert PASSWORD not in repr(app.config)
    finally:
        app.close()
