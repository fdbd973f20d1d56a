"""Bearer tokens and scopes of the HTTP server."""

from __future__ import annotations

import pytest

from chronoq.config import Config
from chronoq.errors import ConfigError
from chronoq.http.auth import Scope, Session, TokenTable

ADMIN, READ = "admin-token-0123456789", "read-token-0123456789"


def test_tokens_grant_their_scope_and_nothing_else() -> None:
    table = TokenTable.from_config(Config(admin_tokens=f" {ADMIN} ,", read_tokens=READ))
    assert table.admin == (ADMIN,)
    assert (table.scope_of(ADMIN), table.scope_of(READ)) == (Scope.ADMIN, Scope.READ)
    for wrong in (None, "", ADMIN + "x", ADMIN[:-1], READ.upper(), "\udcff" * 20):
        assert table.scope_of(wrong) is None
    assert not table.open


def test_without_tokens_everyone_is_an_admin() -> None:
    table = TokenTable.from_config(Config())
    assert table.open
    assert table.scope_of(None) is Scope.ADMIN


def test_a_token_in_both_lists_is_refused() -> None:
    with pytest.raises(ConfigError, match="both in admin_tokens and in read_tokens"):
        TokenTable.from_config(Config(admin_tokens=ADMIN, read_tokens=f"{READ},{ADMIN}"))


def test_short_tokens_are_refused_without_being_echoed() -> None:
    with pytest.raises(ConfigError, match="at least 16 characters") as caught:
        TokenTable.from_config(Config(read_tokens="tiny-token"))
    assert "tiny-token" not in str(caught.value)


def test_a_session_knows_its_own_csrf_token_only() -> None:
    session = Session(Scope.READ, "csrf-token-0123456789", open=False)
    assert session.csrf_matches("csrf-token-0123456789")
    for wrong in ("", "csrf-token-012345678", "csrf-token-0123456789x", "\udcff"):
        assert not session.csrf_matches(wrong)
    assert not Session(None, "", open=False).csrf_matches("")


def test_a_session_says_what_it_may_do() -> None:
    stranger, reader = Session(None, "c", open=False), Session(Scope.READ, "c", open=False)
    admin = Session(Scope.ADMIN, "c", open=False)
    assert (stranger.signed_in, reader.signed_in, admin.signed_in) == (False, True, True)
    assert (reader.admin, reader.role, admin.admin, admin.role) == (
        False,
        "read-only",
        True,
        "admin",
    )
