"""Config.load: explicit arguments > CHRONOQ_* environment > defaults, validated and frozen."""

from __future__ import annotations

import dataclasses

import pytest

from chronoq.config import Config
from chronoq.errors import ConfigError, InvalidDSN
from chronoq.storage.dsn import DEFAULT_DSN


def test_defaults() -> None:
    config = Config.load({})
    assert config == Config()
    assert config.dsn == DEFAULT_DSN
    assert (config.default_queue, config.default_max_attempts, config.pool_size) == (
        "default",
        20,
        4,
    )


def test_environment_sets_every_field_with_its_type() -> None:
    env = {
        "CHRONOQ_DSN": "postgresql://u@db.internal/jobs",
        "CHRONOQ_PAYLOAD_LIMIT": "2048",
        "CHRONOQ_DEFAULT_QUEUE": "emails",
        "CHRONOQ_DEFAULT_MAX_ATTEMPTS": "5",
        "CHRONOQ_DEFAULT_LEASE": "2.5",
        "CHRONOQ_POOL_SIZE": "8",
        "CHRONOQ_CONNECT_TIMEOUT": "3",
        "UNRELATED": "x",
        "CHRONOQ_TEST_PG_DSN": "ignored: not a setting",
    }
    config = Config.load(env)
    assert config == Config(
        dsn="postgresql://u@db.internal/jobs",
        payload_limit=2048,
        default_queue="emails",
        default_max_attempts=5,
        default_lease=2.5,
        pool_size=8,
        connect_timeout=3.0,
    )
    assert isinstance(config.payload_limit, int)
    assert isinstance(config.connect_timeout, float)


def test_the_process_environment_is_the_default_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONOQ_POOL_SIZE", "9")
    assert Config.load().pool_size == 9


def test_empty_environment_values_count_as_unset() -> None:
    assert Config.load({"CHRONOQ_POOL_SIZE": "", "CHRONOQ_DSN": ""}) == Config()


def test_overrides_beat_the_environment() -> None:
    env = {"CHRONOQ_POOL_SIZE": "8", "CHRONOQ_DEFAULT_QUEUE": "env"}
    config = Config.load(env, pool_size=2, default_queue=None)
    assert (config.pool_size, config.default_queue) == (2, "env")


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [
        ("pool_sise", "did you mean 'pool_size'?"),
        ("dns", "did you mean 'dsn'?"),
        ("default_lease_seconds", "did you mean 'default_lease'?"),
        ("zzz", "known settings: admin_tokens, connect_timeout, default_lease"),
    ],
)
def test_unknown_setting_gets_a_suggestion(name: str, suggestion: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Config.load({}, **{name: 1})
    assert f"unknown setting {name!r}" in str(caught.value)
    assert suggestion in str(caught.value)


@pytest.mark.parametrize(
    ("variable", "raw"),
    [
        ("CHRONOQ_POOL_SIZE", "four"),
        ("CHRONOQ_POOL_SIZE", "4.5"),
        ("CHRONOQ_DEFAULT_LEASE", "1m"),
        ("CHRONOQ_PAYLOAD_LIMIT", "1MB"),
    ],
)
def test_malformed_environment_values_name_the_variable(variable: str, raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Config.load({variable: raw})
    assert f"{variable}={raw!r}" in str(caught.value)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"payload_limit": 0}, "payload_limit"),
        ({"default_queue": "  "}, "default_queue"),
        ({"default_max_attempts": 0}, "default_max_attempts"),
        ({"default_lease": 0}, "default_lease"),
        ({"default_lease": float("nan")}, "default_lease"),
        ({"default_lease": float("inf")}, "default_lease"),
        ({"pool_size": 0}, "pool_size"),
        ({"connect_timeout": -1}, "connect_timeout"),
        ({"connect_timeout": float("inf")}, "connect_timeout"),
        ({"pool_size": "4"}, "pool_size"),
        ({"pool_size": True}, "pool_size"),
        ({"pool_size": 4.0}, "pool_size"),
        ({"default_lease": "60"}, "default_lease"),
        ({"default_queue": 7}, "default_queue"),
        ({"dsn": 7}, "dsn"),
    ],
)
def test_invalid_values_name_the_setting(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=f"setting '{field}'"):
        Config.load({}, **overrides)


def test_int_is_accepted_where_a_float_is_expected() -> None:
    config = Config.load({}, default_lease=30, connect_timeout=1)
    assert (config.default_lease, config.connect_timeout) == (30, 1)


@pytest.mark.parametrize("dsn", ["mysql://u:hunter2@h/db", "chronoq.db", "   "])
def test_invalid_dsn(dsn: str) -> None:
    with pytest.raises(InvalidDSN) as caught:
        Config.load({}, dsn=dsn)
    assert "hunter2" not in str(caught.value)


def test_invalid_dsn_from_the_environment() -> None:
    with pytest.raises(InvalidDSN):
        Config.load({"CHRONOQ_DSN": "redis://localhost"})


def test_config_is_frozen() -> None:
    config = Config.load({})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.pool_size = 9  # type: ignore[misc]


def test_with_dsn() -> None:
    config = Config.load({}, pool_size=2)
    assert config.with_dsn(None) is config
    assert config.with_dsn("") is config
    other = config.with_dsn("postgresql://h/db")
    assert (other.dsn, other.pool_size) == ("postgresql://h/db", 2)
    with pytest.raises(InvalidDSN):
        config.with_dsn("nope://x")


def test_secrets_come_from_the_environment_and_stay_out_of_the_repr() -> None:
    env = {
        "CHRONOQ_ADMIN_TOKENS": "admin-token-0123456789,second-admin-token-0123",
        "CHRONOQ_READ_TOKENS": "read-token-0123456789",
        "CHRONOQ_SESSION_SECRET": "s" * 32,
    }
    config = Config.load(env)
    assert config.admin_tokens == "admin-token-0123456789,second-admin-token-0123"
    assert config.session_secret == "s" * 32
    shown = repr(config)
    for secret in ("admin-token", "read-token", "s" * 32):
        assert secret not in shown


def test_a_short_session_secret_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"session_secret.*at least 32 characters"):
        Config.load({"CHRONOQ_SESSION_SECRET": "short"})
