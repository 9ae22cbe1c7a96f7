"""`host:port` text as the settings take it (RocketMQ separates lists of them with ';')."""

from __future__ import annotations


def is_host_port(address: str) -> bool:
    """A host (a name, IPv4, or [IPv6]) and a port in 1..65535."""
    host, _, port = address.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) <= 65535


def split_addresses(text: str) -> tuple[str, ...]:
    """`text` split at ';', blanks dropped."""
    return tuple(item.strip() for item in text.split(";") if item.strip())
