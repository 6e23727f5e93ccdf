"""Which Host headers and browser origins the server answers: DNS-rebinding and cross-site
write protection, as one ASGI middleware (`HostGuard`).

A web page can make the user's browser send requests to 127.0.0.1:8880 in two ways:
- DNS rebinding: evil.example first resolves to the attacker, then to 127.0.0.1. The browser
  thinks it still talks to evil.example, sends `Host: evil.example` and lets the page read the
  answers. Refusing unknown Host headers (400 `invalid_host`) stops this.
- A cross-site POST: a form or fetch() "simple request" needs no CORS preflight, so it reaches
  the server even though the page cannot read the answer. Browsers send `Origin` with every
  cross-site write, so a POST/PUT/PATCH/DELETE whose Origin is present and not allowed gets 403
  `origin_not_allowed`. Requests without Origin (curl, SDKs, Open WebUI's backend) pass.

Allowed hosts: localhost, 127.0.0.1, [::1], the bind address when it is a concrete name or
address, and server.allowed_hosts ('name', '*.domain' or '*'). Bound to 0.0.0.0 or :: with no
allowed_hosts, any Host passes (in Docker the Host is whatever name the published port was
reached by: localhost, the compose service name, a LAN address); the Origin check still holds.
Allowed origins: the server's own (an Origin naming an explicitly allowed host and the port in
its Host header, e.g. the /docs page) and server.allowed_origins. /health and /ready answer any
Host, because probes often call a pod by its address; for a Host not allowed they say the status
only (scope state `foreign_host`). Knows nothing else about routes.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.datastructures import Headers

from ownvoice.server.auth import drain_body
from ownvoice.server.errors import InvalidHost, OriginNotAllowed, error_response

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
WILDCARD_BINDS = ("", "0.0.0.0", "::")
PROBES = ("/health", "/ready")  # probes reach a server by whatever address it has
UNSAFE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
DEFAULT_PORTS = {"http": 80, "https": 443}


def normalise_host(name: str) -> str:
    """'LOCALHOST.' -> 'localhost', '[::1]' -> '::1', '0:0::1' -> '::1'."""
    name = name.strip().lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    try:
        return ipaddress.ip_address(name).compressed
    except ValueError:
        return name


def split_authority(value: str) -> tuple[str, int | None] | None:
    """A Host header or an origin's netloc -> (host, port); None when malformed."""
    if not value or "@" in value or any(c in value for c in "/?#\\ "):
        return None
    try:
        parts = urlsplit("//" + value)
        host, port = parts.hostname, parts.port
    except ValueError:  # a bad port or a bad IPv6 literal
        return None
    if not host:
        return None
    return normalise_host(host), port


@dataclass(frozen=True)
class HostPolicy:
    hosts: frozenset[str]  # exact names and addresses, normalised
    suffixes: tuple[str, ...]  # from '*.domain': '.domain'
    any_host: bool
    origins: frozenset[tuple[str, str, int]]  # (scheme, host, port)
    any_origin: bool

    @classmethod
    def from_settings(cls, server) -> HostPolicy:
        """From the `server` block: host, allowed_hosts, allowed_origins."""
        hosts = set(LOOPBACK_HOSTS)
        bind = normalise_host(server.host)
        if bind not in WILDCARD_BINDS:
            hosts.add(bind)
        suffixes = []
        for pattern in server.allowed_hosts:
            if pattern.startswith("*."):
                suffixes.append(pattern[1:])
            elif pattern != "*":
                hosts.add(normalise_host(pattern))
        any_host = "*" in server.allowed_hosts or (
            bind in WILDCARD_BINDS and not server.allowed_hosts
        )
        origins = set()
        for origin in server.allowed_origins:
            parsed = origin_key(origin)
            if parsed is not None:
                origins.add(parsed)
        return cls(
            hosts=frozenset(hosts),
            suffixes=tuple(suffixes),
            any_host=any_host,
            origins=frozenset(origins),
            any_origin="*" in server.allowed_origins,
        )

    def listed(self, host: str) -> bool:
        """Named by the allowlist itself (the '*' wildcard does not count)."""
        return host in self.hosts or any(host.endswith(s) for s in self.suffixes)

    def host_allowed(self, header: str | None) -> bool:
        if self.any_host:
            return True
        parsed = split_authority(header or "")
        return parsed is not None and self.listed(parsed[0])

    def origin_allowed(self, origin: str, host_header: str | None) -> bool:
        if self.any_origin:
            return True
        key = origin_key(origin)
        if key is None:  # "null" (sandboxed frames, file: pages) or garbage
            return False
        if key in self.origins:
            return True
        # the server's own pages (/docs): same host and port as the request, and that host
        # allowed by name; under a '*' host wildcard a rebinding page would pass otherwise
        scheme, host, port = key
        target = split_authority(host_header or "")
        if target is None or not self.listed(host):
            return False
        target_port = target[1] if target[1] is not None else DEFAULT_PORTS[scheme]
        return (host, port) == (target[0], target_port)


def origin_key(origin: str) -> tuple[str, str, int] | None:
    scheme, sep, rest = origin.strip().lower().partition("://")
    if not sep or scheme not in DEFAULT_PORTS:
        return None
    parsed = split_authority(rest.rstrip("/"))
    if parsed is None:
        return None
    host, port = parsed
    return scheme, host, port if port is not None else DEFAULT_PORTS[scheme]


class HostGuard:
    """ASGI middleware: 400 for a Host not allowed, 403 for a write from a foreign Origin."""

    def __init__(self, app, policy: HostPolicy):
        self.app = app
        self.policy = policy

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = Headers(scope=scope)
        host = headers.get("host")
        exc: Exception | None = None
        if scope["path"] in PROBES and not self.policy.host_allowed(host):
            # probes answer any address, but a page that rebound a name learns only the status
            scope.setdefault("state", {})["foreign_host"] = True
        elif scope["path"] not in PROBES and not self.policy.host_allowed(host):
            exc = InvalidHost(
                f"this server does not answer to the host {host!r}; add the name to "
                "server.allowed_hosts to use it (protection against DNS rebinding)"
            )
        origin = headers.get("origin")
        if (
            exc is None
            and origin is not None
            and scope["method"] in UNSAFE_METHODS
            and not self.policy.origin_allowed(origin, host)
        ):
            exc = OriginNotAllowed(
                f"requests from the web page origin {origin!r} may not change anything here; "
                "add it to server.allowed_origins if that page should use this server"
            )
        if exc is None:
            return await self.app(scope, receive, send)
        await drain_body(
            scope, receive
        )  # read what the client still sends, so the answer reaches it
        await error_response(exc)(scope, receive, send)
