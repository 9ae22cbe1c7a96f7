"""A hand-driven replication follower for tests: a raw socket that runs the handshake (with
the right secret or a wrong one) and then says whatever the test wants."""

from __future__ import annotations

import asyncio
import ssl

from mqstore.services.common.links.mutual_proof import HELLO, LISTENER_PROOF
from mqstore.services.writer.replication_handshake import REPLICATION


async def handshake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                    secret: bytes) -> None:
    """The follower's half: answer the hello, check the master's proof."""
    answer, master_nonce, follower_nonce = REPLICATION.dialer_proof(
        secret, await reader.readexactly(HELLO.size))
    writer.write(answer)
    REPLICATION.check_listener(secret, master_nonce, follower_nonce,
                               await reader.readexactly(LISTENER_PROOF.size))


async def open_follower(port: int, *, secret: bytes = b"", ssl_context: ssl.SSLContext | None
                        = None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to a master on 127.0.0.1:`port` that proved `secret`."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ssl_context)
    await handshake(reader, writer, secret=secret)
    return reader, writer
