"""The HTTP endpoint: parse a listen address, serve a CollectorRegistry on /metrics.

Listens on 127.0.0.1 unless told otherwise: the metrics say what runs on a server,
so exposing them beyond the host is the user's explicit choice (``--listen 0.0.0.0:9623``).
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import threading
from dataclasses import dataclass

from tuner.core.errors import UsageError


@dataclass(frozen=True)
class ListenAddress:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_listen(text: str) -> ListenAddress:
    """``HOST:PORT`` (HOST an IP address or ``localhost``; ``[::1]:PORT`` for IPv6; port 0 picks a free one)."""
    raw = (text or "").strip()
    fix = "give HOST:PORT, e.g. --listen 127.0.0.1:9623"
    if raw.startswith("["):
        host, sep, port_text = raw[1:].partition("]:")
    else:
        host, sep, port_text = raw.rpartition(":")
    if not sep or not port_text:
        raise UsageError(f"listen address {text!r} is not HOST:PORT; {fix}")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise UsageError(f"listen address {text!r} has no valid port (0-65535); {fix}")
    if not host:
        raise UsageError(f"listen address {text!r} names no host; {fix} (0.0.0.0:PORT listens on every interface)")
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise UsageError(f"listen address {text!r}: {host!r} is not an IP address; {fix}") from None
    return ListenAddress(host="127.0.0.1" if host == "localhost" else host, port=int(port_text))


@dataclass
class MetricsServer:
    """A running /metrics endpoint (threaded; each scrape runs the registry's collectors)."""

    address: ListenAddress
    _httpd: object
    _thread: threading.Thread

    @property
    def url(self) -> str:
        return f"http://{self.address}/metrics"

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def serve(registry, listen: str | ListenAddress) -> MetricsServer:
    """Start serving ``registry`` on ``listen``; a clear UsageError if the address cannot be bound."""
    from prometheus_client import start_http_server

    addr = listen if isinstance(listen, ListenAddress) else parse_listen(listen)
    try:
        httpd, thread = start_http_server(addr.port, addr=addr.host, registry=registry)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(f"listen address {addr} is already in use by another process; "
                             f"stop it or give another --listen (port 0 picks a free one)") from None
        if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) or isinstance(exc, socket.gaierror):
            raise UsageError(f"listen address {addr} is not an address of this host; "
                             "give one of its addresses, e.g. 127.0.0.1:9623") from None
        if exc.errno == errno.EACCES:
            raise UsageError(f"listen address {addr} needs privileges (port below 1024); "
                             "give a port above 1023") from None
        raise
    port = httpd.server_address[1]
    return MetricsServer(address=ListenAddress(addr.host, port), _httpd=httpd, _thread=thread)
