"""Where the tool may connect on a platform's word: the addresses of URLs that come from outside
(a dynamic registration's ``openid_configuration`` and the endpoints it names).

Loopback, link-local, private and other non-global addresses (``127.0.0.0/8``, ``10.0.0.0/8``,
``169.254.0.0/16``, ``::1``, ``fc00::/7`` ...) are refused unless ``lti.toml`` allows their network
(``[tool] allow_private_networks = ["10.1.0.0/16"]``). The check is made on the addresses the host
name resolves to, at the moment of connecting, and the connection goes to the address that was
checked: a name that resolves to a public address when checked and a private one when used
(DNS rebinding) cannot slip through. No proxy from the environment is used.

The same holds after a dynamic registration: the platform it made keeps its word-only URLs (its
key set, token endpoint, and the line-item and membership URLs its launches name), so every later
connection for it goes through ``guarded_client`` too (``PlatformClients``). A platform an admin
wrote into ``lti.toml`` is the admin's word and is reached as configured."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

import httpcore2
import httpx2

from ...errors import AddressRefused as AddressRefused  # re-exported: registration catches it

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def networks(values: object) -> tuple[Network, ...]:
    """``allow_private_networks`` of ``lti.toml``: CIDRs ("10.0.0.0/8") or single addresses."""
    if isinstance(values, str) or not isinstance(values, list | tuple):
        raise ValueError("allow_private_networks must be a list, e.g. [\"10.0.0.0/8\", \"127.0.0.1\"]")
    found = []
    for value in values:
        if not isinstance(value, str):
            raise ValueError(f"allow_private_networks: {value!r} is not a network such as \"10.0.0.0/8\"")
        found.append(ipaddress.ip_network(value.strip(), strict=False))
    return tuple(found)


def _plain(address: Address) -> Address:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    return address


def refused(address: Address, allowed: tuple[Network, ...]) -> bool:
    """Whether the tool may not connect to ``address``: not a global unicast address, and not in a
    network the configuration allows."""
    address = _plain(address)
    if any(address.version == n.version and address in n for n in allowed):
        return False
    return not address.is_global or address.is_multicast


def resolve(host: str, port: int, allowed: tuple[Network, ...]) -> list[str]:
    """The addresses of ``host`` (resolved once), every one of them allowed; else AddressRefused."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        raise AddressRefused(f"the host {host!r} could not be resolved ({type(e).__name__})") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    bad = [a for a in addresses if refused(ipaddress.ip_address(a.split("%", 1)[0]), allowed)]
    if not addresses or bad:
        raise AddressRefused(f"the host {host!r} resolves to {', '.join(bad) or 'no address'}: a loopback, "
                             f"link-local or private address, which lti.toml does not allow (allow_private_networks)")
    return addresses


class GuardedBackend(httpcore2.SyncBackend):
    """Connects only to allowed addresses, and to the very address it checked."""

    def __init__(self, allowed: tuple[Network, ...]) -> None:
        self.allowed = allowed

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
        last: Exception | None = None
        for address in resolve(host, port, self.allowed):
            try:
                return super().connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore2.ConnectError as e:  # the next address of the host, as socket.create_connection does
                last = e
        assert last is not None
        raise last


def guarded_client(allowed: tuple[Network, ...], timeout: float = 15) -> httpx2.Client:
    """An HTTP client for URLs from outside: no redirects, no proxies, only allowed addresses."""
    transport = httpx2.HTTPTransport(trust_env=False)
    transport._pool = httpcore2.ConnectionPool(ssl_context=transport._pool._ssl_context,
                                               network_backend=GuardedBackend(allowed))
    return httpx2.Client(transport=transport, timeout=timeout, follow_redirects=False, trust_env=False)


class PlatformClients:
    """HTTP clients for platforms' URLs, made when first needed and closed together: a guarded one for
    platforms a dynamic registration made (``Platform.registered``), a plain one for configured ones.
    ``plain``, when given, is used for both (a test's client) and is not closed here."""

    def __init__(self, allowed: tuple[Network, ...], plain: httpx2.Client | None = None, timeout: float = 15) -> None:
        self.allowed, self.timeout = allowed, timeout
        self._given = plain
        self._made: dict[bool, httpx2.Client] = {}

    def client(self, registered: bool) -> httpx2.Client:
        if self._given is not None:
            return self._given
        if registered not in self._made:
            self._made[registered] = (guarded_client(self.allowed, self.timeout) if registered
                                      else httpx2.Client(timeout=self.timeout))
        return self._made[registered]

    def __enter__(self) -> PlatformClients:
        return self

    def __exit__(self, *exc: object) -> None:
        for made in self._made.values():
            made.close()
        self._made.clear()
