"""Which hosts a connector may reach: never one that resolves into CONNECTORS_BLOCKED_NETWORKS.

A source's address is chosen by whoever may write a collection, and what the connector reads becomes
documents they can read: without this check, a web source pointed at a cloud's metadata service
(169.254.169.254) would index the server's own credentials. Intranet addresses stay allowed, since
crawling an intranet is what a web source is for; an operator blocks more networks with the setting.
The check runs when a sync starts; a host whose DNS answer changes during the sync is not re-checked.
"""

from __future__ import annotations

import ipaddress
import socket

from django.conf import settings

from connectors.base import SourceError


def check_host(host: str) -> None:
    """Raise SourceError when `host` does not resolve, or resolves to an address in a blocked network."""
    networks = [ipaddress.ip_network(network, strict=False) for network in settings.CONNECTORS_BLOCKED_NETWORKS]
    try:
        answers = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise SourceError(f"Cannot reach {host}: the name does not resolve.", transient=True) from exc
    for *_, address in answers:
        ip = ipaddress.ip_address(str(address[0]).split("%", 1)[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if any(ip in network for network in networks):
            raise SourceError(f"{host} is at {ip}, in a network Cairn does not connect to (CONNECTORS_BLOCKED_NETWORKS).")
