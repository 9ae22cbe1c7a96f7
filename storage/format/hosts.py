"""Host addresses as records store them: "ip:port" text to a packed address and a port.

A record's BORNHOST and STOREHOST are a 4-byte (IPv4) or 16-byte (IPv6) address followed by
an int32 port; the SYSFLAG says which family each is.
"""

from __future__ import annotations

import ipaddress

from ..errors import ConfigError


def parse_host(text: str, *, setting: str) -> tuple[bytes, int]:
    """Parse "ip:port" or "[ipv6]:port" into the packed address and the port."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ConfigError(f"{setting}={text!r}: expected 'ip:port' or '[ipv6]:port'")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        address = ipaddress.ip_address(host)
    except ValueError as error:
        raise ConfigError(f"{setting}={text!r}: {error}") from None
    port = int(port_text)
    if port > 0x7FFFFFFF:
        raise ConfigError(f"{setting}={text!r}: port does not fit a signed 32-bit int")
    return address.packed, port
