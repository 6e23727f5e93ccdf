"""The Wyoming listener: started beside the HTTP API by `ownvoice serve` when the config has a
`wyoming:` block, on the same event loop, models, queues and batches.

    server = WyomingServer(options, service)   # service: service.speech.SpeechService
    await server.start()          # listens on options.uri (tcp://host:port or unix:///path)
    ...
    await server.stop()           # running generations end with reason "shutdown"

At most `max_connections` clients are served at once: a connection past that is closed as it
is accepted (an idle one closes after limits.idle_timeout_s, connection.py), so a flood of
half-open connections cannot take the process's file descriptors from HTTP. With
`zeroconf: true` the TCP listener is announced on the LAN (mDNS, `_wyoming._tcp`), which
Home Assistant's discovery picks up; never for a loopback address, which no other machine can
reach.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from dataclasses import dataclass
from urllib.parse import urlparse

from ownvoice.errors import InvalidInput
from ownvoice.wyoming.connection import Connection
from ownvoice.wyoming.events import MAX_HEADER_BYTES

log = logging.getLogger("ownvoice.wyoming")


@dataclass(frozen=True)
class WyomingOptions:
    uri: str  # tcp://host:port or unix:///path
    voice: str | None = None  # for requests that name none; None = the first listed voice
    seed: int | None = None  # fixed: the same text sounds the same every time
    zeroconf: bool = False  # announce the listener on the LAN for Home Assistant's discovery
    max_connections: int = 64  # clients served at once; more are closed as they arrive


def parse_uri(uri: str) -> tuple[str, str, int | None]:
    """('tcp', host, port) or ('unix', path, None); InvalidInput for anything else."""
    parts = urlparse(uri)
    try:
        port = parts.port
    except ValueError:  # not a number, or out of range
        port = None
    if parts.scheme == "tcp" and parts.hostname and port is not None:
        return "tcp", parts.hostname, port
    if parts.scheme == "unix" and parts.path:
        return "unix", parts.path, None
    raise InvalidInput(
        f"wyoming.uri must be tcp://host:port or unix:///path, got {uri!r}", param="wyoming.uri"
    )


class WyomingServer:
    def __init__(self, options: WyomingOptions, service):
        self.options = options
        self.service = service
        self.kind, self.host, self.port = parse_uri(options.uri)
        self._server: asyncio.Server | None = None
        self._connections: set[Connection] = set()
        self._zeroconf = None
        self.turned_away = 0  # connections closed for want of a place (max_connections)

    async def start(self) -> None:
        if self.kind == "tcp":
            self._server = await asyncio.start_server(
                self._accept, self.host, self.port, limit=MAX_HEADER_BYTES
            )
            self.port = self._server.sockets[0].getsockname()[1]  # port 0: the one chosen
        else:
            self._server = await asyncio.start_unix_server(
                self._accept, self.host, limit=MAX_HEADER_BYTES
            )
        where = f"tcp://{self.host}:{self.port}" if self.kind == "tcp" else self.options.uri
        log.info("wyoming: listening on %s (Home Assistant: add the Wyoming integration)", where)
        if self.kind == "tcp" and not _loopback(self.host):
            log.warning(
                "wyoming: listening on %s; the Wyoming protocol has no authentication, so "
                "anyone who can reach this port can use every voice (keep it on a trusted "
                "network)",
                self.host,
            )
        if self.options.zeroconf:
            await self._announce()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        await asyncio.gather(
            *(c.shutdown() for c in list(self._connections)), return_exceptions=True
        )
        if self._zeroconf is not None:
            with contextlib.suppress(Exception):
                await self._zeroconf.async_close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._connections) >= self.options.max_connections:
            self.turned_away += 1
            if self.turned_away in (1, 10, 100) or self.turned_away % 1000 == 0:  # not a flood
                log.warning(
                    "wyoming: %d connection(s) refused so far: %d open is wyoming."
                    "max_connections",
                    self.turned_away, len(self._connections),
                )  # fmt: skip
            writer.close()
            return
        connection = Connection(reader, writer, self.service, self.options)
        self._connections.add(connection)
        try:
            await connection.run()
        finally:
            self._connections.discard(connection)

    async def _announce(self) -> None:
        if self.kind != "tcp" or _loopback(self.host):
            log.warning(
                "wyoming: zeroconf is on but the listener (%s) is not reachable from other "
                "machines; not announced (listen on 0.0.0.0 or a LAN address)",
                self.options.uri,
            )
            return
        from zeroconf import IPVersion
        from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

        address = self.host if self.host not in ("0.0.0.0", "::") else _lan_address()
        name = f"ownvoice-{socket.gethostname()}"[:63]
        info = AsyncServiceInfo(
            "_wyoming._tcp.local.",
            f"{name}._wyoming._tcp.local.",
            addresses=[socket.inet_aton(address)],
            port=self.port,
            properties={"program": "ownvoice"},
        )
        self._zeroconf = AsyncZeroconf(ip_version=IPVersion.V4Only)
        # a second server on this host gets "name (2)" instead of failing to start
        await self._zeroconf.async_register_service(info, allow_name_change=True)
        log.info("wyoming: announced as %s on %s:%d (zeroconf)", info.name, address, self.port)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _lan_address() -> str:
    """The address other machines reach this one at: the source of a route to the mDNS group."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("224.0.0.251", 5353))  # no packet is sent: this only picks a route
        return probe.getsockname()[0]
