"""A TCP forward from 127.0.0.1 on the host into a network namespace: how the tests and
kubectl on the host reach the real node's API server, which listens only inside the node's
namespace.  The listening socket is made in the host's namespace first; then the process
joins the node's namespace (setns), so every connection it opens towards the target is made
there.  Nothing is routed between the namespaces: only this process carries bytes, and
only from 127.0.0.1.

    python -m e2e.netns_forward --netns /run/netns/NAME --listen-port 16443 \
        --target 10.85.0.1:6443
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import os
import socket
import sys

CLONE_NEWNET = 0x40000000
CONNECT_TIMEOUT_S = 10.0
CHUNK_BYTES = 65536


def join_netns(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"setns({path}): {os.strerror(error)}")
    finally:
        os.close(fd)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(CHUNK_BYTES):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def serve(listener: socket.socket, host: str, port: int) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            target = await asyncio.wait_for(asyncio.open_connection(host, port),
                                            CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError):
            writer.close()
            return
        await asyncio.gather(_pipe(reader, target[1]), _pipe(target[0], writer))

    server = await asyncio.start_server(handle, sock=listener)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--netns", required=True, help="the namespace's file (/run/netns/X)")
    parser.add_argument("--listen-port", type=int, required=True)
    parser.add_argument("--target", required=True, help="HOST:PORT inside the namespace")
    arguments = parser.parse_args(argv)
    host, port = arguments.target.rsplit(":", 1)
    listener = socket.create_server(("127.0.0.1", arguments.listen_port))
    join_netns(arguments.netns)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(listener, host, int(port)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
