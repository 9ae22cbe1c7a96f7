"""Client address patterns of the users file (`whiteRemoteAddress`,
`globalWhiteRemoteAddresses`), as RocketMQ's plain ACL writes them:

    *                               any address
    192.168.1.7                     one address (IPv4 or IPv6)
    192.168.1.7,10.0.0.8            a list of addresses
    10.10.*   10.10.*.*             trailing segments: anything
    10.10.1-5.*                     a range in a segment
    192.168.0.{100,101}             a choice in the last segment
    10.0.0.0/8  fd00::/8            a network (an mqstore addition)

A pattern that is none of these is a `UsersFileError` at start, never a silent no-match.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from mqstore.services.auth.permissions import UsersFileError

Matcher = Callable[[str], bool]


def compile_pattern(text: object, *, where: str) -> Matcher:
    """A function telling whether a client address (text, no port) matches `text`."""
    if not isinstance(text, str) or not text.strip():
        raise UsersFileError(f"{where}: an address pattern must be non-empty text, got "
                             f"{text!r}")
    pattern = text.strip()
    if pattern == "*":
        return lambda address: True
    try:
        if "/" in pattern:
            network = ipaddress.ip_network(pattern, strict=False)
            return lambda address: _in_network(address, network)
        if "," in pattern and "{" not in pattern:
            exact = frozenset(str(ipaddress.ip_address(part.strip()))
                              for part in pattern.split(","))
            return lambda address: _normal(address) in exact
        if ":" in pattern:
            one = str(ipaddress.ip_address(pattern))
            return lambda address: _normal(address) == one
        return _ipv4_segments(pattern)
    except ValueError as error:
        raise UsersFileError(f"{where}: address pattern {pattern!r} is not valid: {error}") \
            from None


def _ipv4_segments(pattern: str) -> Matcher:
    parts = pattern.rstrip(".").split(".")
    if len(parts) > 4 or (len(parts) < 4 and parts[-1] != "*"):
        raise ValueError("expected four segments, or fewer ending in *")
    sets = [_segment(part, last=index == len(parts) - 1) for index, part in enumerate(parts)]
    sets += [range(256)] * (4 - len(sets))

    def match(address: str) -> bool:
        pieces = address.split(".")
        if len(pieces) != 4 or not all(piece.isdigit() for piece in pieces):
            return False
        return all(int(piece) in allowed for piece, allowed in zip(pieces, sets, strict=True))

    return match


def _segment(part: str, *, last: bool) -> range | frozenset[int]:
    if part == "*":
        return range(256)
    if part.startswith("{") and part.endswith("}") and last:
        return frozenset(_octet(item) for item in part[1:-1].split(","))
    if "-" in part:
        low, _, high = part.partition("-")
        if _octet(low) > _octet(high):
            raise ValueError(f"range {part} is empty")
        return range(_octet(low), _octet(high) + 1)
    return frozenset({_octet(part)})


def _octet(text: str) -> int:
    text = text.strip()
    if not text.isdigit() or int(text) > 255:
        raise ValueError(f"{text!r} is not 0..255")
    return int(text)


def _normal(address: str) -> str:
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return address


def _in_network(address: str, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    try:
        return ipaddress.ip_address(address) in network
    except ValueError:
        return False


def host_of(peer_address: str) -> str:
    """The address of "ip:port" or "[ipv6]:port" (an IPv4-mapped IPv6 address as IPv4)."""
    host = peer_address.rpartition(":")[0] if peer_address.count(":") == 1 or \
        peer_address.startswith("[") else peer_address
    host = host.strip("[]")
    if host.startswith("::ffff:") and "." in host:
        return host[len("::ffff:"):]
    return host
