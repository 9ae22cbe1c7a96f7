"""The kernel's view of a process's listening sockets (/proc), for the transport tests."""

from __future__ import annotations

import os

TCP_LISTEN = "0A"


def listening_addresses(pid: int) -> list[str]:
    """The local addresses ("127.0.0.1:8081", "[::]:9876") of `pid`'s listening sockets."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    addresses = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as file:
            next(file)
            for line in file:
                fields = line.split()
                if fields[3] == TCP_LISTEN and fields[9] in inodes:
                    addresses.append(_address(fields[1]))
    return addresses


def _address(hex_address: str) -> str:
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        return f"{'.'.join(str(b) for b in reversed(raw))}:{int(port, 16)}"
    words = [raw[i:i + 4][::-1].hex() for i in range(0, 16, 4)]
    return f"[{':'.join(words)}]:{int(port, 16)}"
