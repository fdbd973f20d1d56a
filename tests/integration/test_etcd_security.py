"""The partition elector against a real etcd with TLS, client certificates and authentication.

One member (tests/services/etcd_secure.py) serves https only, wants a client certificate signed
by its CA, and has authentication on: the user `chronoq` may read and write `chronoq-secure/`,
`reader` only read it, and `outsider` may read and write only `elsewhere/`. Its simple tokens
expire after TOKEN_TTL seconds without a request. Each test takes well under a second, but for
the token's expiry (about 3 s).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from chronoq import App
from chronoq.errors import ConfigError, CoordinationUnavailable
from chronoq.observability.events import Observers
from chronoq.tier.etcd import EtcdElector
from chronoq.tier.etcd.access import EtcdAccess
from chronoq.tier.wiring import open_leader, read_leaders
from tests.helpers import wait_until
from tests.integration.cli_support import run_cli
from tests.services.etcd_secure import (
    OUTSIDER,
    OUTSIDER_PASSWORD,
    PASSWORD,
    READER,
    READER_PASSWORD,
    TOKEN_TTL,
    USER,
    SecureEtcd,
)

PARTITIONS = 4
TTL = 2.0
WAIT = 10.0


@pytest.fixture
def access(secure_etcd: SecureEtcd) -> EtcdAccess:
    """Everything right: the user, its password, the CA and a client certificate."""
    certs = secure_etcd.certs
    return EtcdAccess(
        username=USER,
        password=PASSWORD,
        ca_file=str(certs.ca),
        cert_file=str(certs.client),
        key_file=str(certs.client_key),
    )


@pytest.fixture
def elector_of(secure_etcd: SecureEtcd, secure_prefix: str) -> Iterator[Any]:
    """Electors on the secure member under this test's prefix; all closed at teardown."""
    opened: list[EtcdElector] = []

    def elector_of(access: EtcdAccess, holder: str = "a", ttl: float = TTL) -> EtcdElector:
        elector = EtcdElector(
            [secure_etcd.endpoint], holder, PARTITIONS, ttl=ttl, prefix=secure_prefix, access=access
        )
        opened.append(elector)
        return elector

    yield elector_of
    for elector in opened:
        elector.close()


def _token(elector: EtcdElector) -> str:
    return str(elector._gateway._clients[0].session.headers.get("Authorization", ""))


def _leads_all(elector: EtcdElector) -> dict[int, int]:
    led = wait_until(elector.step, timeout=WAIT, what=f"{elector.holder} to lead")
    assert sorted(led) == list(range(PARTITIONS))
    return {partition: lead.epoch for partition, lead in led.items()}


# Everything right


def test_a_user_over_tls_with_a_client_certificate_leads_and_is_read(
    elector_of: Any, access: EtcdAccess, monkeypatch: pytest.MonkeyPatch
) -> None:
    # requests lets REQUESTS_CA_BUNDLE replace a session's own CA file; ours must still win.
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    elector = elector_of(access)
    elector.check()  # what a scheduler asks at start; it writes nothing
    assert elector.members() == []
    epochs = _leads_all(elector)
    reader = elector_of(access, holder="reader")
    assert [(p.partition, p.holder, p.epoch) for p in reader.leaders()] == [
        (partition, "a", epoch) for partition, epoch in sorted(epochs.items())
    ]
    assert reader.members() == ["a"]


def test_the_login_may_come_in_the_endpoint(
    secure_etcd: SecureEtcd, secure_prefix: str, access: EtcdAccess
) -> None:
    endpoint = secure_etcd.endpoint.replace("https://", f"https://{USER}:{PASSWORD}@")
    tls_only = replace(access, username="", password="")
    elector = EtcdElector([endpoint], "a", PARTITIONS, TTL, secure_prefix, access=tls_only)
    try:
        _leads_all(elector)
        assert PASSWORD not in " ".join(elector.endpoints)
    finally:
        elector.close()


# Tokens etcd no longer knows


def test_a_token_that_expired_is_renewed_and_the_leader_goes_on_leading(
    elector_of: Any, access: EtcdAccess
) -> None:
    elector = elector_of(access, ttl=10.0)  # a lease that outlives the token by far
    epochs = _leads_all(elector)
    before = _token(elector)
    # Nothing tells when etcd drops an unused token: it sweeps them once a second, so a token
    # last used now is gone within TOKEN_TTL + 1 s. Let that pass without a request.
    expired = time.monotonic() + TOKEN_TTL + 1.5
    wait_until(lambda: time.monotonic() > expired, timeout=WAIT, what="the token to expire")
    led = elector.step()
    assert {partition: lead.epoch for partition, lead in led.items()} == epochs
    assert _token(elector) not in ("", before)


def test_a_leader_goes_on_leading_across_a_restart_of_its_member(
    secure_etcd: SecureEtcd, elector_of: Any, access: EtcdAccess
) -> None:
    # A restarted member knows the tokens it replays from its log, and only those: whichever
    # this one is, the leader keeps its partitions under the same epochs.
    elector = elector_of(access, ttl=10.0)
    epochs = _leads_all(elector)
    secure_etcd.restart()
    led = wait_until(elector.step, timeout=WAIT, what="a to lead after the restart")
    assert {partition: lead.epoch for partition, lead in led.items()} == epochs


