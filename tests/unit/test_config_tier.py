"""Config: the settings of tiered dispatch, each checked on its own and together."""

from __future__ import annotations

from pathlib import Path

import pytest

from chronoq import App
from chronoq.config import Config
from chronoq.errors import ConfigError

PG = "postgresql://u@db.internal/jobs"
REDIS = "redis://:hunter2@cache.internal:6379/0"
ETCD = "http://10.0.0.1:2379,http://10.0.0.2:2379"
TIERED = {"dsn": PG, "dispatch": "tiered", "redis_url": REDIS, "etcd_endpoints": ETCD}


def refused(**overrides: object) -> str:
    with pytest.raises(ConfigError) as caught:
        Config.load({}, **overrides)
    return str(caught.value)


def test_defaults() -> None:
    config = Config.load({})
    assert (config.dispatch, config.redis_url, config.etcd_endpoints) == ("db", "", "")
    assert (config.partitions, config.leader_ttl, config.stage_horizon) == (16, 5.0, 60.0)
    assert config.redis_prefix == "chronoq"
    assert config.etcd_urls() == []


def test_the_environment_sets_every_tier_field_with_its_type() -> None:
    env = {
        "CHRONOQ_DSN": PG,
        "CHRONOQ_DISPATCH": "tiered",
        "CHRONOQ_REDIS_URL": REDIS,
        "CHRONOQ_ETCD_ENDPOINTS": ETCD,
        "CHRONOQ_PARTITIONS": "64",
        "CHRONOQ_LEADER_TTL": "7.5",
        "CHRONOQ_STAGE_HORIZON": "30",
        "CHRONOQ_REDIS_PREFIX": "billing",
    }
    config = Config.load(env)
    assert config == Config(
        dsn=PG,
        dispatch="tiered",
        redis_url=REDIS,
        etcd_endpoints=ETCD,
        partitions=64,
        leader_ttl=7.5,
        stage_horizon=30.0,
        redis_prefix="billing",
    )
    assert isinstance(config.partitions, int)
    assert isinstance(config.stage_horizon, float)


def test_arguments_beat_the_environment() -> None:
    env = {"CHRONOQ_PARTITIONS": "64", "CHRONOQ_REDIS_PREFIX": "env"}
    config = Config.load(env, partitions=8, redis_prefix=None)
    assert (config.partitions, config.redis_prefix) == (8, "env")


def test_the_redis_url_stays_out_of_the_repr() -> None:
    shown = repr(Config.load({}, **TIERED))
    assert "hunter2" not in shown
    assert "redis_url" not in shown
    assert "dispatch='tiered'" in shown


def test_etcd_passwords_stay_out_of_the_repr() -> None:
    in_url = Config.load({}, **TIERED | {"etcd_endpoints": "https://root:hunter2@a:2379"})
    in_setting = Config.load({}, **TIERED | {"etcd_username": "root", "etcd_password": "hunter2"})
    assert "hunter2" not in repr(in_url)
    assert "hunter2" not in repr(in_setting)
    assert "etcd_username='root'" in repr(in_setting)


# -- dispatch ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "hint"),
    [
        ("tierd", "; did you mean 'tiered'?"),
        ("Tiered", "; did you mean 'tiered'?"),
        ("DB", "; did you mean 'db'?"),
        ("redis", ""),
    ],
)
def test_an_unknown_dispatch_mode_is_refused_with_a_suggestion(mode: str, hint: str) -> None:
    assert refused(dispatch=mode) == (
        f"setting 'dispatch' must be 'db' or 'tiered', got {mode!r}{hint}"
    )


def test_an_unknown_dispatch_mode_from_the_environment_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"setting 'dispatch'.*did you mean 'tiered'"):
        Config.load({"CHRONOQ_DISPATCH": "teired"})


