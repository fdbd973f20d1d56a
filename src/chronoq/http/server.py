"""The ASGI application behind `chronoq serve`: the JSON API under `/api/v1` (OpenAPI at
`/api/v1/openapi.json`, docs at `/api/v1/docs`), the dashboard at `/`, and `/metrics`.

`/metrics` names queues, tasks and how busy they are, so it asks what the API asks: a read or
admin bearer token (how Prometheus scrapes it), or a signed-in dashboard session. An open server
(no token configured, loopback only) serves it to anyone, as it serves everything else."""

from __future__ import annotations

from html import escape
from importlib import resources
from typing import Annotated

from fastapi import Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.staticfiles import StaticFiles

from chronoq import __version__
from chronoq.http.api import api_routes
from chronoq.http.auth import Throttle, install_sessions, read_session
from chronoq.http.context import HttpContext
from chronoq.http.dashboard import PAGE_HEADERS, install_dashboard
from chronoq.http.errors import error_response, install_error_handlers
from chronoq.http.limits import BODY_SECONDS, BodyLimit, BodyLimits
from chronoq.http.redirects import RelativeRedirects

# A batch may carry many jobs, each up to the payload limit; anything past this is refused
# before it is read into memory.
MIN_BODY_LIMIT = 16 * 1024 * 1024
OPENAPI_URL = "/api/v1/openapi.json"
DOCS_URL = "/api/v1/docs"
SWAGGER = "/static/swagger"  # Swagger UI's files, vendored: no CDN is trusted with this origin
_scraper = HTTPBearer(auto_error=False, description="A read or admin token.")


def create_server(
    ctx: HttpContext, *, https_only: bool = False, body_seconds: float = BODY_SECONDS
) -> FastAPI:
    server = FastAPI(
        title="chronoq",
        version=__version__,
        description="Enqueue, inspect and administer chronoq jobs, dead letters, schedules and "
        "queues. Send `Authorization: Bearer <token>`; read tokens may call GET endpoints, "
        "admin tokens every endpoint.",
        openapi_url=OPENAPI_URL,
        docs_url=None,  # served by `_docs_page`, under the dashboard's CSP
        redoc_url=None,
    )
    # Added first, so that it runs inside the session middleware and can tell a signed-in
    # session's form from a stranger's.
    api_limit = max(MIN_BODY_LIMIT, 4 * ctx.app.config.payload_limit)
    limits = BodyLimits(api=api_limit, seconds=body_seconds)
    # It shares the throttle of failed authentications with the routes.
    throttle = Throttle()
    server.add_middleware(BodyLimit, tokens=ctx.tokens, limits=limits, throttle=throttle)
    install_sessions(server, ctx.secret, ctx.tokens, https_only=https_only, throttle=throttle)
    server.add_middleware(RelativeRedirects)
    install_error_handlers(server)
    server.include_router(api_routes(ctx), prefix="/api/v1")
    install_dashboard(server, ctx)
    static = resources.files("chronoq.http").joinpath("static")
    server.mount("/static", StaticFiles(directory=str(static)), name="static")
    server.add_api_route("/metrics", _metrics_endpoint(ctx), include_in_schema=False)
    server.add_api_route(DOCS_URL, _docs_page, include_in_schema=False)
    return server


def _docs_page() -> HTMLResponse:
    """Swagger UI from this server's own files, under the dashboard's CSP. FastAPI's
    `get_swagger_ui_html` would start it from an inline script, which that CSP refuses."""
    html = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>chronoq API</title>
<link rel="icon" href="{SWAGGER}/favicon-32x32.png">
<link rel="stylesheet" href="{SWAGGER}/swagger-ui.css">
<script src="{SWAGGER}/swagger-ui-bundle.js" defer></script>
<script src="{SWAGGER}/init.js" defer></script>
</head>
<body>
<div id="swagger-ui" data-openapi="{escape(OPENAPI_URL)}"></div>
</body>
</html>
"""
    return HTMLResponse(html, headers=PAGE_HEADERS)


def _metrics_endpoint(ctx: HttpContext):  # type: ignore[no-untyped-def]
    def metrics(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_scraper)],
    ) -> Response:
        token = credentials.credentials if credentials else None
        if ctx.tokens.scope_of(token) is None and not read_session(request).signed_in:
            kind = "Unauthorized" if credentials is None else "InvalidToken"
            return error_response(401, kind, "a valid bearer token is required", None)
        return Response(ctx.metrics.render(), media_type="text/plain; version=0.0.4")

    return metrics
