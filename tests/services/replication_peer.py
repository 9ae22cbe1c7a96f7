"""A hand-driven replication follower for tests: a raw socket that runs the handshake (with
the right secret or a wrong one) and then says whatever the test wants."""

from __future__ import annotations

import asyncio
import ssl

from mqstore.services.writer.replication_handshake import (
    HELLO,
    MASTER_PROOF,
    check_master,
    decode_hello,
    follower_answer,
)


async def handshake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                    secret: bytes) -> None:
    """The follower's half: answer the hello, check the master's proof."""
    master_nonce = decode_hello(await reader.readexactly(HELLO.size))
    answer, follower_nonce = follower_answer(secret, master_nonce)
    writer.write(answer)
    check_master(secret, master_nonce=master_nonce, follower_nonce=follower_nonce,
                 data=await reader.readexactly(MASTER_PROOF.size))


async def open_follower(port: int, *, secret: bytes = b"", ssl_context: ssl.SSLContext | None
                        = None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to a master on 127.0.0.1:`port` that proved `secret`."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ssl_context)
    await handshake(reader, writer, secret=secret)
    return reader, writer
