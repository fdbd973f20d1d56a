"""The PostgreSQL store's connection pool: psycopg_pool's, with reconnection attempts at most
`RECONNECT_MAX_DELAY` apart.

psycopg_pool replaces a lost connection by trying again 1, 2, 4, 8, 16, 32 s ... apart, for up
to `reconnect_timeout` (5 minutes). While the database is away every connection is lost, so a
database back after 36 s was reached again only at the next attempt, 63 s after it left: a
worker sat idle for 24.5 s after its database returned (measured through a relay that stood for
the server). Here the wait between attempts stops growing at 1.5-3 s (jittered, so a fleet does
not reconnect in step), and a worker resumes within about that of the database's return. What
it costs while the database is away: one refused connection per missing connection of each
process every few seconds.

psycopg_pool has no setting for the longest wait, so this is the one place that reaches into it:
`_add_connection` caps the wait its attempt has reached before psycopg_pool doubles it for the
next one. tests/unit/test_pg_pool.py checks the resulting schedule against the installed
psycopg_pool, so a release that changes those internals fails there first.
"""

from __future__ import annotations

import random
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool
from psycopg_pool.base import AttemptWithBackoff

RECONNECT_MAX_DELAY = 3.0


class ReconnectingPool(ConnectionPool[psycopg.Connection[dict[str, Any]]]):
    """A `ConnectionPool` whose reconnection attempts are at most `RECONNECT_MAX_DELAY` apart."""

    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        if attempt is not None:
            # psycopg_pool doubles `delay` after this attempt fails: the next wait is at most
            # the cap, and at least half of it.
            longest = RECONNECT_MAX_DELAY / attempt.DELAY_BACKOFF
            attempt.delay = min(attempt.delay, random.uniform(longest / 2, longest))
        super()._add_connection(attempt, growing)
