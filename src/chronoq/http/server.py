"""The ASGI application behind `chronoq serve`: the JSON API under `/api/v1` (OpenAPI at
`/api/v1/openapi.json`, docs at `/api/v1/docs`), the dashboard at `/`, and `/metrics`."""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI
from fastapi.responses import Response
from starlette.staticfiles import StaticFiles

from chronoq import __version__
from chronoq.http.api import api_routes, install_error_handlers
from chronoq.http.auth import install_sessions
from chronoq.http.context import HttpContext
from chronoq.http.dashboard import install_dashboard
from chronoq.http.limits import BODY_SECONDS, BodyLimit, BodyLimits
from chronoq.http.redirects import RelativeRedirects

# A batch may carry many jobs, each up to the payload limit; anything past this is refused
# before it is read into memory.
MIN_BODY_LIMIT = 16 * 1024 * 1024


def create_server(
    ctx: HttpContext, *, https_only: bool = False, body_seconds: float = BODY_SECONDS
) -> FastAPI:
    server = FastAPI(
        title="chronoq",
        version=__version__,
        description="Enqueue, inspect and administer chronoq jobs, dead letters, schedules and "
        "queues. Send `Authorization: Bearer <token>`; read tokens may call GET endpoints, "
        "admin tokens every endpoint.",
        openapi_url="/api/v1/openapi.json",
        docs_url="/api/v1/docs",
        redoc_url=None,
    )
    # Added first, so that it runs inside the session middleware and can tell a signed-in
    # session's form from a stranger's.
    api_limit = max(MIN_BODY_LIMIT, 4 * ctx.app.config.payload_limit)
    limits = BodyLimits(api=api_limit, seconds=body_seconds)
    server.add_middleware(BodyLimit, tokens=ctx.tokens, limits=limits)
    install_sessions(server, ctx.secret, ctx.tokens, https_only=https_only)
    server.add_middleware(RelativeRedirects)
    install_error_handlers(server)
    server.include_router(api_routes(ctx), prefix="/api/v1")
    install_dashboard(server, ctx)
    static = resources.files("chronoq.http").joinpath("static")
    server.mount("/static", StaticFiles(directory=str(static)), name="static")
    server.add_api_route("/metrics", _metrics_endpoint(ctx), include_in_schema=False)
    return server


def _metrics_endpoint(ctx: HttpContext):  # type: ignore[no-untyped-def]
    def metrics() -> Response:
        return Response(ctx.metrics.render(), media_type="text/plain; version=0.0.4")

    return metrics
