"""``GET /metrics`` for sparktop's judgements, served on the event loop that polls.

``parse_listen("127.0.0.1:9464")`` → (host, port); a bare ``9464`` or ``:9464`` means
loopback. Any other address must be spelled out (an IP literal, ``[::1]:9464`` for IPv6, or
``0.0.0.0`` for every interface), never inferred from a host name. :class:`MetricsEndpoint`
binds the socket at once (so a taken port is a usage error before anything else starts) and
serves it with aiohttp on the running loop: the collector reads the cluster state on the
same loop that updates it, no thread. Every label value and HELP text it serves goes through
:func:`~sparktop.safe_text.printable` (a node's GPU UUID or an engine's message can hold ESC
and BEL, and ``curl …/metrics`` in a terminal would run them). A client has
:data:`CLIENT_TIMEOUT_S` to send its request and read the answer (a slowloris client that
opens sockets and sends nothing is closed).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Iterator

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from sparktop.errors import UserError
from sparktop.exporter.request_log import request_logger
from sparktop.safe_text import printable

DEFAULT_PORT = 9464


def parse_listen(text: str, flag: str = "--listen") -> tuple[str, int]:
    """``HOST:PORT``, ``[V6]:PORT``, ``:PORT`` or ``PORT`` → (host, port); UserError if bad,
    naming ``flag`` (the option the address was given with)."""
    raw = text.strip()
    host, _, port_text = raw.rpartition(":") if ":" in raw else ("", "", raw)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    host = host or "127.0.0.1"
    try:
        port = int(port_text)
        ipaddress.ip_address(host)
    except ValueError:
        raise UserError(
            f"{flag} {text!r}: expected HOST:PORT with an IP address (127.0.0.1:9464, "
            "[::1]:9464, 0.0.0.0:9464) or a port for loopback"
        ) from None
    if not 1 <= port <= 65535:
        raise UserError(f"{flag} {text!r}: port must be 1-65535")
    return host, port


CLIENT_TIMEOUT_S = 10.0
"""Seconds a client may take between connecting and its request's last header, and an idle
keep-alive connection is kept (Prometheus scrapes every few seconds and sends at once)."""


class PrintableCollector(Collector):
    """``collector``'s metrics with every label value and HELP text made printable."""

    def __init__(self, collector: Collector) -> None:
        self.collector = collector

    def collect(self) -> Iterable[Metric]:
        return _printable(self.collector.collect())

    def describe(self) -> Iterable[Metric]:
        return ()


def _printable(metrics: Iterable[Metric]) -> Iterator[Metric]:
    for metric in metrics:
        metric.documentation = printable(metric.documentation)
        metric.samples = [
            s._replace(labels={k: printable(v) for k, v in s.labels.items()})
            if not all(v.isprintable() for v in s.labels.values())
            else s
            for s in metric.samples
        ]
        yield metric


def is_loopback(host: str) -> bool:
    return ipaddress.ip_address(host).is_loopback


class MetricsEndpoint:
    """A bound socket serving one collector at ``/metrics`` once :meth:`start` runs."""

    def __init__(
        self,
        listen: str,
        collector: Collector | None = None,
        *,
        client_timeout_s: float = CLIENT_TIMEOUT_S,
        flag: str = "--listen",
    ) -> None:
        self.host, port = parse_listen(listen, flag)
        self.client_timeout_s = client_timeout_s
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((self.host, port))
            self.sock.listen(64)
        except OSError as exc:
            self.sock.close()
            raise UserError(f"{flag} {listen}: cannot listen there ({exc.strerror})") from None
        self.port = int(self.sock.getsockname()[1])
        self.registry = CollectorRegistry(auto_describe=False)
        if collector is not None:
            self.register(collector)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    def register(self, collector: Collector) -> None:
        self.registry.register(PrintableCollector(collector))

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def start(self) -> None:
        app = web.Application()
        app.add_routes([web.get("/metrics", self._metrics)])
        self._runner = web.AppRunner(
            app,
            access_log=None,
            handle_signals=False,
            # A bad request is one short rate-limited line, not aiohttp's traceback.
            logger=request_logger(),
            # aiohttp closes a connection with no complete request after this, from the
            # moment it connects (its default is an hour).
            keepalive_timeout=self.client_timeout_s,
        )
        await self._runner.setup()
        await web.SockSite(self._runner, self.sock).start()

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self.sock.close()