# Refused: one clear line at start


@pytest.mark.parametrize(
    ("login", "message"),
    [
        ((USER, "wrong-password"), "etcd refused the user name or password"),
        (("nobody", "wrong-password"), "etcd refused the user name or password"),
        (("", ""), "etcd has authentication on and no user is set: set etcd_username"),
        (
            (OUTSIDER, OUTSIDER_PASSWORD),
            "etcd refused the request: the user has no permission on the key prefix",
        ),
    ],
    ids=["wrong-password", "unknown-user", "no-user", "no-permission"],
)
def test_a_refused_login_is_a_config_error_and_a_step_leads_nothing(
    elector_of: Any,
    access: EtcdAccess,
    login: tuple[str, str],
    message: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    username, password = login
    elector = elector_of(replace(access, username=username, password=password))
    with pytest.raises(ConfigError, match=message) as refused:
        elector.members()
    assert "\n" not in str(refused.value)
    assert "wrong-password" not in str(refused.value)
    assert [elector.step() for _ in range(3)] == [{}, {}, {}]
    warnings = [r for r in caplog.records if r.name.startswith("chronoq.coordination")]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "wrong-password" not in caplog.text


def test_a_user_who_may_only_read_is_refused_by_the_start_check(
    elector_of: Any, access: EtcdAccess
) -> None:
    elector = elector_of(replace(access, username=READER, password=READER_PASSWORD))
    assert elector.members() == []
    with pytest.raises(ConfigError, match="no permission on the key prefix"):
        elector.check()


def test_no_client_certificate_is_named(elector_of: Any, access: EtcdAccess) -> None:
    elector = elector_of(replace(access, cert_file="", key_file=""))
    with pytest.raises(CoordinationUnavailable, match="client certificate") as refused:
        elector.members()
    assert "\n" not in str(refused.value)


def test_a_client_certificate_with_a_common_name_is_named(
    secure_etcd: SecureEtcd, elector_of: Any, access: EtcdAccess
) -> None:
    certs = secure_etcd.certs
    elector = elector_of(
        replace(access, cert_file=str(certs.client_cn), key_file=str(certs.client_cn_key))
    )
    with pytest.raises(ConfigError, match="issue etcd_cert_file without a CN"):
        elector.members()


def test_a_member_certificate_from_another_ca_is_named(
    secure_etcd: SecureEtcd, elector_of: Any, access: EtcdAccess
) -> None:
    elector = elector_of(replace(access, ca_file=str(secure_etcd.certs.other_ca)))
    with pytest.raises(CoordinationUnavailable) as refused:
        elector.members()
    assert "TLS: the member's certificate is not trusted" in str(refused.value)
    assert "etcd_ca_file" in str(refused.value)


# The wiring a scheduler and `chronoq tier status` start with


@pytest.fixture
def secure_env(
    secure_etcd: SecureEtcd,
    secure_prefix: str,
    pg_dsn: str,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, str]:
    certs = secure_etcd.certs
    env = {
        "CHRONOQ_DSN": pg_dsn,
        "CHRONOQ_DISPATCH": "tiered",
        "CHRONOQ_REDIS_URL": redis_url,
        "CHRONOQ_REDIS_PREFIX": secure_prefix,
        "CHRONOQ_PARTITIONS": str(PARTITIONS),
        "CHRONOQ_ETCD_ENDPOINTS": secure_etcd.endpoint,
        "CHRONOQ_ETCD_USERNAME": USER,
        "CHRONOQ_ETCD_PASSWORD": PASSWORD,
        "CHRONOQ_ETCD_CA_FILE": str(certs.ca),
        "CHRONOQ_ETCD_CERT_FILE": str(certs.client),
        "CHRONOQ_ETCD_KEY_FILE": str(certs.client_key),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def test_open_leader_and_read_leaders_use_the_settings(
    secure_env: dict[str, str], elector_of: Any, access: EtcdAccess
) -> None:
    with App() as app:
        runtime = app.runtime()
        leader = open_leader(runtime, "scheduler-1", Observers(()))
        leader.elector.close()
        elector = elector_of(access)
        epochs = _leads_all(elector)
        leaders, schedulers = read_leaders(runtime)
    assert {p.partition: p.epoch for p in leaders} == epochs
    assert schedulers == ["a"]


def test_a_wrong_password_stops_open_leader_and_tier_status_with_one_line(
    secure_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHRONOQ_ETCD_PASSWORD", "wrong-password")
    with App() as app, pytest.raises(ConfigError) as refused:
        open_leader(app.runtime(), "scheduler-1", Observers(()))
    assert str(refused.value).startswith("etcd refused the user name or password")
    status = run_cli("tier", "status")
    assert "etcd: etcd refused the user name or password" in status.out + status.err
    assert "Traceback" not in status.err
    assert "wrong-password" not in status.out + status.err
