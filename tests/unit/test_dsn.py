"""DSNs: which store a DSN names, and showing it without its password."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chronoq.errors import ConfigError, InvalidDSN
from chronoq.storage.dsn import (
    check_postgres_dsn,
    redact,
    session_name,
    sqlite_path,
    store_kind,
    with_session_name,
)


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://u:pw@h/db", "postgresql://u:***@h/db"),
        ("postgres://u:pw@h:5432/db?sslmode=require", "postgres://u:***@h:5432/db?sslmode=require"),
        ("postgresql://:pw@h/db", "postgresql://:***@h/db"),
        ("postgresql://u:p@ss@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:p%40ss@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:pa/ss@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:pa:ss@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:pw@/db", "postgresql://u:***@/db"),
        ("postgresql://u:pw@h1:5432,h2:5433/db", "postgresql://u:***@h1:5432,h2:5433/db"),
        ("postgresql://u:x@yy/zz@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:pa?ss@h/db", "postgresql://u:***@h/db"),
        (
            "postgresql://h/db?password=pw&sslmode=require",
            "postgresql://h/db?password=***&sslmode=require",
        ),
        ("postgresql://u:pw@h/db?password=pw", "postgresql://u:***@h/db?password=***"),
        ("host=h password=pw dbname=db", "host=h password=*** dbname=db"),
        ("host=h PASSWORD = pw dbname=db", "host=h PASSWORD = *** dbname=db"),
        ("password='p w' host=h", "password=*** host=h"),
        ("password='it\\'s' host=h", "password=*** host=h"),
        ("password=a\\ b host=h", "password=*** host=h"),
        ("password=a&b host=h", "password=*** host=h"),
    ],
)
def test_redact_hides_the_password(dsn: str, shown: str) -> None:
    assert redact(dsn) == shown


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://u@h/db",
        "postgresql://h:5432/db",
        "postgresql:///db?host=/run/postgresql",
        "host=h user=u dbname=db",
        "sqlite:///chronoq.db",
        "sqlite:////var/lib/chronoq/jobs.db",
    ],
)
def test_redact_leaves_a_dsn_without_password_alone(dsn: str) -> None:
    assert redact(dsn) == dsn


_SECRET = st.text(
    alphabet=st.one_of(
        st.sampled_from("@:/?#&=%+ é"),
        st.characters(codec="utf-8", exclude_characters="\x00"),
    ),
    min_size=6,
    max_size=20,
).filter(lambda s: s.strip() == s and "'" not in s and "\\" not in s)


def test_redact_errs_on_the_safe_side_with_an_at_sign_in_the_query() -> None:
    shown = redact("postgresql://u:pw@h/db?application_name=a@b")
    assert "pw" not in shown
    assert shown.startswith("postgresql://u:***@")


@given(_SECRET)
def test_redact_never_leaves_the_password_in_a_url(password: str) -> None:
    plain = f"postgresql://user:{password}@db.example.com:5432/jobs"
    assert redact(plain) == "postgresql://user:***@db.example.com:5432/jobs"
    tricky = f"postgresql://user:{password}@db.example.com/jobs?application_name=x@y"
    # Compare counts: the password may also spell part of the rest, e.g. "postgr".
    assert redact(tricky).count(password) < tricky.count(password)


@given(_SECRET.filter(lambda s: not any(c.isspace() for c in s)))
def test_redact_never_leaves_the_password_in_key_value_form(password: str) -> None:
    for dsn in (f"host=h password={password} user=u", f"host=h password='{password} x' user=u"):
        assert redact(dsn).count(password) < dsn.count(password)


@pytest.mark.parametrize(
    ("dsn", "kind"),
    [
        ("sqlite:///chronoq.db", "sqlite"),
        ("SQLite:///chronoq.db", "sqlite"),
        ("postgresql://h/db", "postgres"),
        ("postgres://h/db", "postgres"),
        ("PostgreSQL://h/db", "postgres"),
    ],
)
def test_store_kind(dsn: str, kind: str) -> None:
    assert store_kind(dsn) == kind


@pytest.mark.parametrize("dsn", ["", "   "])
def test_store_kind_of_an_empty_dsn(dsn: str) -> None:
    with pytest.raises(InvalidDSN, match="empty"):
        store_kind(dsn)


@pytest.mark.parametrize(
    "dsn",
    [
        "mysql://u:hunter2@h/db",
        "postgresql+psycopg://u:hunter2@h/db",
        "redis://:hunter2@localhost",
        "chronoq.db",
        "host=h password=hunter2",
    ],
)
def test_store_kind_refuses_other_dsns_without_echoing_the_password(dsn: str) -> None:
    with pytest.raises(InvalidDSN) as caught:
        store_kind(dsn)
    assert "hunter2" not in str(caught.value)
    assert "sqlite:///" in str(caught.value)
    assert isinstance(caught.value, ConfigError)


@pytest.mark.parametrize(
    ("dsn", "path"),
    [
        ("sqlite:///chronoq.db", "chronoq.db"),
        ("sqlite:///data/jobs.db", "data/jobs.db"),
        ("sqlite:////var/lib/jobs.db", "/var/lib/jobs.db"),
        ("sqlite:///jobs.db?mode=rwc", "jobs.db"),
    ],
)
def test_sqlite_path(dsn: str, path: str) -> None:
    assert sqlite_path(dsn) == path


@pytest.mark.parametrize(
    ("dsn", "why"),
    [
        ("sqlite://chronoq.db", "sqlite:///relative"),
        ("sqlite:///", "name a file"),
        ("sqlite:///:memory:", "name a file"),
        ("postgresql://h/db", "sqlite:///relative"),
    ],
)
def test_sqlite_path_errors(dsn: str, why: str) -> None:
    with pytest.raises(InvalidDSN, match=why):
        sqlite_path(dsn)


@pytest.mark.parametrize(
    "dsn",
    ["postgresql://u:hunter2@h:notaport/db", "postgresql://u:hunter2@h:99999/db", "postgresql://"],
)
def test_malformed_postgres_dsn(dsn: str) -> None:
    with pytest.raises(InvalidDSN, match="malformed PostgreSQL DSN") as caught:
        check_postgres_dsn(dsn)
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    "dsn", ["postgresql://u:pw@h:5432/db", "postgresql:///db", "postgresql://h", "host=h dbname=d"]
)
def test_well_formed_postgres_dsn(dsn: str) -> None:
    check_postgres_dsn(dsn)


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        (
            "postgresql://postgres@127.0.0.1:5999/db?sslpassword=hunter2hunter2",
            "postgresql://postgres@127.0.0.1:5999/db?sslpassword=***",
        ),
        (
            "postgresql://h/db?sslmode=require&SSLPassword=hunter2&application_name=w",
            "postgresql://h/db?sslmode=require&SSLPassword=***&application_name=w",
        ),
        ("postgresql://h/db?api_key=hunter2", "postgresql://h/db?api_key=***"),
        ("postgresql://h/db?auth_token=hunter2#x", "postgresql://h/db?auth_token=***#x"),
        ("postgresql://h/db?client_secret=hunter2", "postgresql://h/db?client_secret=***"),
        ("postgresql://h/db?ssl%70assword=hunter2", "postgresql://h/db?ssl%70assword=***"),
        ("host=h sslpassword=hunter2 dbname=db", "host=h sslpassword=*** dbname=db"),
        ("host=h sslpassword='hunter 2' dbname=db", "host=h sslpassword=*** dbname=db"),
    ],
)
def test_redact_hides_every_secret_parameter(dsn: str, shown: str) -> None:
    assert redact(dsn) == shown
    assert "hunter" not in redact(dsn)


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://h/db?sslmode=require&application_name=worker",
        "host=h sslmode=require application_name=worker",
    ],
)
def test_redact_leaves_other_parameters_alone(dsn: str) -> None:
    assert redact(dsn) == dsn


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://postgres:S3cret@PW4@127.0.0.1:5999/db",
        "postgresql://u@x:hunter2@h/db",
        "postgres://u:a@b@c@h",
    ],
)
def test_an_unescaped_at_sign_in_the_user_info_is_refused(dsn: str) -> None:
    with pytest.raises(InvalidDSN, match="%40") as caught:
        check_postgres_dsn(dsn)
    message = str(caught.value)
    assert "PW4" not in message and "hunter2" not in message and "\n" not in message


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://postgres:S3cret%40PW4@127.0.0.1:5999/db",
        "postgresql://u:pw@h/db?application_name=a@b",
        "postgresql://u@h/db?options=x@y",
    ],
)
def test_an_encoded_at_sign_or_one_past_the_host_is_accepted(dsn: str) -> None:
    check_postgres_dsn(dsn)


@pytest.mark.parametrize(
    ("dsn", "named"),
    [
        ("postgresql://u@h/db", "postgresql://u@h/db?application_name=vm%3A42%3Aabc123"),
        (
            "postgresql://u@h/db?sslmode=require&application_name=site",
            "postgresql://u@h/db?sslmode=require&application_name=vm%3A42%3Aabc123",
        ),
        (
            "postgres://u@h/db?options=-c%20jit%3Doff",
            "postgres://u@h/db?options=-c%20jit%3Doff&application_name=vm%3A42%3Aabc123",
        ),
        ("sqlite:///jobs.db", "sqlite:///jobs.db"),
    ],
)
def test_a_worker_names_its_postgres_sessions_after_its_id(dsn: str, named: str) -> None:
    assert with_session_name(dsn, "vm:42:abc123") == named


@pytest.mark.parametrize("worker_id", ["h" * 60 + ":42:abc123", "hôte:42:abc123"])
def test_a_worker_id_postgres_would_not_keep_whole_is_named_by_its_digest(worker_id: str) -> None:
    name = session_name(worker_id)
    assert name.startswith("chronoq-") and len(name) <= 63 and name.isascii()
    assert name != session_name(worker_id + "x")
