"""Which requests a server of lander answers: those for this machine, from its own pages.

A page on any web site can make its visitor's browser send requests to a server on the
visitor's loopback or LAN, by a name its own DNS points there (DNS rebinding). The
browser then sends that name as the request's ``Host``; a server that answers only the
names and addresses of this machine cannot be reached that way. A write (``POST``) is
taken only from the server's own origin (the browser's ``Origin``), so another site's page
cannot make a visitor's browser write a file here.

Names beyond this machine's own (a reverse proxy's, a VPN's like Tailscale's, the address a
container's published port is reached by) are listed in :data:`ALLOW_HOSTS_VARIABLE`,
separated by commas; ``*`` there answers any name (a proxy in front that checks names itself).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Mapping

ALLOW_HOSTS_VARIABLE = "LANDER_ALLOW_HOSTS"
"""Extra host names the servers answer, comma-separated (a proxy's or a VPN's name)."""

_EVERY_INTERFACE = ("", "0.0.0.0", "::")


def host_name(header: str) -> str:
    """The name or address of a ``Host`` header (or an ``Origin``'s authority), without its
    port, brackets or trailing dot, in lower case."""
    value = header.strip().lower()
    if value.startswith("["):  # an IPv6 literal: [::1]:8080
        return value[1:].split("]", 1)[0]
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


def serves_every_interface(host: str) -> bool:
    """True when a server bound to ``host`` is reachable from the LAN (every interface)."""
    return host.strip() in _EVERY_INTERFACE


def _is_this_machines_address(text: str) -> bool:
    """True for a loopback address, or one this machine holds (it can be bound here)."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    if address.is_unspecified or address.is_multicast:
        return False
    if address.is_loopback:
        return True
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((text, 0))
        except OSError:
            return False
    return True


class LocalNames:
    """The names and addresses a request's ``Host`` may give.

    :param served_host: the address the server was asked to serve on (``--host``); a name
        given there is answered too.
    :param environ: where :data:`ALLOW_HOSTS_VARIABLE` is read (the process's environment).
    """

    def __init__(self, served_host: str, environ: Mapping[str, str] | None = None) -> None:
        machine = socket.gethostname().lower()
        names = {"localhost", machine, f"{machine}.local", socket.getfqdn().lower()}
        if not serves_every_interface(served_host):
            names.add(host_name(served_host))
        extra = (environ if environ is not None else os.environ).get(ALLOW_HOSTS_VARIABLE, "")
        names.update(host_name(name) for name in extra.split(",") if name.strip())
        self.any_name = "*" in names
        self.names = frozenset(name for name in names if name)
        self._addresses: dict[str, bool] = {}

    def allows(self, host_header: str | None) -> bool:
        """True when ``host_header`` names this machine (a request without one is refused:
        HTTP/1.1 requires it, and every browser sends it)."""
        if not host_header:
            return False
        name = host_name(host_header)
        if name in self.names or self.any_name:
            return True
        known = self._addresses.get(name)
        if known is None:
            known = _is_this_machines_address(name)
            if len(self._addresses) < 1024:  # a stranger's many names: never a growing table
                self._addresses[name] = known
        return known

    def same_origin(self, host_header: str | None, headers: Mapping[str, str]) -> bool:
        """True when a write comes from this server's own page: its ``Origin`` is
        ``http://HOST`` of the request, or, sent by a client that is no browser, it has
        neither an ``Origin`` nor a ``Sec-Fetch-Site`` that says another site.

        :param headers: the request's headers, names in lower case.
        """
        origin = headers.get("origin")
        if origin is not None:
            return bool(host_header) and origin.strip().lower() == f"http://{host_header}".lower()
        return headers.get("sec-fetch-site", "same-origin").lower() in ("same-origin", "none")

    def refusal(self, host_header: str | None) -> str:
        """Why a request for ``host_header`` is refused, and what to do when it was meant."""
        shown = host_name(host_header) if host_header else "no Host"
        return (
            f"this server answers requests for this machine only, not {shown!r}: open it by "
            f"this machine's name or address, or list the name in {ALLOW_HOSTS_VARIABLE}"
        )


def who_can_reach(host: str, flag: str = "--host") -> str:
    """Who can reach a server bound to ``host``, and the flag that changes it, for the line
    each server prints when it starts."""
    if serves_every_interface(host):
        return f"the LAN can reach it; {flag} 127.0.0.1 keeps it to this machine"
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host_name(host) == "localhost"
    if loopback:
        return f"this machine only; {flag} 0.0.0.0 serves the LAN"
    return f"whoever reaches {host}; {flag} 127.0.0.1 keeps it to this machine"
