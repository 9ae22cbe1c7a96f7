"""Address patterns of the users file, RocketMQ's forms and networks."""

from __future__ import annotations

import pytest

from mqstore.services.auth.addresses import compile_pattern, host_of
from mqstore.services.auth.permissions import UsersFileError


@pytest.mark.parametrize(("pattern", "inside", "outside"), [
    ("*", ["1.2.3.4", "::1"], []),
    ("192.168.1.7", ["192.168.1.7"], ["192.168.1.8"]),
    ("192.168.1.7,10.0.0.8", ["10.0.0.8", "192.168.1.7"], ["10.0.0.9"]),
    ("10.10.*", ["10.10.0.1", "10.10.255.3"], ["10.11.0.1"]),
    ("10.10.*.*", ["10.10.9.9"], ["11.10.9.9"]),
    ("10.10.1-5.*", ["10.10.1.0", "10.10.5.255"], ["10.10.6.0"]),
    ("192.168.0.{100,101}", ["192.168.0.100", "192.168.0.101"], ["192.168.0.102"]),
    ("10.0.0.0/8", ["10.200.1.1"], ["11.0.0.1", "::1"]),
    ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["127.0.0.1"]),
])
def test_patterns_match_what_they_say(pattern: str, inside: list[str],
                                      outside: list[str]) -> None:
    match = compile_pattern(pattern, where="w")
    assert all(match(address) for address in inside)
    assert not any(match(address) for address in outside)


@pytest.mark.parametrize("pattern", ["", "10.0.300.1", "10.5-1.*", "1.2.3", "a.b.c.d",
                                     "1.2.3.4.5", "::g", "10.0.0.0/40"])
def test_bad_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(UsersFileError, match=r"^where: "):
        compile_pattern(pattern, where="where")


@pytest.mark.parametrize(("peer", "host"), [("10.0.0.9:50000", "10.0.0.9"),
                                             ("[::1]:9876", "::1"),
                                             ("[::ffff:10.1.2.3]:9876", "10.1.2.3"),
                                             ("::1", "::1")])
def test_the_host_of_a_peer_address(peer: str, host: str) -> None:
    assert host_of(peer) == host