# -- redis_url -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0",
        "redis://cache",
        "rediss://:secret@cache.internal:6380",
        "redis://user:secret@cache/15",
        "unix:///run/redis.sock",
    ],
)
def test_redis_urls_redis_py_opens_are_accepted(url: str) -> None:
    assert Config.load({}, redis_url=url).redis_url == url


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://:hunter2@cache:6379", "must start with redis://, rediss:// or unix://"),
        ("cache:6379", "must start with redis://, rediss:// or unix://"),
        ("redis://:hunter2@cache:99999/0", "has an invalid port"),
        ("redis://:hunter2@cache:port", "has an invalid port"),
        ("redis://:hunter2@/0", "names no host"),
        ("redis://:hunter2@cache/jobs", "may end only in a database number"),
        ("unix://", "names no socket path"),
    ],
)
def test_a_bad_redis_url_is_named_without_its_password(url: str, problem: str) -> None:
    message = refused(redis_url=url)
    assert message.startswith("setting 'redis_url' ")
    assert problem in message
    assert "hunter2" not in message


# -- etcd_endpoints ------------------------------------------------------------------------


def test_etcd_endpoints_are_split_and_trimmed() -> None:
    config = Config.load({}, etcd_endpoints=" http://a:2379 ,https://b.internal:2380")
    assert config.etcd_urls() == ["http://a:2379", "https://b.internal:2380"]


@pytest.mark.parametrize(
    ("endpoints", "problem"),
    [
        ("http://a:2379,,http://b:2379", "entry 2 is empty"),
        ("http://a:2379,", "entry 2 is empty"),
        ("a:2379", "entry 1 ('a:2379') is not an http(s)://host:port URL"),
        ("grpc://a:2379", "entry 1 ('grpc://a:2379') is not an http(s)://host:port URL"),
        ("http://a:2379,http://b", "entry 2 ('http://b') names no port"),
        ("http://a:70000", "entry 1 ('http://a:70000') has an invalid port"),
        ("http://a:2379/v3", "entry 1 ('http://a:2379/v3') must be only scheme://host:port"),
        ("http://a:2379?x=1", "must be only scheme://host:port"),
        ("http://root@a:2379", "entry 1 ('http://root@a:2379') must carry both a user and"),
        ("http://:hunter2@a:2379", "entry 1 ('http://:***@a:2379') must carry both a user"),
        ("http://root:hunter2@a:2379/v3", "entry 1 ('http://root:***@a:2379/v3') must be only"),
    ],
)
def test_each_etcd_endpoint_is_checked(endpoints: str, problem: str) -> None:
    message = refused(etcd_endpoints=endpoints)
    assert message.startswith("setting 'etcd_endpoints': ")
    assert problem in message
    assert "hunter2" not in message


# -- numbers and the prefix ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("partitions", 0),
        ("partitions", 1025),
        ("partitions", -4),
        ("partitions", 16.0),
        ("leader_ttl", 0.5),
        ("leader_ttl", 0),
        ("leader_ttl", float("nan")),
        ("leader_ttl", float("inf")),
        ("stage_horizon", 0),
        ("stage_horizon", -60),
        ("stage_horizon", 3600.5),
        ("stage_horizon", float("nan")),
        ("stage_horizon", float("inf")),
        ("redis_prefix", ""),
        ("redis_prefix", "   "),
        ("redis_prefix", "app{1}"),
        ("redis_prefix", "app}"),
        ("redis_prefix", "my app"),
        ("redis_prefix", "app\n"),
        ("redis_url", 6379),
        ("dispatch", None),  # None means unset: the default stands
    ],
)
def test_out_of_range_values_name_the_setting(field: str, value: object) -> None:
    if value is None:
        assert Config.load({}, **{field: value}).dispatch == "db"
        return
    assert refused(**{field: value}).startswith(f"setting {field!r} ")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("partitions", 1),
        ("partitions", 1024),
        ("leader_ttl", 1),
        ("leader_ttl", 30.0),
        ("stage_horizon", 0.5),
        ("stage_horizon", 3600),
        ("redis_prefix", "chronoq:billing"),
    ],
)
def test_values_at_the_bounds_are_accepted(field: str, value: object) -> None:
    assert getattr(Config.load({}, **{field: value}), field) == value


