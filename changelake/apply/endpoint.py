"""A streaming run's HTTP endpoint, on its metrics port: `/metrics` for Prometheus, and
`/served` for a `changelake query` that cannot read the run's served.json (the host of the
compose file's pipeline container): GET lists the views and the Spark Connect port, POST with
`{"views": [...]}` has those brought up to date first (serve/served.py). Neither says the token.

A port that is taken costs the run its endpoint, never the run itself.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.registry import CollectorRegistry

from changelake import run_log
from changelake.apply.metrics import RunMetrics
from changelake.serve.served import SERVED_PATH
from changelake.settings import Settings

if TYPE_CHECKING:
    from changelake.serve.served import ServedViews

Respond = Callable[..., Any]
MAX_BODY = 64 * 1024  # a request names views: a few hundred bytes


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a query waiting for its views never holds up the run's exit


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Prometheus scrapes every few seconds: no line each."""


def serve(
    settings: Settings,
    port: int,
    collector: RunMetrics,
    served: Callable[[], ServedViews | None],
    out: Callable[[str], None],
) -> Any:
    """Serve the endpoint on `port` (a server: `shutdown()` then `server_close()`); None, and a
    warning, when the port is taken. `served()`: the views the run serves queries, when it does."""
    registry = CollectorRegistry()
    registry.register(collector)
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], respond: Respond) -> Iterable[bytes]:
        views = served()
        if environ.get("PATH_INFO") != SERVED_PATH:
            return metrics(environ, respond)  # type: ignore[no-any-return]
        if views is None:
            return _answer(respond, "404 Not Found", {"error": "this run serves no queries"})
        if environ.get("REQUEST_METHOD") == "POST":
            try:
                length = max(0, min(int(environ.get("CONTENT_LENGTH") or 0), MAX_BODY))
                asked = json.loads(environ["wsgi.input"].read(length) or b"{}").get("views")
            except (ValueError, AttributeError) as exc:
                return _answer(respond, "400 Bad Request", {"error": f"not a request: {exc}"})
            names = [str(n) for n in asked] if isinstance(asked, list) else None
            return _answer(respond, "200 OK", views.ask(names))
        return _answer(respond, "200 OK", views.listing())

    where = settings.metrics_bind
    server_class = _Server6 if ":" in where else _Server  # an IPv6 address binds as one
    try:
        server = make_server(where, port, app, server_class, handler_class=_Quiet)
    except OSError as exc:
        out(run_log.warning(f"metrics and /served not served: port {port} on {where}: {exc}"))
        return None
    threading.Thread(target=server.serve_forever, name="changelake-http", daemon=True).start()
    out(f"metrics for Prometheus on http://{settings.metrics_bind}:{port}/metrics")
    return server


def _answer(respond: Respond, status: str, doc: dict[str, object]) -> list[bytes]:
    body = json.dumps(doc).encode()
    respond(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
