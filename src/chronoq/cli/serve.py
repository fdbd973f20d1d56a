"""`chronoq serve`: the HTTP API, the dashboard and /metrics, on uvicorn.

The listening socket is bound here, before "serving" is logged, and handed to uvicorn: a port in
use (or an address this machine does not have) is then one line and exit code 2, as the
worker's `--metrics-port` says it, instead of a "serving" line followed by uvicorn's error. With
`--port 0` the line names the port the system picked.
"""

from __future__ import annotations

import ipaddress
import logging
import signal
import socket

import uvicorn

from chronoq.cli.apps import open_app
from chronoq.cli.invocation import EXIT_OK, Invocation
from chronoq.cli.worker import watch_app
from chronoq.errors import ConfigError
from chronoq.fleet.beacon import Beacon, new_process_id, this_process
from chronoq.http.auth import TokenTable
from chronoq.http.connections import HEADER_BYTES, KEEP_ALIVE_SECONDS, with_header_deadline
from chronoq.http.context import HttpContext
from chronoq.http.server import create_server
from chronoq.observability.logs import configure_logging
from chronoq.observability.metrics import Metrics

log = logging.getLogger("chronoq.http")
BACKLOG = 2048  # uvicorn's default; it listens on the socket again with its own setting


def serve(run: Invocation) -> int:
    args = run.args
    app = open_app(run.dsn, args.app)
    tokens = TokenTable.from_config(app.config)
    if tokens.open and not is_loopback(args.host):
        raise ConfigError(
            f"--host {args.host} is not a loopback address, and no token is configured: set "
            "CHRONOQ_ADMIN_TOKENS (and CHRONOQ_READ_TOKENS) before serving beyond this machine"
        )
    configure_logging(args.log_level, run.out.stderr, args.log_format)
    app.store.stats()  # fail here, in one line, when the database is unreachable or unmigrated
    metrics = Metrics()
    app.metrics = metrics
    watch_app(metrics, app)
    context = HttpContext(app, tokens, metrics)
    if app.config.session_secret:
        context.secret = app.config.session_secret
    server = create_server(
        context,
        https_only=args.secure_cookies,
        body_seconds=args.body_timeout.total_seconds(),
    )
    try:
        listener = listen(args.host, args.port)
    except ConfigError:
        app.close()
        raise
    if tokens.open:
        log.warning(
            "no API token configured: open access for anyone on this machine, listening on "
            "loopback only (%s)",
            args.host,
            extra={"action": "serve.open_access"},
        )
    log.info(
        "serving the API, the dashboard and /metrics on http://%s:%d/ for %s",
        _url_host(args.host),
        listener.getsockname()[1],
        app.store.dsn_display,
        extra={"action": "serve.start"},
    )
    config = uvicorn.Config(
        server,
        host=args.host,
        port=args.port,
        log_config=None,
        access_log=False,
        http=with_header_deadline(args.header_timeout.total_seconds()),
        h11_max_incomplete_event_size=HEADER_BYTES,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        limit_concurrency=args.max_connections,
    )
    _stop_quietly_after_uvicorn()
    server_info = this_process(new_process_id(), "server", app.tasks.values())
    beacon = Beacon(app.store, lambda: server_info)
    beacon.start()
    try:
        uvicorn.Server(config).run(sockets=[listener])
    finally:
        beacon.stop()
        listener.close()
        app.close()
    log.info("stopped serving", extra={"action": "serve.stop"})
    return EXIT_OK


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on `host:port` (uvicorn's choice of family and options), or
    ConfigError naming the address and the reason."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host.strip("[]"), port))
        # Listening now, not when uvicorn starts: until then another socket bound with
        # SO_REUSEADDR to the same port could still take it.
        listener.listen(BACKLOG)
    except OSError as exc:
        listener.close()
        raise ConfigError(
            f"cannot serve on {host}:{port}: {exc.strerror or exc}; choose another --port or --host"
        ) from None
    return listener


def _stop_quietly_after_uvicorn() -> None:
    """uvicorn shuts down gracefully on SIGTERM/SIGINT, then raises the signal again for the
    handler it found installed; with this one that ends the command with exit code 0 (a
    stop asked for is not a failure) instead of death by signal."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: None)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