def test_the_messages_say_what_is_allowed() -> None:
    assert refused(partitions=0) == "setting 'partitions' must be from 1 to 1024, got 0"
    assert refused(stage_horizon=7200) == (
        "setting 'stage_horizon' must be more than 0 and at most 3600 seconds, got 7200"
    )
    assert "hash tags" in refused(redis_prefix="a{b}")


# -- what tiered dispatch needs ------------------------------------------------------------


def test_tiered_dispatch_with_everything_it_needs() -> None:
    config = Config.load({}, **TIERED)
    assert config.dispatch == "tiered"
    assert config.etcd_urls() == ["http://10.0.0.1:2379", "http://10.0.0.2:2379"]


def test_tiered_dispatch_names_everything_it_lacks_in_one_message() -> None:
    assert refused(dispatch="tiered", dsn="sqlite:///jobs.db") == (
        "tiered dispatch needs PostgreSQL; the dsn is SQLite (sqlite:///jobs.db); it also needs"
        " redis_url (CHRONOQ_REDIS_URL) and etcd_endpoints (CHRONOQ_ETCD_ENDPOINTS),"
        " which are not set"
    )


@pytest.mark.parametrize(
    ("missing", "expected"),
    [
        (
            {"dsn": "sqlite:///jobs.db"},
            "tiered dispatch needs PostgreSQL; the dsn is SQLite (sqlite:///jobs.db)",
        ),
        (
            {"redis_url": ""},
            "tiered dispatch needs redis_url (CHRONOQ_REDIS_URL), which is not set",
        ),
        (
            {"etcd_endpoints": ""},
            "tiered dispatch needs etcd_endpoints (CHRONOQ_ETCD_ENDPOINTS), which is not set",
        ),
    ],
)
def test_each_missing_need_is_named(missing: dict[str, str], expected: str) -> None:
    assert refused(**(TIERED | missing)) == expected


def test_db_dispatch_needs_none_of_it() -> None:
    config = Config.load({}, dsn="sqlite:///jobs.db")
    assert (config.dispatch, config.redis_url, config.etcd_endpoints) == ("db", "", "")


def test_with_dsn_checks_the_rule_again() -> None:
    config = Config.load({}, **TIERED)
    with pytest.raises(ConfigError, match="tiered dispatch needs PostgreSQL"):
        config.with_dsn("sqlite:///jobs.db")


# -- App(...) -------------------------------------------------------------------------------


def test_app_passes_the_tier_settings_through() -> None:
    app = App(PG, dispatch="tiered", redis_url=REDIS, etcd_endpoints=ETCD, partitions=32)
    assert (app.config.dsn, app.config.dispatch, app.config.partitions) == (PG, "tiered", 32)


