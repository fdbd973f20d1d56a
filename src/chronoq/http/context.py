"""What every route of the server shares: the App, the tokens, and the secret of the sessions."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from chronoq.app import App
from chronoq.http.auth import TokenTable
from chronoq.observability.metrics import Metrics
from chronoq.observability.recent import RecentFinished


@dataclass(slots=True)
class HttpContext:
    """`secret` signs the dashboard's session cookies; a new one at each start logs everyone
    out, which is the safe default when none is configured. `recent` keeps the finished-job
    buckets every dashboard reader shares, so a refresh reads only the newest from the store."""

    app: App
    tokens: TokenTable
    metrics: Metrics
    secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    recent: RecentFinished = field(default_factory=RecentFinished)