def test_app_checks_the_tiered_rule_against_its_own_dsn(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dsn given to App is the one the rule is checked against, not the default."""
    for name, value in (("DISPATCH", "tiered"), ("REDIS_URL", REDIS), ("ETCD_ENDPOINTS", ETCD)):
        monkeypatch.setenv(f"CHRONOQ_{name}", value)
    monkeypatch.delenv("CHRONOQ_DSN", raising=False)
    assert App(PG).config.dispatch == "tiered"
    with pytest.raises(ConfigError, match="tiered dispatch needs PostgreSQL"):
        App("sqlite:///jobs.db")
    with pytest.raises(ConfigError, match="tiered dispatch needs PostgreSQL"):
        App()


def test_app_refuses_a_misspelt_tier_setting() -> None:
    with pytest.raises(ConfigError, match="unknown setting 'partition'; did you mean 'partitions'"):
        App(PG, partition=8)


# -- etcd authentication and TLS -----------------------------------------------------------


@pytest.fixture
def pem(tmp_path: Path) -> Path:
    """A file to name as a certificate or key (Config checks only that it can be read)."""
    path = tmp_path / "some.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\n")
    return path


HTTPS = "https://10.0.0.1:2379,https://10.0.0.2:2379"


def test_the_environment_sets_the_etcd_login_and_tls_files(pem: Path) -> None:
    env = {
        "CHRONOQ_ETCD_ENDPOINTS": HTTPS,
        "CHRONOQ_ETCD_USERNAME": "chronoq",
        "CHRONOQ_ETCD_PASSWORD": "hunter2",
        "CHRONOQ_ETCD_CA_FILE": str(pem),
        "CHRONOQ_ETCD_CERT_FILE": str(pem),
        "CHRONOQ_ETCD_KEY_FILE": str(pem),
    }
    config = Config.load(env)
    assert (config.etcd_username, config.etcd_password) == ("chronoq", "hunter2")
    assert config.etcd_ca_file == config.etcd_cert_file == config.etcd_key_file == str(pem)


@pytest.mark.parametrize(
    "endpoints",
    [
        "https://chronoq:hunter2@a:2379,https://chronoq:hunter2@b:2379",
        "https://chronoq:hunter2@a:2379,https://b:2379",  # one entry carries it for all
        "http://chronoq:p%40ss@a:2379",  # percent-encoded
    ],
)
def test_a_login_in_the_endpoints_is_accepted(endpoints: str) -> None:
    assert Config.load({}, etcd_endpoints=endpoints).etcd_endpoints == endpoints


def test_the_same_login_in_the_endpoints_and_the_settings_is_accepted() -> None:
    config = Config.load(
        {},
        etcd_endpoints="https://chronoq:hunter2@a:2379",
        etcd_username="chronoq",
        etcd_password="hunter2",
    )
    assert config.etcd_username == "chronoq"


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"etcd_username": "chronoq"}, "setting 'etcd_password' must be set too"),
        ({"etcd_password": "hunter2"}, "setting 'etcd_username' must be set too"),
        (
            {"etcd_endpoints": "https://a:hunter2@a:2379,https://b:hunter2@b:2379"},
            "setting 'etcd_endpoints' carries different users or passwords",
        ),
        (
            {
                "etcd_endpoints": "https://a:hunter2@a:2379",
                "etcd_username": "a",
                "etcd_password": "other-hunter2",
            },
            "setting 'etcd_username' and etcd_password differ from the user:password@",
        ),
    ],
)
def test_one_etcd_login_is_required(settings: dict[str, str], problem: str) -> None:
    message = refused(**settings)
    assert message.startswith(problem)
    assert "hunter2" not in message


def test_a_missing_tls_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.pem"
    for name in ("etcd_ca_file", "etcd_cert_file", "etcd_key_file"):
        assert refused(etcd_endpoints=HTTPS, **{name: str(missing)}) == (
            f"setting {name!r} names no file: {str(missing)!r}"
        )


def test_a_certificate_needs_its_key_and_a_key_its_certificate(pem: Path) -> None:
    assert refused(etcd_endpoints=HTTPS, etcd_cert_file=str(pem)).startswith(
        "setting 'etcd_key_file' must be set too: a client certificate needs its private key"
    )
    assert refused(etcd_endpoints=HTTPS, etcd_key_file=str(pem)).startswith(
        "setting 'etcd_cert_file' must be set too"
    )


@pytest.mark.parametrize("name", ["etcd_ca_file", "etcd_cert_file"])
def test_tls_files_need_https_endpoints(pem: Path, name: str) -> None:
    files = {name: str(pem)} | ({"etcd_key_file": str(pem)} if name == "etcd_cert_file" else {})
    endpoints = "https://a:2379,http://root:hunter2@b:2379"
    message = refused(etcd_endpoints=endpoints, **files)
    assert message == (
        f"setting {name!r} needs https:// etcd endpoints, but entry 2 of 'etcd_endpoints' is "
        "'http://root:***@b:2379'"
    )
